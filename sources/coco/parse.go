package coco

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"warehouse-etl/sources"
)

// maxElementBytes bounds one entry of images, annotations or categories
// (and one element of any other top-level value) as the decoder buffers
// it. The largest real entries are crowd annotations whose RLE counts
// describe a big image: a few hundred KiB. A larger one stops New rather
// than growing the decoder's buffer with the file.
const maxElementBytes = 64 << 20

// readChunk is the most one Read hands the decoder, so that what it reads
// ahead of the entry it decodes stays small against maxElementBytes.
const readChunk = 256 << 10

// errElementTooLarge is returned by meteredReader past maxElementBytes.
var errElementTooLarge = errors.New("entry too large")

// meteredReader feeds the JSON decoder: it hashes every byte, counts the
// bytes read since the last mark and fails once there are more than
// limit of them.
type meteredReader struct {
	r     io.Reader
	h     hash.Hash
	n     int64 // bytes since mark
	total int64
	limit int64
}

func (m *meteredReader) mark() { m.n = 0 }

func (m *meteredReader) Read(p []byte) (int, error) {
	if m.n > m.limit {
		return 0, errElementTooLarge
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	n, err := m.r.Read(p)
	m.h.Write(p[:n])
	m.n += int64(n)
	m.total += int64(n)
	return n, err
}

// fieldState says what a field of an entry held.
type fieldState uint8

const (
	absent    fieldState = iota // not in the object, or null
	good                        // the right type
	wrongType                   // present with a value this field cannot take
)

// The field types below read one value of an entry without allocating
// (except strings) and never fail: a value of the wrong type is recorded
// as wrongType, so that one bad field makes a reason rather than an error.
// encoding/json hands an Unmarshaler the raw value, null included.

// intField is a JSON integer in int64 range (no fraction, no exponent).
type intField struct {
	state fieldState
	v     int64
}

func (f *intField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = intField{}
		return nil
	}
	v, ok := parseInt(b)
	if !ok {
		*f = intField{state: wrongType}
		return nil
	}
	*f = intField{state: good, v: v}
	return nil
}

// idField is an image id: a JSON integer 0..2^64-1.
type idField struct {
	state fieldState
	v     uint64
}

func (f *idField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = idField{}
		return nil
	}
	v, ok := parseUint(b)
	if !ok {
		*f = idField{state: wrongType}
		return nil
	}
	*f = idField{state: good, v: v}
	return nil
}

// crowdField is iscrowd: 0 or 1, or false or true.
type crowdField struct {
	state fieldState
	v     bool
}

func (f *crowdField) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		*f = crowdField{}
	case "0", "false":
		*f = crowdField{state: good}
	case "1", "true":
		*f = crowdField{state: good, v: true}
	default:
		*f = crowdField{state: wrongType}
	}
	return nil
}

// boxField is bbox: an array of exactly four numbers. A number beyond
// float64 range becomes ±Inf, which the box checks reject: finiteness is
// a box check, not a schema one (as in capture labels).
type boxField struct {
	state fieldState
	v     [4]float64
}

func (f *boxField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = boxField{}
		return nil
	}
	*f = boxField{state: wrongType}
	// b is one valid JSON value: an array without strings, objects or
	// arrays inside is a comma-separated list of literals.
	if len(b) < 2 || b[0] != '[' || bytes.ContainsAny(b[1:], `[{"`) {
		return nil
	}
	inner := b[1 : len(b)-1]
	for i := range f.v {
		elem := inner
		j := bytes.IndexByte(inner, ',')
		switch {
		case j >= 0 && i < len(f.v)-1:
			elem, inner = inner[:j], inner[j+1:]
		case j >= 0 || i < len(f.v)-1:
			return nil // more or fewer than four values
		}
		elem = bytes.TrimSpace(elem)
		if !isNumber(elem) {
			return nil
		}
		v, err := strconv.ParseFloat(string(elem), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil
		}
		f.v[i] = v
	}
	f.state = good
	return nil
}

