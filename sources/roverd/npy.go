package roverd

import (
	"archive/zip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ErrNPY is wrapped by every error about an .npy array or .npz archive.
var ErrNPY = errors.New("roverd: bad npy data")

func npyErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNPY, fmt.Sprintf(format, args...))
}

// The .npy format (numpy/lib/format.py, versions 1.0 to 3.0):
//
//	magic    "\x93NUMPY" <6>
//	version  major <1> minor <1>
//	hlen     u16 (1.x) or u32 (2.x, 3.x), little-endian
//	header   hlen bytes: a Python dict literal such as
//	         {'descr': '<f4', 'fortran_order': False, 'shape': (3, 3), }
//	         padded with spaces and ended by '\n'
//	data     the elements, C order unless fortran_order
const (
	npyMagic        = "\x93NUMPY"
	npyPrefixV1     = 10 // magic, version, u16 length
	npyPrefixV2     = 12 // magic, version, u32 length
	maxNPYHeader    = 64 << 10
	npzDataMember   = "data.npy" // NPZBlobChannel saves the record as data=
	maxNPZOverheadB = 64 << 10   // the .npy header of the member
)

// npyArray is a parsed .npy array.
type npyArray struct {
	descr   string
	fortran bool
	shape   []int
	data    []byte
}

// parseNPY reads an .npy array. The data must be exactly the size the
// header declares.
func parseNPY(b []byte) (npyArray, error) {
	if len(b) < npyPrefixV1 || string(b[:6]) != npyMagic {
		return npyArray{}, npyErrorf("no .npy magic")
	}
	var hlen, start int
	switch b[6] {
	case 1:
		hlen, start = int(binary.LittleEndian.Uint16(b[8:10])), npyPrefixV1
	case 2, 3:
		if len(b) < npyPrefixV2 {
			return npyArray{}, npyErrorf("truncated .npy %d.%d prefix", b[6], b[7])
		}
		n := binary.LittleEndian.Uint32(b[8:12])
		if n > maxNPYHeader {
			return npyArray{}, npyErrorf("header of %d bytes, more than %d", n, maxNPYHeader)
		}
		hlen, start = int(n), npyPrefixV2
	default:
		return npyArray{}, npyErrorf("unknown .npy version %d.%d", b[6], b[7])
	}
	if len(b)-start < hlen {
		return npyArray{}, npyErrorf("header of %d bytes runs past the end (%d bytes)", hlen, len(b))
	}
	a, err := parseNPYHeader(string(b[start : start+hlen]))
	if err != nil {
		return npyArray{}, err
	}
	dt, err := ParseDType(a.descr)
	if err != nil {
		return npyArray{}, npyErrorf("descr: %v", err)
	}
	n := int64(dt.Size)
	for _, d := range a.shape {
		if d != 0 && n > MaxRecordBytes/int64(d) {
			return npyArray{}, npyErrorf("shape %v is more than %d bytes", a.shape, MaxRecordBytes)
		}
		n *= int64(d)
	}
	a.data = b[start+hlen:]
	if int64(len(a.data)) != n {
		return npyArray{}, npyErrorf("shape %v %s needs %d data bytes, the array has %d", a.shape, a.descr, n, len(a.data))
	}
	if a.fortran {
		nontrivial := 0
		for _, d := range a.shape {
			if d > 1 {
				nontrivial++
			}
		}
		if nontrivial > 1 {
			return npyArray{}, npyErrorf("fortran_order arrays are not supported")
		}
	}
	return a, nil
}

