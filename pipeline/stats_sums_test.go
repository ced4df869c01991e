package pipeline

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/transforms"
)

// contentSumsSerial is contentSums as first written: one channel after
// the other, one value at a time, the normalized U8 value squared in
// float64. contentSums must give its bits.
func contentSumsSerial(img []byte, spec transforms.Spec, g transforms.Geometry) channelSums {
	var s channelSums
	d, width, height := spec.DType, spec.Width, spec.Height
	plane := width * height
	table := f16Table()
	u8Table := transforms.NormalizeTable(spec.Mean, spec.Std)
	for c := range 3 {
		var sum, sumSq float64
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			row := c*plane + y*width + g.PadX
			for x := range g.NewW {
				var v float64
				switch d {
				case dtype.U8:
					v = float64(u8Table[c][img[row+x]])
				case dtype.F16:
					v = float64(table[binary.LittleEndian.Uint16(img[2*(row+x):])])
				default:
					v = float64(math.Float32frombits(binary.LittleEndian.Uint32(img[4*(row+x):])))
				}
				sum += v
				sumSq += float64(v * v)
			}
		}
		s.sum[c], s.sumSq[c] = sum, sumSq
	}
	s.n = int64(g.NewW) * int64(g.NewH)
	return s
}

// contentSums (channels side by side) gives the serial loop's bits on
// random tensors of every dtype, random sizes, content rectangles and
// normalizations, including bytes outside the content that must not count.
func TestContentSumsEqualSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 24))
	dtypes := []dtype.DType{dtype.U8, dtype.F16, dtype.F32}
	for i := range 300 {
		spec := transforms.Spec{Width: 1 + rng.IntN(200), Height: 1 + rng.IntN(200), DType: dtypes[i%3]}
		if rng.IntN(3) > 0 {
			for c := range 3 {
				spec.Mean[c], spec.Std[c] = rng.Float64(), 0.01+rng.Float64()
			}
		}
		var g transforms.Geometry
		g.NewW, g.NewH = 1+rng.IntN(spec.Width), 1+rng.IntN(spec.Height)
		g.PadX, g.PadY = rng.IntN(spec.Width-g.NewW+1), rng.IntN(spec.Height-g.NewH+1)
		img := make([]byte, spec.OutputBytes())
		switch spec.DType {
		case dtype.U8:
			for j := range img {
				img[j] = byte(rng.IntN(256))
			}
		case dtype.F16:
			for j := 0; j < len(img); j += 2 {
				binary.LittleEndian.PutUint16(img[j:], uint16(rng.IntN(0x7c00))|uint16(rng.IntN(2))<<15) // finite
			}
		default:
			for j := 0; j < len(img); j += 4 {
				binary.LittleEndian.PutUint32(img[j:], math.Float32bits(float32(rng.NormFloat64()*math.Pow(2, float64(rng.IntN(40)-20)))))
			}
		}
		want, got := contentSumsSerial(img, spec, g), contentSums(img, spec, g)
		same := got.n == want.n
		for c := range 3 {
			same = same && math.Float64bits(got.sum[c]) == math.Float64bits(want.sum[c]) &&
				math.Float64bits(got.sumSq[c]) == math.Float64bits(want.sumSq[c])
		}
		if !same {
			t.Fatalf("tensor %d (spec %+v, geometry %+v): %+v, serially %+v", i, spec, g, got, want)
		}
	}
}

// A reused 384x384 u8 image's sums (the per-sample cost of a reuse rebuild).
func BenchmarkContentSumsU8(b *testing.B) {
	spec := transforms.Spec{Width: 384, Height: 384, DType: dtype.U8, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}
	g := transforms.Geometry{NewW: 384, NewH: 216, PadY: 84}
	img := make([]byte, spec.OutputBytes())
	rng := rand.New(rand.NewPCG(1, 2))
	for j := range img {
		img[j] = byte(rng.IntN(256))
	}
	b.SetBytes(int64(len(img)))
	b.Run("serial", func(b *testing.B) {
		for range b.N {
			contentSumsSerial(img, spec, g)
		}
	})
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			contentSums(img, spec, g)
		}
	})
}
