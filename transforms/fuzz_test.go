package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/internal/fuzzmem"
)

const (
	fuzzSeedDir = "testdata/fuzz/FuzzApply"
	// fuzzMaxPixels keeps each fuzz input's decode small: a mutated header
	// may announce anything up to this.
	fuzzMaxPixels = 1 << 20
)

// fuzzSeeds are small valid files of every format (plus a JPEG with an
// Exif orientation) for the committed seed corpus.
func fuzzSeeds(t testing.TB) map[string][]byte {
	const w, h = 12, 9
	rgb := gradientNoiseRGB(w, h, 21, 30)
	return map[string][]byte{
		"png-rgba":      encodePNG(t, withAlpha(rgb, w, h)),
		"png-paletted":  encodePNG(t, palettedImage(w, h, 22)),
		"jpeg":          encodeJPEG(t, rgbToRGBA(rgb, w, h), 75),
		"jpeg-exif6":    spliceAfterSOI(encodeJPEG(t, rgbToRGBA(rgb, w, h), 75), orientationAPP1(binary.LittleEndian, 6)),
		"gif":           encodeGIF(t, palettedImage(w, h, 23)),
		"bmp":           encodeBMP(t, rgbToRGBA(rgb, w, h)),
		"tiff":          encodeTIFF(t, withAlpha(rgb, w, h)),
		"webp-lossless": encodeWebPLossless(t, twoLevelNRGBA(w, h, 24)),
	}
}

