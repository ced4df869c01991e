package jpegdec

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"testing"
)

// scaledBounds are the documented limits of the scaled outputs against a
// float reference: the k x k box mean of image/jpeg's full-resolution
// samples of the same plane. The reduced IDCTs compute those means from
// the coefficients directly, before clamping and with 13-bit constants, so
// they differ by rounding and where the full-size samples clip (the corpus
// pattern has hard 255-to-0 edges that ring at q50). Boxes cut by the
// right or bottom edge ("edge") also average the encoder's padding beyond
// the frame, which the box mean of the visible part does not see.
// Measured on the corpus (interior max/mean, edge max/mean): 1/2
// 12.25/0.270, 23.5/2.53; 1/4 4.56/0.261, 29.3/2.45; 1/8 1.27/0.129,
// 58.6/4.69.
var scaledBounds = map[int]struct{ maxAbs, meanAbs, edgeMax, edgeMean float64 }{
	2: {maxAbs: 16, meanAbs: 0.3, edgeMax: 32, edgeMean: 3},
	4: {maxAbs: 6, meanAbs: 0.3, edgeMax: 32, edgeMean: 3},
	8: {maxAbs: 2, meanAbs: 0.2, edgeMax: 64, edgeMean: 6},
}

// planeDiff accumulates absolute differences.
type planeDiff struct {
	maxAbs, sumAbs float64
	n              int
}

func (p *planeDiff) add(got byte, want float64) {
	d := math.Abs(float64(got) - want)
	p.maxAbs = max(p.maxAbs, d)
	p.sumAbs += d
	p.n++
}

// boxMean is the mean of at(x, y) over x0 <= x < x1, y0 <= y < y1.
func boxMean(at func(x, y int) byte, x0, y0, x1, y1 int) float64 {
	s := 0
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			s += int(at(x, y))
		}
	}
	return float64(s) / float64((x1-x0)*(y1-y0))
}

// compareScaled measures the luma (or gray) plane of a 1/k decode against
// the box means of image/jpeg's full-resolution plane.
func compareScaled(t *testing.T, data []byte, k int, pd, edge *planeDiff) {
	t.Helper()
	full, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	m, err := d.Decode(data, k)
	if err != nil {
		t.Fatal(err)
	}
	fb := full.Bounds()
	var fullAt, gotAt func(x, y int) byte
	switch f := full.(type) {
	case *image.YCbCr:
		fullAt = func(x, y int) byte { return f.Y[f.YOffset(x, y)] }
		gotAt = func(x, y int) byte { return m.YCbCr.Y[y*m.YCbCr.YStride+x] }
	case *image.Gray:
		fullAt = func(x, y int) byte { return f.Pix[f.PixOffset(x, y)] }
		gotAt = func(x, y int) byte { return m.Gray.Pix[y*m.Gray.Stride+x] }
	default:
		t.Fatalf("unexpected %T", full)
	}
	sw, sh := (fb.Dx()+k-1)/k, (fb.Dy()+k-1)/k
	if r := decodedImage(m).Bounds(); r.Dx() != sw || r.Dy() != sh {
		t.Fatalf("1/%d: bounds %v, want %dx%d", k, r, sw, sh)
	}
	for y := 0; y < sh; y++ {
		for x := 0; x < sw; x++ {
			want := boxMean(fullAt, k*x, k*y, min(k*x+k, fb.Dx()), min(k*y+k, fb.Dy()))
			if k*x+k > fb.Dx() || k*y+k > fb.Dy() {
				edge.add(gotAt(x, y), want)
				continue
			}
			pd.add(gotAt(x, y), want)
		}
	}
}

// At 1/2, 1/4 and 1/8 the luma samples stay within scaledBounds of the box
// means of the full-resolution image, over the whole ImageMagick corpus.
func TestScaledAgainstBoxMeans(t *testing.T) {
	files := makeCorpus(t, corpus())
	for _, k := range []int{2, 4, 8} {
		var pd, edge planeDiff
		for _, data := range files {
			compareScaled(t, data, k, &pd, &edge)
		}
		t.Logf("1/%d edge: %d samples, max |diff| %.2f, mean |diff| %.3f", k, edge.n, edge.maxAbs, edge.sumAbs/float64(max(edge.n, 1)))
		mean := pd.sumAbs / float64(pd.n)
		t.Logf("1/%d: %d samples, max |diff| %.2f, mean |diff| %.3f", k, pd.n, pd.maxAbs, mean)
		b := scaledBounds[k]
		if edgeMean := edge.sumAbs / float64(max(edge.n, 1)); edge.maxAbs > b.edgeMax || edgeMean > b.edgeMean {
			t.Errorf("1/%d edge: max %.2f mean %.3f beyond the documented %.2f / %.3f", k, edge.maxAbs, edgeMean, b.edgeMax, b.edgeMean)
		}
		if pd.maxAbs > b.maxAbs || mean > b.meanAbs {
			t.Errorf("1/%d: max %.2f mean %.3f beyond the documented %.2f / %.3f", k, pd.maxAbs, mean, b.maxAbs, b.meanAbs)
		}
	}
}
