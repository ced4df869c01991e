package shard

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// putElement encodes v into dst (at least d.Size() bytes) in dtype d. F16
// rounds to nearest, ties to even (IEEE 754 default rounding).
func putElement(dst []byte, d DType, v float32) {
	if d == F16 {
		binary.LittleEndian.PutUint16(dst, float16.Fromfloat32(v).Bits())
		return
	}
	binary.LittleEndian.PutUint32(dst, math.Float32bits(v))
}

// element decodes the element of dtype d at the start of src.
func element(src []byte, d DType) float32 {
	if d == F16 {
		return float16.Frombits(binary.LittleEndian.Uint16(src)).Float32()
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(src))
}
