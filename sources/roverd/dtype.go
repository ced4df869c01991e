package roverd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// ErrUnknownType is wrapped when meta.json names a type this reader cannot
// turn into numbers.
var ErrUnknownType = errors.New("roverd: unknown type name")

// DType is a channel's element type in numpy's size-in-bytes spelling: a
// kind letter (b bool, i signed, u unsigned, f float) and a size in bytes.
type DType struct {
	Kind byte // 'b', 'i', 'u' or 'f'
	Size int  // 1, 2, 4 or 8
}

// dtypeNames maps numpy names to the canonical names the manifest records
// for extras (the same spelling every source uses: f32, u8, ...).
var dtypeNames = map[DType]string{
	{'b', 1}: "bool",
	{'i', 1}: "i8", {'i', 2}: "i16", {'i', 4}: "i32", {'i', 8}: "i64",
	{'u', 1}: "u8", {'u', 2}: "u16", {'u', 4}: "u32", {'u', 8}: "u64",
	{'f', 2}: "f16", {'f', 4}: "f32", {'f', 8}: "f64",
}

// ParseDType reads a numpy type name as roverd's meta.json writes it: "f4",
// "u1", "i2", ... A byte-order prefix "<", "|" or "=" is accepted (roverd
// data is little-endian); ">" is refused, as are kinds that are not
// numbers (complex, strings, structured or object types).
func ParseDType(name string) (DType, error) {
	s := name
	if len(s) > 0 {
		switch s[0] {
		case '<', '|', '=':
			s = s[1:]
		case '>':
			return DType{}, fmt.Errorf("%w: %q is big-endian; roverd data is little-endian", ErrUnknownType, name)
		}
	}
	if len(s) == 2 && s[1] >= '1' && s[1] <= '8' {
		d := DType{Kind: s[0], Size: int(s[1] - '0')}
		if _, ok := dtypeNames[d]; ok {
			return d, nil
		}
	}
	return DType{}, fmt.Errorf("%w: %q (numpy size-in-bytes names: b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8)", ErrUnknownType, name)
}

// String is the numpy name, e.g. "f4".
func (d DType) String() string { return fmt.Sprintf("%c%d", d.Kind, d.Size) }

// Canonical is the manifest's name for the type, e.g. "f32".
func (d DType) Canonical() string { return dtypeNames[d] }

// AppendFloat32 converts the little-endian elements in b (a whole number of
// them) to float32 and appends them to dst. Integers wider than 24 bits and
// f8 values lose precision; f8 values beyond float32's range become
// infinities, which the pipeline reports as nonfinite.
func (d DType) AppendFloat32(dst []float32, b []byte) []float32 {
	le := binary.LittleEndian
	for p := 0; p+d.Size <= len(b); p += d.Size {
		var v float32
		switch d {
		case DType{'b', 1}:
			if b[p] != 0 {
				v = 1
			}
		case DType{'i', 1}:
			v = float32(int8(b[p]))
		case DType{'u', 1}:
			v = float32(b[p])
		case DType{'i', 2}:
			v = float32(int16(le.Uint16(b[p:])))
		case DType{'u', 2}:
			v = float32(le.Uint16(b[p:]))
		case DType{'i', 4}:
			v = float32(int32(le.Uint32(b[p:])))
		case DType{'u', 4}:
			v = float32(le.Uint32(b[p:]))
		case DType{'i', 8}:
			v = float32(int64(le.Uint64(b[p:])))
		case DType{'u', 8}:
			v = float32(le.Uint64(b[p:]))
		case DType{'f', 2}:
			v = float16.Frombits(le.Uint16(b[p:])).Float32()
		case DType{'f', 4}:
			v = math.Float32frombits(le.Uint32(b[p:]))
		case DType{'f', 8}:
			v = float32(math.Float64frombits(le.Uint64(b[p:])))
		}
		dst = append(dst, v)
	}
	return dst
}
