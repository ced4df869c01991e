// Package dtype is the element type of a warehouse's image tensors: the one
// enum the transforms produce and the shard format stores.
//
// The numbering is the dtype field of the TWH1 shard header
// (docs/format/shard.md): it must never be renumbered. Each dtype has two
// spellings: its name in the manifest and the shard format ("F32", "F16",
// "U8": String, Parse) and its name in the build config ("f32", "f16",
// "u8": ConfigName, ParseConfig).
package dtype

import "fmt"

// DType is the element type of the image tensors.
type DType uint32

const (
	F32 DType = 0 // IEEE 754 binary32, little-endian
	F16 DType = 1 // IEEE 754 binary16, little-endian
	// U8 is the resampled 8-bit pixel itself: normalization is not applied
	// to the output but recorded for the reader (the manifest's mean and
	// std). Shards store its boxes and mask as F32 (BoxDType).
	U8 DType = 2
)

// info is what each dtype is: its element size and its two names.
var info = [...]struct {
	size         int
	name, config string
}{
	F32: {4, "F32", "f32"},
	F16: {2, "F16", "f16"},
	U8:  {1, "U8", "u8"},
}

// Size is the number of bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int {
	if d >= DType(len(info)) {
		return 0
	}
	return info[d].size
}

// BoxDType is the dtype of the boxes and mask that go with images of dtype
// d: d itself for F16 and F32, F32 for U8.
func (d DType) BoxDType() DType {
	if d == U8 {
		return F32
	}
	return d
}

// String returns the name the manifest and the shard format use: "F32",
// "F16" or "U8".
func (d DType) String() string {
	if d >= DType(len(info)) {
		return fmt.Sprintf("DType(%d)", uint32(d))
	}
	return info[d].name
}

// ConfigName returns the name the build config uses: "f32", "f16" or "u8".
func (d DType) ConfigName() string {
	if d >= DType(len(info)) {
		return fmt.Sprintf("dtype(%d)", uint32(d))
	}
	return info[d].config
}

// Parse is the inverse of DType.String for the known dtypes.
func Parse(s string) (DType, error) {
	for d, in := range info {
		if s == in.name {
			return DType(d), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want F32, F16 or U8)", s)
}

// ParseConfig is the inverse of DType.ConfigName for the known dtypes.
func ParseConfig(s string) (DType, error) {
	for d, in := range info {
		if s == in.config {
			return DType(d), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want f32, f16 or u8)", s)
}
