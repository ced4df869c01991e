package yolo

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"warehouse-etl/validate"
)

// labelPath returns the label file of an image by Ultralytics' rule
// (img2label_paths): the last "/images/" of the path becomes "/labels/"
// and the extension becomes ".txt". Paths are slash-separated and
// relative to the dataset root; the rule sees them with a leading "/", so
// that a top-level images/ folder counts, and never looks above the root
// (Ultralytics applies it to the absolute path). An image whose path has
// no images/ component gets the .txt beside it.
func labelPath(image string) string {
	p := "/" + image
	if i := strings.LastIndex(p, "/images/"); i >= 0 {
		p = p[:i] + "/labels/" + p[i+len("/images/"):]
	}
	if i := strings.LastIndexByte(p, '.'); i > strings.LastIndexByte(p, '/') {
		p = p[:i]
	}
	return p[1:] + ".txt"
}

// labelBox is one label line that passed every check that needs no image:
// its class is in names and its box is finite with positive width and
// height. norm is x0, y0, x1, y1 as fractions of the image size.
type labelBox struct {
	class int64
	norm  [4]float64
}

// label is one label file as parsed.
type label struct {
	lines      int               // non-blank lines
	boxes      []labelBox        // usable lines, duplicates dropped, in file order
	reasons    []validate.Reason // bad_schema, unknown_class, invalid_bbox, each at most once
	details    validate.Details  // each reason's first line, in words
	duplicates int               // lines dropped as exact duplicates of an earlier line
}

// lineKind is what the number of fields on a line makes of it.
type lineKind int

const (
	lineBad      lineKind = iota // bad_schema
	lineBox                      // class cx cy w h
	linePolygon                  // class x1 y1 x2 y2 x3 y3 ...
	lineKeypoint                 // class cx cy w h, then kpt_shape's values
)

// parser reads the label files of one dataset. It reuses its buffers from
// file to file and is not safe for concurrent use.
type parser struct {
	nc         int64 // classes in names
	kptK, kptD int   // kpt_shape, 0 when not a pose dataset
	fields     []string
	values     []float64
	keys       []dedupKey // the first dedupScan usable lines of the file
	class      int64      // the last line's class and box (boxOK), when they parsed
	box        [4]float64
	boxOK      bool
	index      map[dedupKey]struct{} // every usable line, once there are dedupScan
	lineNo     int                   // the line being read, from 1
}

// dedupKey identifies a usable line for the duplicate check: its class,
// its box, and for a pose dataset its keypoint values.
type dedupKey struct {
	class int64
	norm  [4]uint64
	kpts  string
}

// dedupScan is how many usable lines are compared one by one before the
// duplicate check switches to a map: most files hold a few boxes.
const dedupScan = 32

func newParser(nc, kptK, kptD int) *parser {
	return &parser{nc: int64(nc), kptK: kptK, kptD: kptD}
}

// parse reads one label file. It never fails: whatever is wrong with a
// line becomes a reason and the line is not a box. The format is one
// object per line, fields separated by white space:
//
//	class cx cy w h               a box: centre and size, fractions of the image
//	class x1 y1 x2 y2 x3 y3 ...   a polygon (segmentation), 3 or more points
//	class cx cy w h k1 k2 ...     a pose dataset (kpt_shape [K, D]): exactly 5 + K*D fields
//
// Lines end at "\n", "\r\n" or "\r"; blank lines are skipped. Without
// kpt_shape a line of 5 fields is a box and a line of 7, 9, 11, ...
// fields a polygon, which becomes its bounding box (min and max of its
// points) as Ultralytics' segments2boxes makes it. Each line decides for
// itself: Ultralytics reads every line of a file as a polygon once one
// line has more than 6 fields, which turns a box line in such a file into
// a 2-point polygon. With kpt_shape every line must have exactly 5 + K*D
// fields; the keypoints must be numbers and are otherwise not used.
//
// Reasons, per line:
//
//	bad_schema     any other number of fields; a class that is not an
//	               integer (written as one, or as a float with an integral
//	               value such as 1.0, which Ultralytics reads as class 1);
//	               a value that is not a decimal number (nan and inf are
//	               numbers; hexadecimal floats and underscores are not)
//	unknown_class  a class below 0 or not below len(names)
//	invalid_bbox   a box whose w or h is not > 0 or whose values are not
//	               finite; a polygon with a value that is not finite or
//	               without width or height
//
// A line with any of them is not a box. A usable line equal to an earlier
// one (same class, same box, same keypoints) is dropped and counted in
// duplicates, as Ultralytics drops duplicate rows with a warning. Bounds
// are checked later, against the image size.
func (p *parser) parse(text string) label {
	var l label
	if len(text) >= 10 {
		// One allocation for the usual file: a box line takes at least
		// 10 bytes ("0 1 1 1 1\n").
		l.boxes = make([]labelBox, 0, min(strings.Count(text, "\n")+1, len(text)/10))
	}
	p.eachLine(text, func(int, string) {
		l.lines++
		p.line(&l)
	})
	return l
}

