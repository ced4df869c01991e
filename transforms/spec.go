package transforms

import (
	"fmt"
	"math"

	"github.com/x448/float16"

	"warehouse-etl/dtype"
)

// ResizeMode says how a source image is brought to the target size.
type ResizeMode string

const (
	// Letterbox keeps the aspect ratio: the image is scaled to fit inside the
	// target and centred, the rest is filled with Spec.Pad.
	Letterbox ResizeMode = "letterbox"
	// Stretch scales each axis independently to the target size.
	Stretch ResizeMode = "stretch"
	// None requires the source to have exactly the target size.
	None ResizeMode = "none"
)

// Size limits. MaxTargetSide bounds the output tensor. The source limits
// bound what a (possibly lying) image header can make a worker allocate:
// 2^26 pixels is 192 MiB of packed RGB plus the decoder's own image; the side
// limit keeps the resampler's weight tables small for absurd aspect ratios.
const (
	MaxTargetSide   = 16384
	MaxSourceSide   = 1 << 16
	MaxSourcePixels = 1 << 26
)

// Spec is everything that decides the output bytes of a transform. Every
// field belongs in the warehouse version key.
type Spec struct {
	Width, Height int         // target size in pixels
	Mode          ResizeMode  // letterbox, stretch or none
	Pad           uint8       // letterbox fill in pixel units, all channels (0 = black)
	DType         dtype.DType // output element type
	// Mean and Std give the optional per-channel normalization
	// (v/255 - Mean[c]) / Std[c], channels in R, G, B order. Std all zero
	// means no normalization beyond v/255; Mean must then be zero too.
	Mean, Std [3]float64
}

// Validate reports the first problem with s, or nil.
func (s Spec) Validate() error {
	if s.Width < 1 || s.Width > MaxTargetSide || s.Height < 1 || s.Height > MaxTargetSide {
		return fmt.Errorf("transforms: target size %dx%d outside 1..%d", s.Width, s.Height, MaxTargetSide)
	}
	switch s.Mode {
	case Letterbox, Stretch, None:
	default:
		return fmt.Errorf("transforms: unknown resize mode %q", s.Mode)
	}
	if s.DType.Size() == 0 {
		return fmt.Errorf("transforms: unknown dtype %d", uint32(s.DType))
	}
	for c := range 3 {
		if math.IsNaN(s.Mean[c]) || math.IsInf(s.Mean[c], 0) {
			return fmt.Errorf("transforms: mean[%d] = %v is not finite", c, s.Mean[c])
		}
	}
	if s.Std == ([3]float64{}) {
		if s.Mean != ([3]float64{}) {
			return fmt.Errorf("transforms: mean %v given without std", s.Mean)
		}
		return nil
	}
	for c := range 3 {
		if !(s.Std[c] > 0) || math.IsInf(s.Std[c], 0) {
			return fmt.Errorf("transforms: std[%d] = %v: std must be all zero or all positive and finite", c, s.Std[c])
		}
	}
	// The normalization is linear in v, so its extremes are at v = 0 and
	// v = 255; both must be representable in the output dtype (a tiny std
	// overflows f16, whose largest finite value is 65504). For U8 the
	// reader applies it in float32, so it must be finite there.
	for c := range 3 {
		for _, v := range [2]int{0, 255} {
			if _, _, ok := s.encodeValue(c, v); !ok {
				return fmt.Errorf("transforms: normalized value of %d in channel %d is %v, not finite in %v",
					v, c, s.normalizedValue(c, v), s.DType.ConfigName())
			}
		}
	}
	return nil
}

// OutputBytes is the size of one output tensor: 3 x Height x Width elements.
func (s Spec) OutputBytes() int {
	return 3 * s.Width * s.Height * s.DType.Size()
}

// normalizedValue is the real-valued output for pixel value v (0..255) of
// channel c, computed in float64. There is no multiply-add in it, so no
// fused operation can change its rounding; the explicit float64 conversion
// still pins each step for the reader and for future edits.
func (s Spec) normalizedValue(c, v int) float64 {
	x := float64(v) / 255
	if s.Std == ([3]float64{}) {
		return x
	}
	return float64(x-s.Mean[c]) / s.Std[c]
}

// NormalizeTable is the float32 value of every pixel value v of each
// channel c under normalization mean, std: (v/255 - mean[c]) / std[c]
// computed in float64 and rounded once, or v/255 when std is all zero. It is
// exactly what an F32 build stores, so a reader that normalizes a U8 image
// through it reproduces the F32 build's pixels bit for bit.
func NormalizeTable(mean, std [3]float64) *[3][256]float32 {
	s := Spec{Mean: mean, Std: std}
	var t [3][256]float32
	for c := range 3 {
		for v := range 256 {
			t[c][v] = float32(s.normalizedValue(c, v))
		}
	}
	return &t
}

// encodeValue returns the output bit patterns for pixel value v of channel c:
// the float64 value rounded to float32, and that float32 rounded to float16
// (round to nearest even). ok reports whether the value is finite in s.DType
// (in float32 for U8, whose readers normalize in float32).
func (s Spec) encodeValue(c, v int) (f32 uint32, f16 uint16, ok bool) {
	x := float32(s.normalizedValue(c, v))
	h := float16.Fromfloat32(x)
	ok = !math.IsInf(float64(x), 0) && !math.IsNaN(float64(x))
	if s.DType == dtype.F16 {
		ok = h.IsFinite()
	}
	return math.Float32bits(x), h.Bits(), ok
}
