//go:build !turbojpeg

package transforms

import (
	"bytes"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/transforms/jpegdec"
)

// goldenSums pins the outputs of the pure-Go build.
const goldenSums = "testdata/golden/outputs.sha256"

// jpegFormatTolerance: TestApplyFormats decodes at full size (mode None),
// where jpegdec's samples equal image/jpeg's, the reference.
const jpegFormatTolerance = 0

// Tolerances of TestJPEGMatchesImageJPEG, in 8-bit levels (1/255 of the
// output range), per channel over the letterboxed image: at 1/1 the
// outputs are equal; a scaled decode averages in the DCT domain (reduced
// IDCTs, 4:2:0 chroma at twice the luma's scale) before the antialiased
// resample, where the reference resamples image/jpeg's full-size image
// (replicated chroma) with the triangle filter. The inputs carry
// pixel-scale noise in every channel, the worst case. Observed on
// jpegScaleInputs: mean <= 1.17 (1280x720 to 640, where the DCT's box
// average does the whole 2x step), 99th percentile <= 6, max 43; the
// turbojpeg build's tolerances are 1.5, 8 and 80.
const (
	jpegMeanTolerance = 1.5
	jpegP99Tolerance  = 8
	jpegMaxTolerance  = 100
)

// Apply on a JPEG gives exactly the resampler's output for jpegdec's
// planes at the scale Apply picks, converted on their own with
// color.YCbCrToRGB: 4:2:0 planes converted row by row inside the resampler
// (pixels.ycc) are the same pixels. At 1/1 that is image/jpeg's image.
func TestApplyJPEGMatchesApplyRGB(t *testing.T) {
	data := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(333, 211, 101, 20), 333, 211), 90)
	for _, tc := range []struct {
		spec Spec
		k    int
	}{
		{Spec{Width: 96, Height: 96, Mode: Letterbox, Pad: 114, DType: dtype.F16}, 2}, // both axes scaled
		{Spec{Width: 40, Height: 40, Mode: Letterbox, Pad: 114, DType: dtype.F16}, 8},
		{Spec{Width: 333, Height: 100, Mode: Stretch, DType: dtype.F32}, 1}, // vertical only
		{Spec{Width: 101, Height: 211, Mode: Stretch, DType: dtype.F32}, 1}, // horizontal only
		{Spec{Width: 333, Height: 211, Mode: None, DType: dtype.F16}, 1},    // neither
	} {
		d := jpegdec.Decoder{FancyScaled: true}
		m, err := d.Decode(data, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if tc.k == 1 {
			std, err := jpegDecodeForReference(data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(straightPixels(std), straightPixels(&m.YCbCr)) {
				t.Fatal("jpegdec at 1/1 differs from image/jpeg")
			}
		}
		g, err := PlanGeometry(tc.spec, 333, 211)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, tc.spec.OutputBytes())
		r := m.YCbCr.Rect
		mustTransformer(t, tc.spec).resizeNormalize(packedRGB(straightPixels(&m.YCbCr), r.Dx(), r.Dy()), g, want)
		got := make([]byte, tc.spec.OutputBytes())
		if _, err := mustTransformer(t, tc.spec).Apply(data, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: Apply differs from the resampled jpegdec planes at 1/%d", tc.spec, tc.k)
		}
	}
}