// eachLine calls fn with every non-blank line of a file, split into
// p.fields, with its number (from 1, blank lines counted). It starts the
// file's duplicate check afresh.
func (p *parser) eachLine(text string, fn func(n int, line string)) {
	p.keys = p.keys[:0]
	p.lineNo = 0
	clear(p.index)
	n := 0
	for text != "" {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		// A lone "\r" ends a line too; "\r\n" leaves an empty one.
		for {
			part, rest, cr := strings.Cut(line, "\r")
			n++
			p.lineNo = n
			p.fields = splitFields(part, p.fields[:0])
			if len(p.fields) > 0 {
				fn(n, part)
			}
			if !cr {
				break
			}
			line = rest
		}
	}
}

// line reads one non-blank line, split into p.fields, into l.
func (p *parser) line(l *label) {
	p.boxOK = false
	kind := p.kind(len(p.fields))
	class, classOK := parseClass(p.fields[0])
	if kind == lineBad {
		l.add(validate.ReasonBadSchema, p.where(fmt.Sprintf("%d fields", len(p.fields))))
		return
	}
	if !classOK {
		l.add(validate.ReasonBadSchema, p.where(fmt.Sprintf("class %q is not an integer", p.fields[0])))
		return
	}
	p.values = p.values[:0]
	for _, f := range p.fields[1:] {
		v, ok := parseNumber(f)
		if !ok {
			l.add(validate.ReasonBadSchema, p.where(fmt.Sprintf("%q is not a number", f)))
			return
		}
		p.values = append(p.values, v)
	}
	usable := true
	if class < 0 || class >= p.nc {
		l.add(validate.ReasonUnknownClass, p.where(fmt.Sprintf("class %d, data.yaml names %d classes", class, p.nc)))
		usable = false
	}
	var norm [4]float64
	var ok bool
	if kind == linePolygon {
		norm, ok = polygonBox(p.values)
	} else {
		norm, ok = centreBox(p.values[:4])
	}
	if !ok {
		l.add(validate.ReasonInvalidBBox, p.where(fmt.Sprintf("%v: no width or height, or not finite", p.values)))
		usable = false
	}
	p.class, p.box, p.boxOK = class, norm, ok
	if !usable {
		return
	}
	key := dedupKey{class: class}
	for i, v := range norm {
		key.norm[i] = math.Float64bits(v)
	}
	if kind == lineKeypoint {
		key.kpts = keypointKey(p.values[4:])
	}
	if p.duplicate(key) {
		l.duplicates++
		return
	}
	l.boxes = append(l.boxes, labelBox{class: class, norm: norm})
}

// duplicate reports whether key was seen before in this file, and
// remembers it. The first dedupScan keys are compared one by one; from
// then on they are kept in a map.
func (p *parser) duplicate(key dedupKey) bool {
	if len(p.keys) < dedupScan {
		if slices.Contains(p.keys, key) {
			return true
		}
		p.keys = append(p.keys, key)
		if len(p.keys) == dedupScan {
			if p.index == nil {
				p.index = make(map[dedupKey]struct{}, 4*dedupScan)
			}
			for _, k := range p.keys {
				p.index[k] = struct{}{}
			}
		}
		return false
	}
	if _, ok := p.index[key]; ok {
		return true
	}
	p.index[key] = struct{}{}
	return false
}

// kind classifies a line by its number of fields.
func (p *parser) kind(n int) lineKind {
	switch {
	case p.kptK > 0:
		if n == 5+p.kptK*p.kptD {
			return lineKeypoint
		}
	case n == 5:
		return lineBox
	case n >= 7 && n%2 == 1:
		return linePolygon
	}
	return lineBad
}

// add records a reason once.
func (l *label) add(r validate.Reason, detail string) {
	if !slices.Contains(l.reasons, r) {
		l.reasons = append(l.reasons, r)
	}
	l.details.Note(r, detail)
}

// where prefixes detail with the line being read.
func (p *parser) where(detail string) string {
	return fmt.Sprintf("line %d: %s", p.lineNo, detail)
}

// centreBox turns cx, cy, w, h into x0, y0, x1, y1.
func centreBox(v []float64) ([4]float64, bool) {
	cx, cy, w, h := v[0], v[1], v[2], v[3]
	if !(w > 0) || !(h > 0) {
		return [4]float64{}, false
	}
	hw, hh := w/2, h/2 // exact
	b := [4]float64{cx - hw, cy - hh, cx + hw, cy + hh}
	return b, validate.CheckOrder(b) == ""
}

