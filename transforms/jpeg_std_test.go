//go:build !turbojpeg

package transforms

import (
	"bytes"
	"testing"
)

// goldenSums pins the outputs of the pure-Go build.
const goldenSums = "testdata/golden/outputs.sha256"

// jpegFormatTolerance: image/jpeg is both the decoder and the reference in
// TestApplyFormats, so its pixels must match exactly.
const jpegFormatTolerance = 0

// Apply on a JPEG (image/jpeg's 4:2:0 YCbCr, converted row by row inside
// the resampler) gives exactly ApplyRGB on the same image decoded and
// converted on its own.
func TestApplyJPEGMatchesApplyRGB(t *testing.T) {
	data := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(333, 211, 101, 20), 333, 211), 90)
	img, err := jpegDecodeForReference(data)
	if err != nil {
		t.Fatal(err)
	}
	rgb := straightPixels(img)
	for _, spec := range []Spec{
		{Width: 96, Height: 96, Mode: Letterbox, Pad: 114, DType: F16}, // both axes scaled
		{Width: 333, Height: 100, Mode: Stretch, DType: F32},           // vertical only
		{Width: 101, Height: 211, Mode: Stretch, DType: F32},           // horizontal only
		{Width: 333, Height: 211, Mode: None, DType: F16},              // neither
	} {
		want := make([]byte, spec.OutputBytes())
		if _, err := mustTransformer(t, spec).ApplyRGB(rgb, 333, 211, 3*333, want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, spec.OutputBytes())
		if _, err := mustTransformer(t, spec).Apply(data, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: Apply differs from ApplyRGB of the decoded image", spec)
		}
	}
}