// encodeCorpusFile writes one []byte value in the "go test fuzz v1" format.
func encodeCorpusFile(data []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// decodeCorpusFile reads back a file written by encodeCorpusFile.
func decodeCorpusFile(file []byte) ([]byte, error) {
	s, ok := strings.CutPrefix(string(file), "go test fuzz v1\n[]byte(")
	if !ok {
		return nil, errors.New("not a go test fuzz v1 []byte file")
	}
	s, ok = strings.CutSuffix(s, ")\n")
	if !ok {
		return nil, errors.New("missing closing parenthesis")
	}
	v, err := strconv.Unquote(s)
	return []byte(v), err
}

// TestFuzzSeedCorpus keeps the committed seed corpus useful: every file is a
// valid image that Apply accepts, and every format is present. With
// -update it rewrites the corpus.
func TestFuzzSeedCorpus(t *testing.T) {
	if *update {
		if err := os.MkdirAll(fuzzSeedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range fuzzSeeds(t) {
			if err := os.WriteFile(filepath.Join(fuzzSeedDir, name), encodeCorpusFile(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(fuzzSeedDir)
	if err != nil {
		t.Fatalf("%v (run go test -run TestFuzzSeedCorpus -update to create it)", err)
	}
	spec := Spec{Width: 24, Height: 16, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	var formats []string
	for _, e := range entries {
		file, err := os.ReadFile(filepath.Join(fuzzSeedDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, err := decodeCorpusFile(file)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if _, err := tr.Apply(data, make([]byte, spec.OutputBytes())); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
		_, _, format, _ := DecodeConfig(data)
		formats = append(formats, format)
	}
	for _, want := range []string{"png", "jpeg", "gif", "bmp", "tiff", "webp"} {
		if !slices.Contains(formats, want) {
			t.Errorf("seed corpus has no %s file", want)
		}
	}
}

// FuzzApply feeds arbitrary bytes to Apply. It must never panic; a failure
// must wrap ErrDecode; a success must agree with DecodeConfig, stay inside
// the target, and give the same bytes on a fresh Transformer (no state
// leaks from one image to the next).
//
// Seeds: the committed corpus in testdata/fuzz/FuzzApply plus the huge
// headers.
func FuzzApply(f *testing.F) {
	for _, data := range hugeHeaders() {
		f.Add(data)
	}
	f.Add(claimedSizeBMP())
	spec := Spec{Width: 24, Height: 16, Mode: Letterbox, Pad: 7, DType: dtype.F16}
	shared := mustTransformer(f, spec)
	shared.maxPixels = fuzzMaxPixels
	f.Fuzz(func(t *testing.T, data []byte) {
		out := make([]byte, spec.OutputBytes())
		g, err := fuzzmem.Call(t, applyAllocBound, func() (Geometry, error) { return shared.Apply(data, out) })
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		w, h, _, err := DecodeConfig(data)
		if err != nil || w != g.SrcW || h != g.SrcH {
			t.Fatalf("DecodeConfig = %dx%d, %v; Apply saw %dx%d", w, h, err, g.SrcW, g.SrcH)
		}
		if g.NewW < 1 || g.NewH < 1 || g.PadX < 0 || g.PadY < 0 || g.PadX+g.NewW > spec.Width || g.PadY+g.NewH > spec.Height {
			t.Fatalf("geometry outside the target: %+v", g)
		}
		fresh := mustTransformer(t, spec)
		fresh.maxPixels = fuzzMaxPixels
		again := make([]byte, spec.OutputBytes())
		if _, err := fresh.Apply(data, again); err != nil {
			t.Fatalf("fresh Transformer: %v", err)
		}
		if !bytes.Equal(out, again) {
			t.Fatal("output differs between a used and a fresh Transformer")
		}
	})
}

// FuzzDecodeConfig checks the header path alone, including the EXIF parser:
// no panic, errors wrap ErrDecode, sizes within the limits.
func FuzzDecodeConfig(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	for _, data := range hugeHeaders() {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w, h int
		var format string
		var err error
		fuzzmem.Check(t, decodeConfigAllocBound, func() { w, h, format, err = DecodeConfig(data) })
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		if format == "" || w < 1 || h < 1 || w > MaxSourceSide || h > MaxSourceSide || w*h > MaxSourcePixels {
			t.Fatal(fmt.Sprintf("DecodeConfig = %dx%d %q", w, h, format))
		}
		if o := jpegOrientation(data); o < 1 || o > 8 {
			t.Fatalf("orientation %d", o)
		}
		// The allocation-free header readers agree with the standard
		// ones: pngQuickSize exactly; jpegQuickSize (turbojpeg build)
		// whenever jpeg.DecodeConfig reads the file too.
		if f := sniffFormat(data); f.quickSize == nil {
			return
		} else if qw, qh, ok := f.quickSize(data); ok {
			cfg, err := callDecoder(f.decodeConfig, data)
			if (err != nil && f.name == "png") || (err == nil && (cfg.Width != qw || cfg.Height != qh)) {
				t.Fatalf("quick size %dx%d, %s DecodeConfig %dx%d, %v", qw, qh, f.name, cfg.Width, cfg.Height, err)
			}
		}
	})
}

// TestPNGClaimedSize: a PNG whose IHDR declares far more pixels than its
// image data can inflate to is refused before either PNG decoder allocates
// the image. FuzzPNG found it (testdata/fuzz/FuzzPNG/regress-claimed-size):
// 368 bytes declaring 12336x3376 RGB made the fast decoder allocate 119 MiB,
// and Apply, whose pixel limit allows 64 megapixels, would have allocated
// the image in the fast decoder and again in image/png.
func TestPNGClaimedSize(t *testing.T) {
	vals := fuzzmem.ReadCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzPNG", "regress-claimed-size"))
	data := fixCRCs(vals[0])
	var d pngDecoder
	if n := fuzzmem.Measure(func() { _, err := d.decode(data); _ = err }); n > fuzzmem.MiB {
		t.Errorf("pngDecoder.decode allocated %d bytes", n)
	}
	tr := mustTransformer(t, Spec{Width: 24, Height: 16, Mode: Letterbox, DType: dtype.F16})
	out := make([]byte, tr.spec.OutputBytes())
	var err error
	if n := fuzzmem.Measure(func() { _, err = tr.Apply(data, out) }); n > fuzzmem.MiB {
		t.Errorf("Apply allocated %d bytes", n)
	}
	if !errors.Is(err, ErrDecode) {
		t.Errorf("Apply: %v, want ErrDecode", err)
	}
	// A valid PNG still decodes on both paths.
	valid := encodePNG(t, withAlpha(gradientNoiseRGB(12, 9, 21, 30), 12, 9))
	if !pngDataCanHold(valid) {
		t.Error("pngDataCanHold refuses a valid PNG")
	}
	if _, err := tr.Apply(valid, out); err != nil {
		t.Errorf("valid PNG: %v", err)
	}
}

// TestBMPClaimedSize: a BMP header declaring more rows than the file holds
// is refused before golang.org/x/image/bmp allocates the image (a 54-byte
// file declaring 8000x8000 at 24 bits made Apply allocate 244 MiB). Found
// by measuring Apply at the default pixel limit, which FuzzApply lowers to
// fuzzMaxPixels; it is also a FuzzApply seed.
func TestBMPClaimedSize(t *testing.T) {
	data := claimedSizeBMP()
	tr := mustTransformer(t, Spec{Width: 24, Height: 16, Mode: Letterbox, DType: dtype.F16})
	out := make([]byte, tr.spec.OutputBytes())
	var err error
	if n := fuzzmem.Measure(func() { _, err = tr.Apply(data, out) }); n > fuzzmem.MiB {
		t.Errorf("Apply allocated %d bytes", n)
	}
	if !errors.Is(err, ErrDecode) {
		t.Errorf("Apply: %v, want ErrDecode", err)
	}
	valid := encodeBMP(t, rgbToRGBA(gradientNoiseRGB(12, 9, 21, 30), 12, 9))
	if !bmpDataCanHold(valid) {
		t.Error("bmpDataCanHold refuses a valid BMP")
	}
	if _, err := tr.Apply(valid, out); err != nil {
		t.Errorf("valid BMP: %v", err)
	}
}

// claimedSizeBMP is a BITMAPINFOHEADER for 8000x8000 at 24 bits and no rows.
func claimedSizeBMP() []byte {
	b := []byte("BM")
	for _, v := range []uint32{0, 0, 54, 40, 8000, 8000} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 24)
	return append(b, make([]byte, 24)...)
}

// A JPEG header declaring 8000x8000 with a few bytes of scan data is
// refused before any decoder sizes a buffer from it (jpegDataCanHold): it
// made Apply allocate 183 MiB through image/jpeg. Valid files pass.
func TestJPEGClaimedSize(t *testing.T) {
	valid := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(40, 30, 21, 30), 40, 30), 90)
	data := claimedSizeJPEG(t, valid)
	tr := mustTransformer(t, Spec{Width: 24, Height: 16, Mode: Letterbox, DType: dtype.F16})
	out := make([]byte, tr.spec.OutputBytes())
	var err error
	if n := fuzzmem.Measure(func() { _, err = tr.Apply(data, out) }); n > fuzzmem.MiB {
		t.Errorf("Apply allocated %d bytes", n)
	}
	if !errors.Is(err, ErrDecode) || !errors.Is(err, errJPEGShortScan) {
		t.Errorf("Apply: %v, want ErrDecode and errJPEGShortScan", err)
	}
	if !jpegDataCanHold(valid) {
		t.Error("jpegDataCanHold refuses a valid JPEG")
	}
	if _, err := tr.Apply(valid, out); err != nil {
		t.Errorf("valid JPEG: %v", err)
	}
	// Every JPEG in the repository (baseline, progressive, CMYK, EXIF
	// orientation, the COCO and YOLO datasets): all held.
	var files []string
	for _, pat := range []string{"testdata/*/*.jpg", "../testdata/*/*/*.jpg", "../testdata/*/*/*/*.jpg", "../testdata/*/*/*/*/*.jpg"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found %d JPEG files", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !jpegDataCanHold(b) {
			t.Errorf("jpegDataCanHold refuses %s", f)
		}
	}
}

// claimedSizeJPEG is a valid JPEG's segments with its frame size set to
// 8000x8000 and its scan data cut to 16 bytes.
func claimedSizeJPEG(t *testing.T, valid []byte) []byte {
	t.Helper()
	b := append([]byte(nil), valid...)
	for i := 2; i+9 < len(b); {
		if b[i] != 0xFF {
			t.Fatal("claimedSizeJPEG: lost the segment chain")
		}
		m := b[i+1]
		n := int(b[i+2])<<8 | int(b[i+3])
		if m == 0xC0 || m == 0xC1 {
			b[i+5], b[i+6], b[i+7], b[i+8] = 8000>>8, 8000&255, 8000>>8, 8000&255
		}
		if m == 0xDA {
			return b[:i+2+n+16]
		}
		i += 2 + n
	}
	t.Fatal("claimedSizeJPEG: no SOS")
	return nil
}

// A GIF whose first frame declares 8000x8000 with no image data is
// refused before image/gif allocates the frame (gifDataCanHold); it made
// Apply allocate 61 MiB. Valid files pass.
func TestGIFClaimedSize(t *testing.T) {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, 8000)
	b = binary.LittleEndian.AppendUint16(b, 8000)
	b = append(b, 0, 0, 0, 0x2C, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint16(b, 8000)
	b = binary.LittleEndian.AppendUint16(b, 8000)
	b = append(b, 0, 2, 1, 0, 0, 0x3B)
	tr := mustTransformer(t, Spec{Width: 24, Height: 16, Mode: Letterbox, DType: dtype.F16})
	out := make([]byte, tr.spec.OutputBytes())
	var err error
	if n := fuzzmem.Measure(func() { _, err = tr.Apply(b, out) }); n > fuzzmem.MiB {
		t.Errorf("Apply allocated %d bytes", n)
	}
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "too short for the frame size") {
		t.Errorf("Apply: %v, want the short-file refusal", err)
	}
	valid, err := os.ReadFile("testdata/stdcanary/paletted.gif")
	if err != nil {
		t.Fatal(err)
	}
	if !gifDataCanHold(valid) {
		t.Error("gifDataCanHold refuses a valid GIF")
	}
	if _, err := tr.Apply(valid, out); err != nil {
		t.Errorf("valid GIF: %v", err)
	}
}
