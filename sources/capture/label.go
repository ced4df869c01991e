package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"warehouse-etl/sources"
)

// maxLabelEntries bounds the label list of one file. No camera frame holds
// anywhere near this many objects; a longer list is bad_schema rather than
// an allocation the size of the file.
const maxLabelEntries = 1 << 16

// labelRank orders labels of one run: usable frame_id first (by frame_id),
// then parsed labels without one, then files that are not JSON objects.
type labelRank int

const (
	rankFramed      labelRank = iota // a usable frame_id
	rankUnframed                     // a JSON object without a usable frame_id
	rankUnparseable                  // not JSON, not an object, or too large to read
)

// label is one label file as parsed, before its image is looked at.
type label struct {
	rank           labelRank
	frame          uint64 // valid when rank == rankFramed
	simTime        float64
	unixTimeNs     int64
	image          string // the image field, "" when absent, null or not a string
	imageNamed     bool   // image is a non-empty string
	imageWrongType bool   // image is present but not a string
	imagePresent   bool   // image_present, true when absent
	hasList        bool   // the label list was read as an array
	entries        int    // entries in the label list, well-formed or not
	boxes          []labelBox
	badSchema      bool
	notRegular     bool   // the label file is a symbolic link or not a regular file: not read
	schemaDetail   string // the first schema problem in words, when badSchema
}

// labelBox is one well-formed entry of the label list, not yet checked.
type labelBox struct {
	px, norm *[4]float64 // nil when absent or null
	class    sources.ClassKey
}

// parseLabel reads one label file. It never fails: whatever is wrong sets
// badSchema, and everything that could be read is kept so that the sample
// reports all of its problems at once. listKeys are tried in order; the
// first one present in the object names the label list.
//
// Accepted fields (unknown fields are ignored; null is the same as absent):
//
//	frame_id       integer 0..2^64-1, required (absent: bad_schema, no frame order)
//	sim_time       number, seconds
//	unix_time      number, seconds since 1970, converted exactly to nanoseconds
//	image          string, path relative to the run folder
//	image_present  bool, default true
//	camera_active  bool, ignored
//	<list key>     array of label objects, required
//
// Each label object:
//
//	bbox_px        [x0, y0, x1, y1] numbers, source pixels
//	bbox_norm      [x0, y0, x1, y1] numbers, fractions of the image size
//	center_world   [x, y, z] numbers, ignored
//	class_id       integer (int64)
//	class_name     string
//	class          integer (same as class_id) or string (same as class_name);
//	               when given together with class_id or class_name they must agree
//
// A number too large for float64 in a box becomes ±Inf and so invalid_bbox
// later; anywhere else it is bad_schema.
func parseLabel(data []byte, listKeys []string) label {
	l := label{imagePresent: true}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		l.rank, l.badSchema = rankUnparseable, true
		l.schemaDetail = "not a JSON object"
		if len(bytes.TrimSpace(data)) == 0 {
			l.schemaDetail = fmt.Sprintf("%d-byte file", len(data))
		} else if err != nil {
			l.schemaDetail = jsonErrorDetail(data, err)
		}
		l.salvage(data, listKeys)
		return l
	}
	l.rank = rankUnframed
	fail := func(detail string) {
		if !l.badSchema {
			l.badSchema, l.schemaDetail = true, detail
		}
	}
	wrongType := func(key, want string, raw json.RawMessage) {
		fail(fmt.Sprintf("%s is %s, want %s", key, shorten(raw), want))
	}

	if raw, ok := present(obj, "frame_id"); ok {
		if v, err := strconv.ParseUint(numberLiteral(raw), 10, 64); err == nil {
			l.frame, l.rank = v, rankFramed
		} else {
			wrongType("frame_id", "an integer 0..2^64-1", raw)
		}
	} else {
		fail("no frame_id")
	}
	if raw, ok := present(obj, "sim_time"); ok {
		if v, ok := finiteNumber(raw); ok {
			l.simTime = v
		} else {
			wrongType("sim_time", "a number", raw)
		}
	}
	if raw, ok := present(obj, "unix_time"); ok {
		if v, ok := unixNanos(numberLiteral(raw)); ok {
			l.unixTimeNs = v
		} else {
			wrongType("unix_time", "a number of seconds", raw)
		}
	}
	if raw, ok := present(obj, "image"); ok {
		if v, ok := stringValue(raw); ok {
			l.image, l.imageNamed = v, v != ""
		} else {
			l.imageWrongType = true
			wrongType("image", "a string", raw)
		}
	}
	if raw, ok := present(obj, "image_present"); ok {
		if v, ok := boolValue(raw); ok {
			l.imagePresent = v
		} else {
			wrongType("image_present", "true or false", raw)
		}
	}
	if raw, ok := present(obj, "camera_active"); ok {
		if _, ok := boolValue(raw); !ok {
			wrongType("camera_active", "true or false", raw)
		}
	}
	list, found, listKey := json.RawMessage(nil), false, ""
	for _, k := range listKeys {
		if raw, ok := obj[k]; ok {
			list, found, listKey = raw, true, k
			break
		}
	}
	switch {
	case !found:
		fail(fmt.Sprintf("no label list (%s)", strings.Join(listKeys, ", ")))
	default:
		if detail := l.readList(list); detail != "" {
			fail(listKey + ": " + detail)
		}
	}
	return l
}

