package transforms

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/disintegration/imaging"

	"warehouse-etl/dtype"
)

// Weights worked out by hand from n(u) = max(0, 2M - |(2u+1)D - (2v+1)S|).
func TestAxisWeightsHandComputed(t *testing.T) {
	tests := []struct {
		name   string
		s, d   int
		starts []int32
		coeffs [][]int32
	}{
		// 4 -> 2, M = 4. v=0: n = 8-|2-4|, 8-|6-4|, 8-|10-4| = 6, 6, 2 (sum 14).
		// 6/14*2^22 = 1797558.86, 2/14*2^22 = 599186.29: floors sum to 4194302,
		// the 2 missing units go to the two largest remainders (.86, .86).
		// v=1 mirrors it: 2, 6, 6 from u=1.
		{"4 to 2", 4, 2, []int32{0, 1}, [][]int32{{1797559, 1797559, 599186}, {599186, 1797559, 1797559}}},
		// 2 -> 4, M = 4. v=0: u=0 only (6). v=1: 6, 2 -> 3/4, 1/4. v=2: 2, 6. v=3: u=1 only.
		{"2 to 4", 2, 4, []int32{0, 0, 0, 1}, [][]int32{{weightOne}, {3145728, 1048576}, {1048576, 3145728}, {weightOne}}},
		// 3 -> 1, M = 3, c = 3; (2u+1)*1 = 1, 3, 5: n = 6-2, 6-0, 6-2 = 4, 6, 4 (sum 14).
		// 4/14*2^22 = 1198372.57, 6/14*2^22 = 1797558.86: floors sum to 4194302; the
		// two missing units go to the largest remainder (.86, the middle) and to the
		// lower index of the tied .57s.
		{"3 to 1", 3, 1, []int32{0}, [][]int32{{1198373, 1797559, 1198372}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a axisWeights
			a.prepare(tt.s, tt.d)
			for v := range tt.d {
				n := int(a.count[v])
				got := a.coeff[v*a.taps : v*a.taps+n]
				if a.start[v] != tt.starts[v] || !slices.Equal(got, tt.coeffs[v]) {
					t.Errorf("output %d: start %d weights %v, want start %d weights %v", v, a.start[v], got, tt.starts[v], tt.coeffs[v])
				}
			}
		})
	}
}

// Structural properties for many size pairs, including extremes.
func TestAxisWeightsProperties(t *testing.T) {
	pairs := [][2]int{{1, 1}, {1, 7}, {7, 1}, {2, 3}, {3, 2}, {1920, 640}, {1080, 360}, {123, 640}, {77, 401},
		{640, 641}, {641, 640}, {1000, 999}, {MaxSourceSide, 1}, {1, MaxTargetSide}, {MaxSourceSide, MaxTargetSide}, {5, 16384}}
	for _, p := range pairs {
		var a axisWeights
		a.prepare(p[0], p[1])
		for v := range p[1] {
			n := int(a.count[v])
			w := a.coeff[v*a.taps : v*a.taps+n]
			var sum int64
			for _, c := range w {
				if c < 0 {
					t.Fatalf("%v output %d: negative weight %d", p, v, c)
				}
				sum += int64(c)
			}
			if sum != weightOne {
				t.Fatalf("%v output %d: weights sum to %d, want %d", p, v, sum, weightOne)
			}
			if n < 1 || a.start[v] < 0 || int(a.start[v])+n > p[0] {
				t.Fatalf("%v output %d: taps [%d, %d) outside source of %d", p, v, a.start[v], int(a.start[v])+n, p[0])
			}
			if v > 0 && a.start[v] < a.start[v-1] {
				t.Fatalf("%v output %d: start %d before previous %d", p, v, a.start[v], a.start[v-1])
			}
		}
	}
}