// strField is a JSON string.
type strField struct {
	state fieldState
	v     string
}

func (f *strField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = strField{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' {
		*f = strField{state: wrongType}
		return nil
	}
	// Strings without escapes, the usual case, are taken as they are.
	if body := b[1 : len(b)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		*f = strField{state: good, v: string(body)}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*f = strField{state: wrongType}
		return nil
	}
	*f = strField{state: good, v: s}
	return nil
}

// textField is a string or a number, kept as written (info.version is
// either, depending on the tool).
type textField struct {
	state fieldState
	v     string
}

func (f *textField) UnmarshalJSON(b []byte) error {
	if isNumber(b) {
		*f = textField{state: good, v: string(b)}
		return nil
	}
	var s strField
	_ = s.UnmarshalJSON(b)
	*f = textField(s)
	return nil
}

// noValue skips a value: Decode into it reads the value and keeps nothing.
type noValue struct{}

func (*noValue) UnmarshalJSON([]byte) error { return nil }

// isNumber reports whether b starts like a JSON number; b is a literal
// the decoder already checked, so that means it is one.
func isNumber(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))
}

// parseUint reads a JSON integer literal 0..2^64-1 ("-0" is 0).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 2 && b[0] == '-' && b[1] == '0' {
		return 0, true
	}
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt reads a JSON integer literal in int64 range.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	u, ok := parseUint(b)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true // -2^63 wraps to itself
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}

// The entries as decoded. Only the fields a build uses are listed:
// encoding/json skips the others (segmentation, area, license, ...)
// without keeping them.

type imageEntry struct {
	ID       idField  `json:"id"`
	FileName strField `json:"file_name"`
	Width    intField `json:"width"`
	Height   intField `json:"height"`
}

type annotationEntry struct {
	ImageID    idField    `json:"image_id"`
	CategoryID intField   `json:"category_id"`
	BBox       boxField   `json:"bbox"`
	IsCrowd    crowdField `json:"iscrowd"`
}

type categoryEntry struct {
	ID   intField `json:"id"`
	Name strField `json:"name"`
}

type infoEntry struct {
	Description textField `json:"description"`
	Version     textField `json:"version"`
}

// imageRec is one entry of images.
type imageRec struct {
	id    uint64
	pos   int    // index in the images array
	name  string // file_name, cleaned and slash-separated when local
	declW int64  // width as listed, 0 when absent
	declH int64
	flags imageFlags
}

type imageFlags uint16

const (
	imgHasID     imageFlags = 1 << iota // id is usable
	imgBadSchema                        // not an object, or a field of the wrong type or missing
	imgNamed                            // file_name is a non-empty string
	imgLocal                            // file_name stays inside the image root
	imgDupID                            // an earlier entry has this id
	imgDupName                          // an earlier entry has this file
)

// annotation is one entry of annotations with a usable image_id, compact:
// what a box needs, where it belongs, and nothing else. 56 bytes: the
// store is sorted in place, so no second array of references is needed.
type annotation struct {
	bbox  [4]float64 // x, y, width, height as listed
	cat   int64
	image uint64 // image_id
	idx   uint32 // index in file order (among the annotations with a usable image_id)
	flags annFlags
}

// annChunk is how many annotations one chunk of annStore holds: storage
// grows a chunk at a time, never copying what it holds.
const annChunk = 1 << 16

// annStore holds the annotations in chunks: in file order while the file
// is read, sorted by image id (file order within an image) by finish.
// It is a sort.Interface over its positions.
type annStore struct {
	chunks [][]annotation
	n      int
}

func (s *annStore) add(image uint64, a annotation) bool {
	if s.n == math.MaxUint32 {
		return false
	}
	if s.n%annChunk == 0 {
		s.chunks = append(s.chunks, make([]annotation, 0, annChunk))
	}
	a.image, a.idx = image, uint32(s.n)
	last := &s.chunks[len(s.chunks)-1]
	*last = append(*last, a)
	s.n++
	return true
}