// salvage reads what it can of a label that is not valid JSON, for the
// record only: a writer such as Python's json.dumps puts NaN or Infinity
// where JSON has no such literal, and the rest of the file still says
// which frame and image it was. The label stays unparseable (its rank,
// hence the run's order, does not change); only frame and image are kept.
func (l *label) salvage(data []byte, listKeys []string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(nonFiniteToZero(data), &obj) != nil || obj == nil {
		return
	}
	if raw, ok := present(obj, "frame_id"); ok {
		if v, err := strconv.ParseUint(numberLiteral(raw), 10, 64); err == nil {
			l.frame = v
		}
	}
	if raw, ok := present(obj, "image"); ok {
		if v, ok := stringValue(raw); ok {
			l.image, l.imageNamed = v, v != ""
		}
	}
}

// nonFiniteLiterals are the tokens Python's json module writes for
// non-finite floats.
var nonFiniteLiterals = []string{"-Infinity", "Infinity", "NaN"}

// nonFiniteToZero replaces NaN, Infinity and -Infinity outside strings
// with 0 padded to the same length, so that byte offsets stay.
func nonFiniteToZero(data []byte) []byte {
	out := bytes.Clone(data)
	inString := false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString:
			for _, lit := range nonFiniteLiterals {
				if bytes.HasPrefix(out[i:], []byte(lit)) {
					copy(out[i:], "0"+strings.Repeat(" ", len(lit)-1))
					i += len(lit) - 1
					break
				}
			}
		}
	}
	return out
}

// jsonErrorDetail says where and why data is not JSON: "invalid JSON: NaN
// at byte 56" for the literals Python writes, else the decoder's message
// with the byte offset (counted from 0).
func jsonErrorDetail(data []byte, err error) string {
	var syn *json.SyntaxError
	if ute := (*json.UnmarshalTypeError)(nil); errors.As(err, &ute) {
		return "the label is a JSON " + ute.Value + ", want an object"
	}
	if !errors.As(err, &syn) {
		return "invalid JSON: " + err.Error()
	}
	at := max(syn.Offset-1, 0) // Offset is just after the byte that failed
	for _, lit := range nonFiniteLiterals {
		for _, start := range []int64{at, at - 1} {
			if start >= 0 && start < int64(len(data)) && bytes.HasPrefix(data[start:], []byte(lit)) {
				return fmt.Sprintf("invalid JSON: %s at byte %d", lit, start)
			}
		}
	}
	return fmt.Sprintf("invalid JSON at byte %d: %v", at, err)
}

// shorten quotes a raw JSON value for a message, cut to 40 bytes.
func shorten(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:37]) + "..."
	}
	return string(raw)
}

// readList reads the label list into l.boxes. It returns the first
// problem in words when the list or any entry is malformed ("" when all is
// well); well-formed entries are kept either way.
func (l *label) readList(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return "not an array"
	}
	l.hasList = true
	problem := ""
	note := func(detail string) {
		if problem == "" {
			problem = fmt.Sprintf("entry %d: %s", l.entries-1, detail)
		}
	}
	for dec.More() {
		if l.entries == maxLabelEntries {
			l.boxes = nil
			return fmt.Sprintf("more than %d entries", maxLabelEntries)
		}
		l.entries++
		var entry map[string]json.RawMessage
		if err := dec.Decode(&entry); err != nil || entry == nil {
			// The document is valid JSON, so a failed Decode means the
			// entry is not an object; the decoder has consumed it.
			note("not an object")
			continue
		}
		b, detail := parseBox(entry)
		if detail != "" {
			note(detail)
			continue
		}
		l.boxes = append(l.boxes, b)
	}
	return problem
}

// localImage returns the image path cleaned and relative to the run
// folder, and whether the label names one that stays inside the folder.
// Symbolic links are not resolved: a link inside the run is followed.
func (l *label) localImage() (string, bool) {
	if !l.imageNamed || !filepath.IsLocal(filepath.FromSlash(l.image)) {
		return "", false
	}
	return path.Clean(filepath.ToSlash(l.image)), true
}

// parseBox reads one entry of the label list; detail is its first problem
// in words, "" when it is well-formed.
func parseBox(entry map[string]json.RawMessage) (b labelBox, detail string) {
	fail := func(d string) {
		if detail == "" {
			detail = d
		}
	}
	for _, f := range []struct {
		key string
		dst **[4]float64
	}{{"bbox_px", &b.px}, {"bbox_norm", &b.norm}} {
		raw, found := present(entry, f.key)
		if !found {
			continue
		}
		var v [4]float64
		if !boxNumbers(raw, v[:]) {
			fail(fmt.Sprintf("%s is %s, want 4 numbers", f.key, shorten(raw)))
			continue
		}
		*f.dst = &v
	}
	if raw, found := present(entry, "center_world"); found {
		var v [3]float64
		if !boxNumbers(raw, v[:]) {
			fail(fmt.Sprintf("center_world is %s, want 3 numbers", shorten(raw)))
		}
	}
	class, classOK := parseClass(entry)
	if !classOK {
		fail("class_id, class_name and class disagree or have the wrong type")
	}
	b.class = class
	return b, detail
}

