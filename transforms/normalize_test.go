package transforms

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/dtype"
)

// Bit patterns worked out by hand: v/255 for multiples of 51 is k/5.
//
//	0.2 = 1.6 * 2^-3: f32 0x3E4CCCCD; f16 exponent 12, mantissa 0.6*1024 = 614.4 -> 614: 0x3266
//	0.4 = 1.6 * 2^-2: f32 0x3ECCCCCD; f16 0x3666
//	0.6 = 1.2 * 2^-1: f32 0x3F19999A; f16 mantissa 0.2*1024 = 204.8 -> 205: 0x38CD
//	0.8 = 1.6 * 2^-1: f32 0x3F4CCCCD; f16 0x3A66
//	1.0: f32 0x3F800000; f16 0x3C00
func TestNormalizerKnownValues(t *testing.T) {
	tests := []struct {
		v   int
		f32 uint32
		f16 uint16
	}{
		{0, 0x00000000, 0x0000},
		{51, 0x3E4CCCCD, 0x3266},
		{102, 0x3ECCCCCD, 0x3666},
		{153, 0x3F19999A, 0x38CD},
		{204, 0x3F4CCCCD, 0x3A66},
		{255, 0x3F800000, 0x3C00},
	}
	n := newNormalizer(Spec{Width: 1, Height: 1, Mode: Stretch, DType: dtype.F16})
	for _, tt := range tests {
		for c := range 3 {
			if n.f32[c][tt.v] != tt.f32 || n.f16[c][tt.v] != tt.f16 {
				t.Errorf("v=%d channel %d: f32 %#08x f16 %#04x, want %#08x %#04x", tt.v, c, n.f32[c][tt.v], n.f16[c][tt.v], tt.f32, tt.f16)
			}
		}
	}
	// mean 0.5, std 0.5 maps 0 -> -1 and 255 -> 1 exactly.
	m := newNormalizer(Spec{Width: 1, Height: 1, Mode: Stretch, DType: dtype.F16, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}})
	if m.f32[0][0] != 0xBF800000 || m.f16[0][0] != 0xBC00 || m.f32[2][255] != 0x3F800000 || m.f16[2][255] != 0x3C00 {
		t.Errorf("mean=std=0.5: got f32 %#x %#x f16 %#x %#x, want -1 and 1", m.f32[0][0], m.f32[2][255], m.f16[0][0], m.f16[2][255])
	}
}

// All 256 values of every channel against the definition computed directly:
// (v/255 - mean)/std in float64 -> float32 -> float16 (round to nearest
// even).
func TestNormalizerAllValues(t *testing.T) {
	specs := map[string]Spec{
		"plain":    {Width: 1, Height: 1, Mode: Stretch, DType: dtype.F16},
		"imagenet": {Width: 1, Height: 1, Mode: Stretch, DType: dtype.F16, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}},
		"wide":     {Width: 1, Height: 1, Mode: Stretch, DType: dtype.F32, Mean: [3]float64{-3, 0, 7}, Std: [3]float64{1e-3, 3, 0.5}},
	}
	for name, s := range specs {
		n := newNormalizer(s)
		for c := range 3 {
			for v := range 256 {
				x := float64(v) / 255
				if s.Std != ([3]float64{}) {
					x = (x - s.Mean[c]) / s.Std[c]
				}
				f := float32(x)
				if n.f32[c][v] != math.Float32bits(f) || n.f16[c][v] != float16.Fromfloat32(f).Bits() {
					t.Fatalf("%s channel %d v %d: f32 %#x f16 %#x, want %#x %#x", name, c, v,
						n.f32[c][v], n.f16[c][v], math.Float32bits(f), float16.Fromfloat32(f).Bits())
				}
			}
		}
	}
}

func TestFillRepeated(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 1000} {
		dst := make([]byte, 2*n)
		fillRepeated(dst, []byte{0xAB, 0xCD})
		for i := 0; i < len(dst); i += 2 {
			if dst[i] != 0xAB || dst[i+1] != 0xCD {
				t.Fatalf("n=%d: element %d = %x", n, i/2, dst[i:i+2])
			}
		}
	}
}

// f16At reads element (c, y, x) of an F16 CHW output.
func f16At(out []byte, w, h, c, y, x int) uint16 {
	return binary.LittleEndian.Uint16(out[2*((c*h+y)*w+x):])
}

// f32At reads element (c, y, x) of an F32 CHW output.
func f32At(out []byte, w, h, c, y, x int) uint32 {
	return binary.LittleEndian.Uint32(out[4*((c*h+y)*w+x):])
}

// TestU8MatchesFloatOutputs runs every golden input through the same spec in
// U8, F16 and F32: the U8 output is the resampled pixels, so normalizing it
// through the spec's float32 table gives the F32 output bit for bit, and
// without normalization round(255 x the F16 output) gives it back exactly.
func TestU8MatchesFloatOutputs(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			outputs := map[dtype.DType][]byte{}
			for _, d := range []dtype.DType{dtype.U8, dtype.F16, dtype.F32} {
				s := c.spec
				s.DType = d
				out := make([]byte, s.OutputBytes())
				if err := c.run(mustTransformer(t, s), out); err != nil {
					t.Fatal(err)
				}
				outputs[d] = out
			}
			u8, f16, f32 := outputs[dtype.U8], outputs[dtype.F16], outputs[dtype.F32]
			if len(u8) != 3*c.spec.Width*c.spec.Height {
				t.Fatalf("U8 output is %d bytes, want %d", len(u8), 3*c.spec.Width*c.spec.Height)
			}
			plane := c.spec.Width * c.spec.Height
			n := newNormalizer(c.spec)
			for k, v := range u8 {
				ch := k / plane
				if got, want := n.f32[ch][v], binary.LittleEndian.Uint32(f32[4*k:]); got != want {
					t.Fatalf("element %d: table[%d][%d] = %#x, F32 output %#x", k, ch, v, got, want)
				}
				if c.spec.Std != ([3]float64{}) {
					continue
				}
				h := float16.Frombits(binary.LittleEndian.Uint16(f16[2*k:])).Float32()
				if back := math.Round(255 * float64(h)); back != float64(v) {
					t.Fatalf("element %d: round(255 x F16 %v) = %v, U8 %d", k, h, back, v)
				}
			}
		})
	}
}