// Small resizes whose exact results are integers, worked out by hand from
// the weights above, in both directions and on both axes.
func TestResampleHandComputed(t *testing.T) {
	gray := func(vs ...byte) []byte {
		var pix []byte
		for _, v := range vs {
			pix = append(pix, v, v, v)
		}
		return pix
	}
	tests := []struct {
		name   string
		src    []byte
		w, h   int
		tw, th int
		want   []byte
	}{
		// 4 -> 2: (70*6 + 140*2)/14 = 50, (70*2 + 140*6 + 210*6)/14 = 160.
		{"row down", gray(0, 70, 140, 210), 4, 1, 2, 1, gray(50, 160)},
		// 2 -> 4: 0, 0.75*0 + 0.25*200 = 50, 150, 200.
		{"row up", gray(0, 200), 2, 1, 4, 1, gray(0, 50, 150, 200)},
		{"column down", gray(0, 70, 140, 210), 1, 4, 1, 2, gray(50, 160)},
		{"column up", gray(0, 200), 1, 2, 1, 4, gray(0, 50, 150, 200)},
		// 3 -> 1: (4*14 + 6*28 + 4*98)/14 = (56+168+392)/14 = 44.
		{"three to one", gray(14, 28, 98), 3, 1, 1, 1, gray(44)},
		// Both axes, 2x2 -> 4x4; rows 0 200 and 100 100. Horizontal (3/4 and 1/4 are
		// exact in 2^22): 0 50 150 200 and 100 100 100 100. Vertical with the same
		// weights: row 1 = 3/4 row 0 + 1/4 row 3 = 25 62.5 137.5 175, row 2 =
		// 75 87.5 112.5 125; exact halves round up.
		{"both axes", []byte{0, 0, 0, 200, 200, 200, 100, 100, 100, 100, 100, 100}, 2, 2, 4, 4, gray(
			0, 50, 150, 200,
			25, 63, 138, 175,
			75, 88, 113, 125,
			100, 100, 100, 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := Spec{Width: tt.tw, Height: tt.th, Mode: Stretch, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).ApplyRGB(tt.src, tt.w, tt.h, 3*tt.w, out)
			if err != nil {
				t.Fatal(err)
			}
			if got := outputRGB(t, out, spec, g); !slices.Equal(got, tt.want) {
				t.Fatalf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// A flat image stays exactly flat under any resize, because every output's
// weights sum to exactly one.
func TestResampleFlatStaysFlat(t *testing.T) {
	sizes := [][4]int{{1920, 1080, 640, 360}, {123, 77, 640, 401}, {7, 3, 1000, 999}, {1000, 1, 3, 3}, {5, 5, 4, 4}}
	for _, sz := range sizes {
		for _, v := range []byte{0, 1, 127, 254, 255} {
			w, h := sz[0], sz[1]
			px := []byte{v, 255 - v, v / 2} // flat per channel, distinct across channels
			src := bytes.Repeat(px, w*h)
			spec := Spec{Width: sz[2], Height: sz[3], Mode: Stretch, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).ApplyRGB(src, w, h, 3*w, out)
			if err != nil {
				t.Fatal(err)
			}
			got := outputRGB(t, out, spec, g)
			for i, p := range got {
				if p != px[i%3] {
					t.Fatalf("%v value %d: pixel byte %d = %d, want %d", sz, v, i, p, px[i%3])
				}
			}
		}
	}
}

// The resampler against an independent implementation:
// disintegration/imaging's Resize with the Linear filter (float weights,
// same triangle definition, 8-bit intermediate). Results differ only where
// the exact result is (nearly) a .5 tie: we round exact rationals half up,
// imaging's float weights land on either side. Ratios with small
// denominators (5/3) make ties common, and a tie flipped in the horizontal
// pass can add to one in the vertical pass, so a rare 2 is expected.
func TestResampleMatchesImaging(t *testing.T) {
	tests := []struct {
		w, h, tw, th int
		noise        int
	}{
		{1920, 1080, 640, 360, 12},
		{123, 77, 640, 401, 12},
		{64, 48, 200, 150, 30},
		{1000, 700, 333, 233, 8},
		{640, 480, 384, 288, 12},
		{300, 300, 299, 301, 20},
		{97, 203, 41, 555, 16},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d->%dx%d", tt.w, tt.h, tt.tw, tt.th), func(t *testing.T) {
			src := gradientNoiseRGB(tt.w, tt.h, uint64(i+1), tt.noise)
			spec := Spec{Width: tt.tw, Height: tt.th, Mode: Stretch, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).ApplyRGB(src, tt.w, tt.h, 3*tt.w, out)
			if err != nil {
				t.Fatal(err)
			}
			got := outputRGB(t, out, spec, g)
			ref := imaging.Resize(rgbToNRGBA(src, tt.w, tt.h), tt.tw, tt.th, imaging.Linear)
			var maxDiff, sumDiff, over1 int
			for p := range tt.tw * tt.th {
				for c := range 3 {
					d := int(got[3*p+c]) - int(ref.Pix[4*p+c])
					d = max(d, -d)
					maxDiff = max(maxDiff, d)
					sumDiff += d
					if d > 1 {
						over1++
					}
				}
			}
			mean := float64(sumDiff) / float64(3*tt.tw*tt.th)
			t.Logf("vs imaging.Linear: max |diff| %d, mean |diff| %.5f, %d values differ by more than 1", maxDiff, mean, over1)
			if maxDiff > 2 || mean > 0.1 || over1*10000 > 3*tt.tw*tt.th {
				t.Fatalf("max |diff| %d (want <= 2), mean %.5f (want <= 0.1), %d values off by 2 (want <= 0.01%%)", maxDiff, mean, over1)
			}
		})
	}
}

// referenceRow and referenceColumn are the resampler written plainly from
// the exact supports (start, count, coeff): what the unrolled kernels and
// the padded weights must reproduce bit for bit.
func referenceRow(a *axisWeights, src []byte, bpp int) []byte {
	dst := make([]byte, 3*a.dstSize)
	for x := range a.dstSize {
		for c := range 3 {
			acc := int64(weightHalf)
			for k := range int(a.count[x]) {
				acc += int64(src[bpp*(int(a.start[x])+k)+c]) * int64(a.coeff[x*a.taps+k])
			}
			dst[3*x+c] = uint8(acc >> weightBits)
		}
	}
	return dst
}

func referenceColumn(a *axisWeights, src []byte, stride, n, v int) []byte {
	dst := make([]byte, n)
	for i := range n {
		acc := int64(weightHalf)
		for k := range int(a.count[v]) {
			acc += int64(src[(int(a.start[v])+k)*stride+i]) * int64(a.coeff[v*a.taps+k])
		}
		dst[i] = uint8(acc >> weightBits)
	}
	return dst
}

// Small tap counts (the unrolled kernels, the one-tap copy) and both pixel
// sizes give exactly the reference result; TestResampleKernelsMatchGeneric
// covers every count up to 40.
func TestResampleKernelsMatchReference(t *testing.T) {
	pairs := [][2]int{{50, 50}, {20, 41}, {99, 66}, {64, 32}, {90, 30}, {1000, 37}}
	// Add a downscale to 13 outputs for every tap count up to 9.
	for want := 1; want <= 9; want++ {
		for s := 13; s < 200; s++ {
			var a axisWeights
			if a.prepare(s, 13); a.taps == want {
				pairs = append(pairs, [2]int{s, 13})
				break
			}
		}
	}
	seen := map[int]bool{}
	for _, p := range pairs {
		var a axisWeights
		a.prepare(p[0], p[1])
		seen[a.taps] = true
		for _, bpp := range []int{3, 4} {
			src := make([]byte, bpp*p[0]+5) // a little slack past the row, as in real strides
			fillRandom(src, uint64(p[0]*10+bpp))
			got := make([]byte, 3*p[1])
			a.resampleRow(got, src, bpp)
			if want := referenceRow(&a, src, bpp); !bytes.Equal(got, want) {
				t.Fatalf("%v bpp %d (taps %d): row differs from the reference", p, bpp, a.taps)
			}
		}
		const n, stride = 37, 41
		src := make([]byte, stride*p[0])
		fillRandom(src, uint64(p[0]))
		got := make([]byte, n)
		acc := make([]int32, n)
		for v := range p[1] {
			a.resampleColumn(got, acc, src, stride, v)
			if want := referenceColumn(&a, src, stride, n, v); !bytes.Equal(got, want) {
				t.Fatalf("%v output row %d (taps %d): column differs from the reference", p, v, a.taps)
			}
		}
	}
	for taps := 1; taps <= 9; taps++ {
		if !seen[taps] {
			t.Errorf("no size pair exercises %d taps (have %v)", taps, seen)
		}
	}
}