// parseClass reads class_id, class_name and class.
func parseClass(entry map[string]json.RawMessage) (sources.ClassKey, bool) {
	var k sources.ClassKey
	if raw, found := present(entry, "class_id"); found {
		v, err := strconv.ParseInt(numberLiteral(raw), 10, 64)
		if err != nil {
			return sources.ClassKey{}, false
		}
		k.ID, k.HasID = v, true
	}
	if raw, found := present(entry, "class_name"); found {
		v, ok := stringValue(raw)
		if !ok {
			return sources.ClassKey{}, false
		}
		k.Name = v
	}
	raw, found := present(entry, "class")
	if !found {
		return k, true
	}
	if v, ok := stringValue(raw); ok {
		if k.Name != "" && k.Name != v {
			return sources.ClassKey{}, false
		}
		k.Name = v
		return k, true
	}
	v, err := strconv.ParseInt(numberLiteral(raw), 10, 64)
	if err != nil || (k.HasID && k.ID != v) {
		return sources.ClassKey{}, false
	}
	k.ID, k.HasID = v, true
	return k, true
}

// present returns obj[key] unless it is absent or null.
func present(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// numberLiteral returns raw as a string when it is a JSON number and ""
// otherwise, so that strconv rejects strings, booleans and the like. raw
// comes from a document that already parsed, so a leading '-' or digit
// means a well-formed number.
func numberLiteral(raw json.RawMessage) string {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return ""
	}
	return string(raw)
}

// finiteNumber parses a JSON number that fits a float64.
func finiteNumber(raw json.RawMessage) (float64, bool) {
	v, err := strconv.ParseFloat(numberLiteral(raw), 64)
	return v, err == nil
}

// boxNumbers reads a JSON array of exactly len(dst) numbers into dst. A
// number beyond float64 range becomes ±Inf: finite-ness is a box check,
// not a schema one. raw is valid JSON, so an array without strings,
// objects or arrays inside is a comma-separated list of literals.
func boxNumbers(raw json.RawMessage, dst []float64) bool {
	if len(raw) < 2 || raw[0] != '[' || bytes.ContainsAny(raw[1:], `[{"`) {
		return false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.Count(inner, []byte{','}) != len(dst)-1 {
		return false
	}
	for i := range dst {
		elem := inner
		if j := bytes.IndexByte(inner, ','); j >= 0 {
			elem, inner = inner[:j], inner[j+1:]
		}
		v, err := strconv.ParseFloat(numberLiteral(bytes.TrimSpace(elem)), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return false
		}
		dst[i] = v
	}
	return true
}

// stringValue reads a JSON string. Strings without escapes, the usual
// case, are taken as they are.
func stringValue(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

func boolValue(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// unixNanos converts a JSON number of seconds to nanoseconds exactly,
// without going through float64 (which would lose about 100 ns at
// present-day times): the decimal digits are shifted by the exponent and
// by 9, and digits beyond nanoseconds are rounded half away from zero. It
// fails for "" and for values outside the int64 nanosecond range (about
// years 1678 to 2262).
func unixNanos(lit string) (int64, bool) {
	if lit == "" {
		return 0, false
	}
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	// Split digits, fraction and exponent: the literal is a valid JSON
	// number, so the shape is int[.frac][(e|E)[+-]exp].
	var digits []byte
	fracLen, exp := 0, 0
	i := 0
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		digits = append(digits, lit[i])
	}
	intLen := len(digits)
	if i < len(lit) && lit[i] == '.' {
		for i++; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			digits = append(digits, lit[i])
			fracLen++
		}
		if fracLen == 0 {
			return 0, false
		}
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		start := i
		for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			// Saturate: anything beyond 1e6 is far outside the range
			// either way, and the sum below must not overflow.
			exp = min(exp*10+int(lit[i]-'0'), 1e6)
		}
		if i == start {
			return 0, false
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) || intLen == 0 {
		return 0, false
	}
	// Drop leading zeros; all zeros is zero.
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if len(digits) == 0 {
		return 0, true
	}
	// value in ns = digits * 10^shift.
	shift := exp - fracLen + 9
	var u uint64
	switch {
	case shift >= 0:
		if len(digits)+shift > 19 {
			return 0, false
		}
		for _, d := range digits {
			u = u*10 + uint64(d-'0')
		}
		for range shift {
			u *= 10
		}
	default:
		keep := len(digits) + shift // digits before the ns point
		if keep > 19 {
			return 0, false
		}
		roundUp := false
		if keep >= 0 {
			for _, d := range digits[:keep] {
				u = u*10 + uint64(d-'0')
			}
			roundUp = digits[keep] >= '5'
		}
		if roundUp {
			u++
		}
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}