// at returns the annotation at position i.
func (s *annStore) at(i int) *annotation {
	return &s.chunks[i/annChunk][i%annChunk]
}

func (s *annStore) Len() int { return s.n }

func (s *annStore) Less(i, j int) bool {
	a, b := s.at(i), s.at(j)
	if a.image != b.image {
		return a.image < b.image
	}
	return a.idx < b.idx
}

func (s *annStore) Swap(i, j int) {
	a, b := s.at(i), s.at(j)
	*a, *b = *b, *a
}

type annFlags uint8

const (
	annBBox      annFlags = 1 << iota // bbox present (not null) and four numbers
	annCat                            // category_id present and an integer
	annCrowd                          // iscrowd is 1
	annBadSchema                      // a field of the wrong type
)

// document is an annotations file as New read it.
type document struct {
	images   []imageRec // scan order: usable ids ascending, then the rest in file order
	anns     annStore
	cats     []sources.ClassKey // by id
	catIndex map[int64]int
	unknown  []uint64 // image ids of annotations that images does not list, ascending
	// badAnns counts the annotations without a usable image_id.
	badAnns     int
	nAnns       int
	crowd       int
	description string
	version     string
	hasDesc     bool
	hasVersion  bool
	size        int64
	sha256      string
}

// docError is a problem that makes the file not a COCO instances document.
type docError struct{ msg string }

func (e *docError) Error() string { return e.msg }

func docErrorf(format string, args ...any) error {
	return &docError{msg: fmt.Sprintf(format, args...)}
}

// parser streams one document.
type parser struct {
	dec *json.Decoder
	in  *meteredReader
	doc *document
	ann annotationEntry // reused: Decode's argument escapes
}

// parse reads a whole annotations document from r. Its errors say what is
// wrong without naming the file; New adds the name.
func parse(r io.Reader) (*document, error) { return parseLimited(r, maxElementBytes) }

// parseLimited is parse with another entry size limit.
func parseLimited(r io.Reader, limit int64) (*document, error) {
	in := &meteredReader{r: r, h: sha256.New(), limit: limit}
	p := &parser{dec: json.NewDecoder(in), in: in, doc: &document{}}
	// Numbers that Token meets (the document itself, values skipped token
	// by token) stay text: as float64, 1e400 would be an error.
	p.dec.UseNumber()
	if err := p.document(); err != nil {
		var de *docError
		switch {
		case errors.As(err, &de):
		case errors.Is(err, errElementTooLarge):
			err = docErrorf("the value at byte %d is larger than %d MiB", p.dec.InputOffset(), limit>>20)
		default:
			var se *json.SyntaxError
			if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
				// A value the decoder reads whole fails at its start.
				err = docErrorf("malformed JSON near byte %d: %v", p.dec.InputOffset(), err)
			}
		}
		return nil, err
	}
	p.doc.size = in.total
	p.doc.sha256 = hex.EncodeToString(in.h.Sum(nil))
	p.doc.finish()
	return p.doc, nil
}

// token reads the next token, with io.EOF inside a value as
// io.ErrUnexpectedEOF.
func (p *parser) token() (json.Token, error) {
	p.in.mark()
	tok, err := p.dec.Token()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return tok, err
}

