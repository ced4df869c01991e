package transforms

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/dtype"
)

var update = flag.Bool("update", false, "rewrite testdata/golden and testdata/fuzz seed files")

// goldenJPEG is the committed JPEG input; goldenSums, the file of pinned
// sums, depends on the build (jpeg_std_test.go, jpeg_turbo_test.go).
const goldenJPEG = "testdata/golden/orient6-160x120.jpg"

// goldenCase is one input whose output bytes are pinned by sha256.
type goldenCase struct {
	name string
	spec Spec
	run  func(tr *Transformer, out []byte) error
}

func goldenCases(t *testing.T) []goldenCase {
	imagenet := func(s Spec) Spec {
		s.Mean = [3]float64{0.485, 0.456, 0.406}
		s.Std = [3]float64{0.229, 0.224, 0.225}
		return s
	}
	raw := gradientNoiseRGB(333, 217, 11, 25)
	small := gradientNoiseRGB(64, 48, 12, 25)
	// PNG is lossless: the decoded pixels do not depend on the encoder's
	// version, so this input may be generated on the fly.
	rgba := encodePNG(t, withAlpha(gradientNoiseRGB(200, 150, 13, 25), 200, 150))
	rgbPNG := encodePNG(t, rgbToRGBA(gradientNoiseRGB(200, 150, 15, 25), 200, 150))
	return []goldenCase{
		{"rgb-333x217-letterbox-96x64-f16-pad114", Spec{Width: 96, Height: 64, Mode: Letterbox, Pad: 114, DType: dtype.F16},
			func(tr *Transformer, out []byte) error { _, err := tr.ApplyRGB(raw, 333, 217, 3*333, out); return err }},
		{"rgb-64x48-stretch-200x150-f32", Spec{Width: 200, Height: 150, Mode: Stretch, DType: dtype.F32},
			func(tr *Transformer, out []byte) error { _, err := tr.ApplyRGB(small, 64, 48, 3*64, out); return err }},
		{"png-rgba-200x150-letterbox-64x64-f32-imagenet", imagenet(Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F32}),
			func(tr *Transformer, out []byte) error { _, err := tr.Apply(rgba, out); return err }},
		{"png-rgb-200x150-stretch-80x48-f16", Spec{Width: 80, Height: 48, Mode: Stretch, DType: dtype.F16},
			func(tr *Transformer, out []byte) error { _, err := tr.Apply(rgbPNG, out); return err }},
		// JPEG output depends on the encoder, so the input file is
		// committed (written once with -update). Into 64x64 the
		// turbojpeg build decodes at 1/2 scale, into 128x128 unscaled.
		{"jpeg-orient6-160x120-letterbox-64x64-f16", Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F16}, applyGoldenJPEG},
		{"jpeg-orient6-160x120-letterbox-128x128-f16", Spec{Width: 128, Height: 128, Mode: Letterbox, DType: dtype.F16}, applyGoldenJPEG},
	}
}

func applyGoldenJPEG(tr *Transformer, out []byte) error {
	data, err := os.ReadFile(goldenJPEG)
	if err != nil {
		return fmt.Errorf("%w (run go test -run TestGolden -update to create it)", err)
	}
	_, err = tr.Apply(data, out)
	return err
}

// writeGoldenJPEG writes the JPEG input of the golden test: 160x120 gradient
// and noise, stored with EXIF orientation 6.
func writeGoldenJPEG(t *testing.T) {
	rgb := gradientNoiseRGB(160, 120, 14, 25)
	data := spliceAfterSOI(encodeJPEG(t, rgbToRGBA(rgb, 160, 120), 85), orientationAPP1(binary.BigEndian, 6))
	if err := os.WriteFile(goldenJPEG, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGolden pins the output bytes of a few inputs: any change to decoding,
// resampling or normalization shows up here. When it fails on purpose, bump
// pixelCodeVersion (DecoderIdentity) and rerun with -update.
func TestGolden(t *testing.T) {
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenSums), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(goldenJPEG); err != nil {
			writeGoldenJPEG(t)
		}
	}
	var lines []string
	for _, c := range goldenCases(t) {
		out := make([]byte, c.spec.OutputBytes())
		if err := c.run(mustTransformer(t, c.spec), out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		sum := sha256.Sum256(out)
		lines = append(lines, c.name+" "+hex.EncodeToString(sum[:]))
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile(goldenSums, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenSums)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output checksums changed; if intended, bump pixelCodeVersion and run with -update\ngot:\n%swant:\n%s", got, want)
	}
}

// The golden JPEG is what the test says it is: orientation 6 of a 160x120
// stored image, so 120x160 displayed.
func TestGoldenJPEGInput(t *testing.T) {
	data, err := os.ReadFile(goldenJPEG)
	if err != nil {
		t.Skipf("%v (created by TestGolden -update)", err)
	}
	w, h, format, err := DecodeConfig(data)
	if err != nil || w != 120 || h != 160 || format != "jpeg" {
		t.Fatalf("DecodeConfig = %dx%d %s, %v; want 120x160 jpeg", w, h, format, err)
	}
	if o := jpegOrientation(data); o != 6 {
		t.Fatalf("orientation %d, want 6", o)
	}
}