// polygonBox returns the bounding box of x1 y1 x2 y2 ... .
func polygonBox(v []float64) ([4]float64, bool) {
	b := [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for i := 0; i+1 < len(v); i += 2 {
		x, y := v[i], v[i+1]
		if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
			return [4]float64{}, false
		}
		b[0], b[1] = min(b[0], x), min(b[1], y)
		b[2], b[3] = max(b[2], x), max(b[3], y)
	}
	return b, validate.CheckOrder(b) == ""
}

// toPx scales a normalized box to a w x h image.
func toPx(n [4]float64, w, h int) [4]float64 {
	fw, fh := float64(w), float64(h)
	return [4]float64{n[0] * fw, n[1] * fh, n[2] * fw, n[3] * fh}
}

// keypointKey encodes keypoint values for the duplicate check.
func keypointKey(v []float64) string {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = strconv.AppendUint(b, math.Float64bits(x), 36)
		b = append(b, ' ')
	}
	return string(b)
}

// parseClass reads a class id: a decimal integer, or a float literal with
// an integral value (Ultralytics reads classes as floats). An integer too
// large for int64 is still an integer, returned as math.MaxInt64 or
// math.MinInt64, so that it is unknown_class rather than bad_schema.
func parseClass(f string) (int64, bool) {
	v, err := strconv.ParseInt(f, 10, 64)
	switch {
	case err == nil:
		return v, true
	case errors.Is(err, strconv.ErrRange):
		return v, true // ParseInt saturates
	}
	x, ok := parseNumber(f)
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) || x != math.Trunc(x) {
		return 0, false
	}
	switch {
	case x >= math.MaxInt64:
		return math.MaxInt64, true
	case x <= math.MinInt64:
		return math.MinInt64, true
	}
	return int64(x), true
}

// parseNumber reads a decimal floating-point number as Python's float()
// would: an optional sign, digits with an optional point and exponent, or
// inf, infinity and nan in any case. A value beyond float64 becomes ±Inf
// (finite-ness is a box check, not a schema one). Go's hexadecimal floats
// and underscores are refused.
func parseNumber(f string) (float64, bool) {
	if g := strings.TrimLeft(f, "+-"); len(g) > 1 && g[0] == '0' && (g[1] == 'x' || g[1] == 'X') ||
		strings.IndexByte(f, '_') >= 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return v, true
}

// splitFields appends the white-space separated fields of line to dst,
// white space as Go's unicode.IsSpace (Python's str.split differs only in
// U+001C..U+001F).
func splitFields(line string, dst []string) []string {
	start := -1
	for i := 0; i < len(line); {
		c := line[i]
		size := 1
		space := false
		if c < utf8.RuneSelf {
			space = c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' || c == '\n'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(line[i:])
			space = unicode.IsSpace(r)
		}
		switch {
		case space && start >= 0:
			dst = append(dst, line[start:i])
			start = -1
		case !space && start < 0:
			start = i
		}
		i += size
	}
	if start >= 0 {
		dst = append(dst, line[start:])
	}
	return dst
}

// LabelLine is one non-blank line of a label file as Scan judged it, for a
// viewer that draws a rejected sample's label.
type LabelLine struct {
	Line      int    // its number in the file, from 1
	Text      string // as written
	Class     int64  // valid when HasBox
	HasBox    bool   // the class and box parsed: Norm is x0, y0, x1, y1 as fractions of the image
	Norm      [4]float64
	Reasons   []validate.Reason // why Scan did not use it as a box; none for a box it used
	Duplicate bool              // dropped as a duplicate of an earlier line (not a reason)
}

// LabelLines reads a label file line by line as Scan does, bounds checked
// against a w x h image (w or h 0: without the image, as Scan does when
// the image's size is unknown).
func (s *Source) LabelLines(data []byte, w, h int) []LabelLine {
	p := newParser(len(s.classes), s.kptK, s.kptD)
	var out []LabelLine
	p.eachLine(string(data), func(n int, text string) {
		var one label
		p.line(&one)
		ll := LabelLine{Line: n, Text: text, Reasons: one.reasons, Duplicate: one.duplicates > 0, HasBox: p.boxOK, Class: p.class, Norm: p.box}
		if len(one.boxes) == 1 {
			if _, r := checkBounds(one.boxes[0].norm, w, h); r != "" {
				ll.Reasons = append(ll.Reasons, r)
			}
		}
		out = append(out, ll)
	})
	return out
}

// checkBounds checks a usable line's box against a w x h image
// (validate.CheckPx, returning the clamped pixel box) or, with w or h 0,
// on its own (validate.CheckNorm).
func checkBounds(norm [4]float64, w, h int) ([4]float64, validate.Reason) {
	if w <= 0 || h <= 0 {
		return [4]float64{}, validate.CheckNorm(norm)
	}
	return validate.CheckPx(toPx(norm, w, h), w, h)
}