// decode reads one value into v. A value of another shape than v (an
// array where v is a struct) is reported as typeErr, not as an error.
func (p *parser) decode(v any) (typeErr bool, err error) {
	p.in.mark()
	err = p.dec.Decode(v)
	if err == nil {
		return false, nil
	}
	if _, ok := err.(*json.UnmarshalTypeError); ok {
		return true, nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return false, err
}

func (p *parser) document() error {
	p.in.mark()
	tok, err := p.dec.Token()
	if err == io.EOF {
		return docErrorf("empty file, want a JSON object")
	}
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return docErrorf("the document is %s, want a JSON object", describe(tok))
	}
	seen := map[string]bool{}
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch key {
		case "images", "annotations", "categories", "info":
			if seen[key] {
				return docErrorf("%q is listed twice", key)
			}
			seen[key] = true
		}
		switch key {
		case "images":
			err = p.array(key, p.image)
		case "annotations":
			err = p.array(key, p.annotation)
		case "categories":
			err = p.array(key, p.category)
		case "info":
			var info infoEntry
			if _, err = p.decode(&info); err == nil {
				p.doc.description, p.doc.hasDesc = info.Description.v, info.Description.state == good
				p.doc.version, p.doc.hasVersion = info.Version.v, info.Version.state == good
			}
		default:
			err = p.skip(2)
		}
		if err != nil {
			return err
		}
	}
	if _, err := p.token(); err != nil { // the closing brace
		return err
	}
	p.in.mark()
	if _, err := p.dec.Token(); err != io.EOF {
		if err == nil {
			return docErrorf("data after the top-level object (byte %d)", p.dec.InputOffset())
		}
		return err
	}
	for _, key := range []string{"images", "annotations", "categories"} {
		if !seen[key] {
			return docErrorf("no %q array: not a COCO instances file", key)
		}
	}
	return nil
}

// array reads the top-level array under key, calling entry for each
// element with its index.
func (p *parser) array(key string, entry func(i int) error) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('[') {
		return docErrorf("%q is %s, want an array", key, describe(tok))
	}
	for i := 0; p.dec.More(); i++ {
		if err := entry(i); err != nil {
			return err
		}
	}
	_, err = p.token() // ]
	return err
}

// skip reads one value without keeping it: the outer depth levels of
// arrays and objects token by token, anything deeper as a whole value,
// so that no single read is larger than an element.
func (p *parser) skip(depth int) error {
	if depth == 0 {
		_, err := p.decode(&noValue{})
		return err
	}
	tok, err := p.token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	for p.dec.More() {
		if d == '{' {
			if _, err := p.token(); err != nil { // the key
				return err
			}
		}
		if err := p.skip(depth - 1); err != nil {
			return err
		}
	}
	_, err = p.token()
	return err
}

func (p *parser) image(i int) error {
	var e imageEntry
	typeErr, err := p.decode(&e)
	if err != nil {
		return err
	}
	im := imageRec{pos: i}
	if typeErr {
		im.flags |= imgBadSchema
		p.doc.images = append(p.doc.images, im)
		return nil
	}
	switch e.ID.state {
	case good:
		im.id = e.ID.v
		im.flags |= imgHasID
	default:
		im.flags |= imgBadSchema
	}
	switch e.FileName.state {
	case good:
		if e.FileName.v != "" {
			im.flags |= imgNamed
			im.name = e.FileName.v
			if filepath.IsLocal(filepath.FromSlash(im.name)) {
				im.flags |= imgLocal
				im.name = path.Clean(filepath.ToSlash(im.name))
			}
		}
	default:
		im.flags |= imgBadSchema
	}
	for _, f := range []struct {
		field intField
		dst   *int64
	}{{e.Width, &im.declW}, {e.Height, &im.declH}} {
		switch {
		case f.field.state == good && f.field.v > 0:
			*f.dst = f.field.v
		case f.field.state != absent:
			im.flags |= imgBadSchema
		}
	}
	p.doc.images = append(p.doc.images, im)
	return nil
}

func (p *parser) annotation(int) error {
	p.ann = annotationEntry{}
	typeErr, err := p.decode(&p.ann)
	if err != nil {
		return err
	}
	e := &p.ann
	p.doc.nAnns++
	if typeErr || e.ImageID.state != good {
		p.doc.badAnns++
		return nil
	}
	var a annotation
	switch e.CategoryID.state {
	case good:
		a.cat, a.flags = e.CategoryID.v, a.flags|annCat
	case wrongType:
		a.flags |= annBadSchema
	}
	switch e.BBox.state {
	case good:
		a.bbox, a.flags = e.BBox.v, a.flags|annBBox
	case wrongType:
		a.flags |= annBadSchema
	}
	switch e.IsCrowd.state {
	case good:
		if e.IsCrowd.v {
			a.flags |= annCrowd
			p.doc.crowd++
		}
	case wrongType:
		a.flags |= annBadSchema
	}
	if !p.doc.anns.add(e.ImageID.v, a) {
		return docErrorf("more than %d annotations", uint32(math.MaxUint32))
	}
	return nil
}

