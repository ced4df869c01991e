package transforms

import (
	"bytes"
	"fmt"
	"testing"

	"warehouse-etl/dtype"
)

// commonResample is one resampling pass of a common build: srcSize ->
// dstSize samples on one axis.
type commonResample struct {
	src, dst int
	vertical bool
	what     string // the case it comes from, for messages
}

// commonSources and commonTargets are the source frame sizes (480p, 720p,
// 1080p, 4K) and the square letterbox targets that builds commonly use.
var (
	commonSources = [][2]int{{640, 480}, {1280, 720}, {1920, 1080}, {3840, 2160}}
	commonTargets = []int{224, 256, 384, 512, 640, 1024}
)

// commonResamples lists the resampling passes of every common source, in
// both orientations, letterboxed into every common target: without DCT
// scaling (PNG, or a JPEG decoded at full size) and after each JPEG DCT
// scale 1/k (k in 2, 4, 8) that still leaves at least the new size on both
// axes (the decoder picks the largest such k; the smaller ones are listed
// too, so a change of that rule keeps its cases covered). The scaled
// source is ceil(w/k) x ceil(h/k), as libjpeg-turbo makes it.
func commonResamples(t testing.TB) []commonResample {
	var out []commonResample
	for _, s := range commonSources {
		for _, src := range [][2]int{s, {s[1], s[0]}} {
			for _, side := range commonTargets {
				spec := Spec{Width: side, Height: side, Mode: Letterbox, DType: dtype.F32}
				g, err := PlanGeometry(spec, src[0], src[1])
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []int{1, 2, 4, 8} {
					if k > 1 && (src[0] < k*g.NewW || src[1] < k*g.NewH) {
						continue
					}
					w, h := (src[0]+k-1)/k, (src[1]+k-1)/k
					what := fmt.Sprintf("%dx%d (1/%d: %dx%d) -> %dx%d in %d", src[0], src[1], k, w, h, g.NewW, g.NewH, side)
					if w != g.NewW {
						out = append(out, commonResample{w, g.NewW, false, what})
					}
					if h != g.NewH {
						out = append(out, commonResample{h, g.NewH, true, what})
					}
				}
			}
		}
	}
	return out
}

// TestCommonCasesHaveKernels fails if a common build's resampling falls to
// the generic loops: every pass listed by commonResamples must have a
// kernel, horizontally for both pixel sizes (packed RGB and RGBA). The log
// (go test -v) has the table of tap counts.
func TestCommonCasesHaveKernels(t *testing.T) {
	type pass struct {
		src, dst int
		vertical bool
	}
	seen := map[pass]bool{}
	var a axisWeights
	for _, c := range commonResamples(t) {
		p := pass{c.src, c.dst, c.vertical}
		if seen[p] {
			continue
		}
		seen[p] = true
		a.prepare(c.src, c.dst)
		axis := "horizontal"
		if c.vertical {
			axis = "vertical"
		}
		t.Logf("%-10s %4d -> %4d: %2d taps (first in %s)", axis, c.src, c.dst, a.taps, c.what)
		if c.vertical {
			if a.taps != 1 && columnKernel(a.taps) == nil {
				t.Errorf("%s: vertical %d -> %d (%d taps) has no kernel", c.what, c.src, c.dst, a.taps)
			}
			continue
		}
		for _, bpp := range []int{3, 4} {
			if rowKernel(bpp, a.taps) == nil {
				t.Errorf("%s: horizontal %d -> %d (%d taps, %d-byte pixels) has no kernel", c.what, c.src, c.dst, a.taps, bpp)
			}
		}
	}
}

// The kernels give exactly the generic loops' bytes (and the reference's,
// from the exact supports) for every tap count from 1 to 40 and both pixel
// sizes, on random pixels and on all-255 pixels (the largest sums). The
// wide kernels are also run directly at every count they can take, so they
// stay covered where the dispatch picks an unrolled kernel.
func TestResampleKernelsMatchGeneric(t *testing.T) {
	const maxTaps = 40
	const n, stride = 3*29 + 1, 3*29 + 6 // vertical: row length and stride
	for want := 1; want <= maxTaps; want++ {
		// A downscale to 29 outputs with want taps: the first source size
		// that has them.
		var a axisWeights
		found := false
		for s := 29; s < 29*maxTaps; s++ {
			if a.prepare(s, 29); a.taps == want {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no downscale to 29 has %d taps", want)
		}
		for fill := range 2 {
			for _, bpp := range []int{3, 4} {
				src := make([]byte, bpp*a.srcSize+5) // slack past the row, as in real strides
				fillRandom(src, uint64(100*want+10*bpp+fill))
				if fill == 1 {
					for i := range src {
						src[i] = 255
					}
				}
				want := make([]byte, 3*a.dstSize)
				resampleRowGeneric(want, src, bpp, a.first, a.padded)
				if ref := referenceRow(&a, src, bpp); !bytes.Equal(want, ref) {
					t.Fatalf("%d -> %d bpp %d (%d taps): the generic loop differs from the reference", a.srcSize, a.dstSize, bpp, a.taps)
				}
				got := make([]byte, 3*a.dstSize)
				a.resampleRow(got, src, bpp)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d -> %d bpp %d (%d taps): row differs from the generic loop", a.srcSize, a.dstSize, bpp, a.taps)
				}
				wide := resampleRow3xWide
				if bpp == 4 {
					wide = resampleRow4xWide
				}
				clear(got)
				wide[a.taps%len(wide)](got, src, a.first, a.padded)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d -> %d bpp %d (%d taps): wide row kernel differs from the generic loop", a.srcSize, a.dstSize, bpp, a.taps)
				}
			}
			src := make([]byte, stride*a.srcSize)
			fillRandom(src, uint64(want+fill))
			if fill == 1 {
				for i := range src {
					src[i] = 255
				}
			}
			got, want := make([]byte, n), make([]byte, n)
			acc := make([]int32, n)
			for v := range a.dstSize {
				w := a.padded[v*a.taps : (v+1)*a.taps]
				rows := src[int(a.first[v])*stride:]
				resampleColumnGeneric(want, acc, rows, stride, w)
				if ref := referenceColumn(&a, src, stride, n, v); !bytes.Equal(want, ref) {
					t.Fatalf("%d -> %d output row %d (%d taps): the generic loop differs from the reference", a.srcSize, a.dstSize, v, a.taps)
				}
				clear(acc)
				a.resampleColumn(got, acc, src, stride, v)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d -> %d output row %d (%d taps): column differs from the generic loop", a.srcSize, a.dstSize, v, a.taps)
				}
				if a.taps > 4 { // the wide kernel's minimum: one chunk and a remainder
					clear(got)
					resampleColumnWide(got, acc, rows, stride, w)
					if !bytes.Equal(got, want) {
						t.Fatalf("%d -> %d output row %d (%d taps): wide column kernel differs from the generic loop", a.srcSize, a.dstSize, v, a.taps)
					}
				}
			}
		}
	}
}