// parseNPYHeader reads the header's dict literal: exactly the keys descr
// (a string), fortran_order (True or False) and shape (a tuple of
// integers), in any order.
func parseNPYHeader(h string) (npyArray, error) {
	p := &pyLiteral{s: strings.TrimRight(h, " \n")}
	var a npyArray
	seen := map[string]bool{}
	if !p.eat('{') {
		return a, npyErrorf("header is not a dict: %.40q", h)
	}
	for !p.eat('}') {
		key, err := p.str()
		if err != nil {
			return a, npyErrorf("header key: %v", err)
		}
		if seen[key] {
			return a, npyErrorf("header repeats key %q", key)
		}
		seen[key] = true
		if !p.eat(':') {
			return a, npyErrorf("header: no ':' after %q", key)
		}
		switch key {
		case "descr":
			if p.peek() == '[' {
				return a, npyErrorf("structured dtypes are not supported")
			}
			if a.descr, err = p.str(); err != nil {
				return a, npyErrorf("descr: %v", err)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				a.fortran = true
			case p.word("False"):
			default:
				return a, npyErrorf("fortran_order is neither True nor False")
			}
		case "shape":
			if a.shape, err = p.tuple(); err != nil {
				return a, npyErrorf("shape: %v", err)
			}
		default:
			return a, npyErrorf("unknown header key %q", key)
		}
		if !p.eat(',') && p.peek() != '}' {
			return a, npyErrorf("header: expected ',' or '}' after %q", key)
		}
	}
	if p.rest() != "" {
		return a, npyErrorf("header: text after the dict")
	}
	if !seen["descr"] || !seen["fortran_order"] || !seen["shape"] {
		return a, npyErrorf("header lacks descr, fortran_order or shape")
	}
	return a, nil
}

// pyLiteral is a cursor over the small Python literal subset .npy uses.
type pyLiteral struct {
	s string
	i int
}

func (p *pyLiteral) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *pyLiteral) peek() byte {
	p.skip()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyLiteral) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *pyLiteral) word(w string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *pyLiteral) rest() string { p.skip(); return p.s[p.i:] }

// str reads a quoted string without escapes (numpy never writes any).
func (p *pyLiteral) str() (string, error) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", errors.New("not a quoted string")
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", errors.New("escapes are not supported")
	}
	p.i += end + 2
	return v, nil
}

// tuple reads "()", "(3,)" or "(2, 3)".
func (p *pyLiteral) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, errors.New("not a tuple")
	}
	dims := []int{}
	for !p.eat(')') {
		if len(dims) == maxShapeDims {
			return nil, fmt.Errorf("more than %d dimensions", maxShapeDims)
		}
		p.skip()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		v, err := strconv.ParseInt(p.s[p.i:j], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("dimension %d is not a non-negative integer", len(dims))
		}
		p.i = j
		p.word("L") // Python 2 longs
		dims = append(dims, int(v))
		if !p.eat(',') && p.peek() != ')' {
			return nil, errors.New("expected ',' or ')'")
		}
	}
	return dims, nil
}

// readNPZRecord reads the "data" array of an .npz archive (size bytes in
// r) and checks it against the channel: same type, same shape. The member
// is size-checked against the record before it is decompressed.
func readNPZRecord(r io.ReaderAt, size int64, c Channel) ([]byte, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, npyErrorf("npz: %v", err)
	}
	var member *zip.File
	for _, f := range zr.File {
		if f.Name == npzDataMember {
			member = f
			break
		}
	}
	if member == nil {
		return nil, npyErrorf("npz has no %s member", npzDataMember)
	}
	limit := uint64(c.RecordBytes) + maxNPZOverheadB
	if member.UncompressedSize64 > limit {
		return nil, npyErrorf("npz member %s declares %d bytes, a %s record needs at most %d", npzDataMember, member.UncompressedSize64, c.Name, limit)
	}
	rc, err := member.Open()
	if err != nil {
		return nil, npyErrorf("npz: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(limit)+1))
	if err != nil {
		return nil, npyErrorf("npz: %v", err)
	}
	if uint64(len(b)) > limit {
		return nil, npyErrorf("npz member %s holds more than %d bytes", npzDataMember, limit)
	}
	a, err := parseNPY(b)
	if err != nil {
		return nil, err
	}
	dt, _ := ParseDType(a.descr) // parseNPY checked it
	if dt != c.DType || !slices.Equal(a.shape, c.Shape) {
		return nil, fmt.Errorf("%w: npz record is %s %v, channel %s is %s %v", ErrRecordSize, a.descr, a.shape, c.Name, c.DType, c.Shape)
	}
	return a.data, nil
}
