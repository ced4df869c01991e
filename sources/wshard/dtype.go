package wshard

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DType is the element type of a channel, as meta/channels names it.
type DType uint8

// The 13 WShard dtypes. Values are this package's, not the file's: files
// spell dtypes as strings.
const (
	F32 DType = iota + 1
	F64
	F16
	BF16
	I64
	I32
	I16
	I8
	U64
	U32
	U16
	U8
	Bool
)

// dtypeInfo is each dtype's canonical name (the one the reference writers
// emit and manifests record) and size in bytes.
var dtypeInfo = [...]struct {
	name string
	size int
}{
	F32: {"f32", 4}, F64: {"f64", 8}, F16: {"f16", 2}, BF16: {"bf16", 2},
	I64: {"i64", 8}, I32: {"i32", 4}, I16: {"i16", 2}, I8: {"i8", 1},
	U64: {"u64", 8}, U32: {"u32", 4}, U16: {"u16", 2}, U8: {"u8", 1},
	Bool: {"bool", 1},
}

// dtypeAliases are the numpy/PyTorch spellings the reference reader also
// accepts.
var dtypeAliases = map[string]DType{
	"float32": F32, "float64": F64, "float16": F16, "bfloat16": BF16,
	"int64": I64, "int32": I32, "int16": I16, "int8": I8,
	"uint64": U64, "uint32": U32, "uint16": U16, "uint8": U8,
	"bool_": Bool,
}

// ParseDType reads a dtype name: a canonical name (f32, bf16, u8, bool,
// ...) or an alias (float32, bfloat16, uint8, ...).
func ParseDType(s string) (DType, error) {
	for d := F32; d <= Bool; d++ {
		if dtypeInfo[d].name == s {
			return d, nil
		}
	}
	if d, ok := dtypeAliases[s]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("unknown dtype %q", s)
}

// String is the canonical name.
func (d DType) String() string {
	if d >= F32 && d <= Bool {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the element size in bytes.
func (d DType) Size() int {
	if d >= F32 && d <= Bool {
		return dtypeInfo[d].size
	}
	return 0
}

// Float32s converts little-endian elements of d in src into dst, which must
// hold len(src)/d.Size() values. f16 is converted exactly (every binary16
// is a binary32); bf16 is the top half of a binary32, so shifting it into
// place is exact too. f64, i64, u64 and the 32-bit integers beyond 2^24
// round to the nearest float32 (an f64 beyond the float32 range becomes
// ±Inf, which the pipeline reports as nonfinite). bool is 1 for any
// non-zero byte, as numpy reads it.
func (d DType) Float32s(dst []float32, src []byte) {
	le := binary.LittleEndian
	n := d.Size()
	if n == 0 || len(dst)*n != len(src) {
		panic(fmt.Sprintf("wshard: %d bytes of %s into %d values", len(src), d, len(dst)))
	}
	for i := range dst {
		b := src[i*n:]
		var v float32
		switch d {
		case F32:
			v = math.Float32frombits(le.Uint32(b))
		case F64:
			v = float32(math.Float64frombits(le.Uint64(b)))
		case F16:
			v = float16.Frombits(le.Uint16(b)).Float32()
		case BF16:
			v = math.Float32frombits(uint32(le.Uint16(b)) << 16)
		case I64:
			v = float32(int64(le.Uint64(b)))
		case I32:
			v = float32(int32(le.Uint32(b)))
		case I16:
			v = float32(int16(le.Uint16(b)))
		case I8:
			v = float32(int8(b[0]))
		case U64:
			v = float32(le.Uint64(b))
		case U32:
			v = float32(le.Uint32(b))
		case U16:
			v = float32(le.Uint16(b))
		case U8:
			v = float32(b[0])
		case Bool:
			if b[0] != 0 {
				v = 1
			}
		}
		dst[i] = v
	}
}