func (p *parser) category(i int) error {
	var e categoryEntry
	typeErr, err := p.decode(&e)
	if err != nil {
		return err
	}
	switch {
	case typeErr:
		return docErrorf("categories[%d] is not an object", i)
	case e.ID.state != good:
		return docErrorf("categories[%d]: id is missing or not an integer", i)
	case e.Name.state != good:
		return docErrorf("categories[%d] (id %d): name is missing or not a string", i, e.ID.v)
	}
	if p.doc.catIndex == nil {
		p.doc.catIndex = map[int64]int{}
	}
	if j, dup := p.doc.catIndex[e.ID.v]; dup {
		return docErrorf("category id %d is listed twice (categories[%d] and categories[%d])", e.ID.v, j, i)
	}
	p.doc.catIndex[e.ID.v] = i
	p.doc.cats = append(p.doc.cats, sources.ClassKey{ID: e.ID.v, HasID: true, Name: e.Name.v})
	return nil
}

// finish orders what was read: the class table by id, images in scan
// order with duplicates marked, annotations grouped by image id, and the
// ids that annotations name but images does not list.
func (d *document) finish() {
	slices.SortFunc(d.cats, func(a, b sources.ClassKey) int { return cmp.Compare(a.ID, b.ID) })
	d.catIndex = make(map[int64]int, len(d.cats))
	for i, k := range d.cats {
		d.catIndex[k.ID] = i
	}

	// A second entry for a file: the images are still in file order.
	files := make(map[string]struct{}, len(d.images))
	for i := range d.images {
		im := &d.images[i]
		if im.flags&imgLocal == 0 {
			continue
		}
		if _, dup := files[im.name]; dup {
			im.flags |= imgDupName
		} else {
			files[im.name] = struct{}{}
		}
	}
	slices.SortFunc(d.images, func(a, b imageRec) int {
		ah, bh := a.flags&imgHasID != 0, b.flags&imgHasID != 0
		switch {
		case ah != bh:
			if ah {
				return -1
			}
			return 1
		case ah && a.id != b.id:
			return cmp.Compare(a.id, b.id)
		}
		return cmp.Compare(a.pos, b.pos)
	})
	for i := 1; i < len(d.images); i++ {
		a, b := &d.images[i-1], &d.images[i]
		if a.flags&b.flags&imgHasID != 0 && a.id == b.id {
			b.flags |= imgDupID
		}
	}

	// Annotations in image id order, file order within an image. Files
	// written image by image are in that order already.
	a := &d.anns
	if !sort.IsSorted(a) {
		sort.Sort(a) // keys are unique (idx), so any sort is stable
	}
	for i := 0; i < a.n; {
		id := a.at(i).image
		if !d.hasImage(id) {
			d.unknown = append(d.unknown, id)
		}
		for i < a.n && a.at(i).image == id {
			i++
		}
	}
}

// hasImage reports whether images lists id.
func (d *document) hasImage(id uint64) bool {
	n := len(d.images)
	i, _ := slices.BinarySearchFunc(d.images, id, func(im imageRec, id uint64) int {
		if im.flags&imgHasID == 0 {
			return 1
		}
		return cmp.Compare(im.id, id)
	})
	return i < n && d.images[i].flags&imgHasID != 0 && d.images[i].id == id
}

// group returns the positions [lo, hi) of the annotations of image id.
func (d *document) group(id uint64) (lo, hi int) {
	a := &d.anns
	lo = sort.Search(a.n, func(i int) bool { return a.at(i).image >= id })
	hi = lo
	for hi < a.n && a.at(hi).image == id {
		hi++
	}
	return lo, hi
}

// describe names the kind of a token for an error message.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}
