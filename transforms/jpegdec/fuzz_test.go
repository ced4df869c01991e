package jpegdec

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

var update = flag.Bool("update", false, "rewrite the FuzzDecode seed corpus in testdata/fuzz")

// fuzzMaxPixels keeps fuzz inputs small enough to decode in microseconds.
const fuzzMaxPixels = 1 << 16

// FuzzDecode is a differential fuzz target against image/jpeg: whatever the
// bytes, Decode does not panic at any scale (FancyScaled or not) and its
// image has the size it announces; where image/jpeg decodes a stream at 1/1, jpegdec gives the
// same samples or declines with ErrUnsupported (image/jpeg then decides),
// and where image/jpeg fails, jpegdec fails too. The seed corpus
// (testdata/fuzz/FuzzDecode, go test -run TestFuzzSeeds -update) holds
// small ImageMagick and image/jpeg files of every sampling layout, with
// restart intervals, gray, progressive and truncated.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Decoder
		d.MaxPixels = fuzzMaxPixels
		for _, fancy := range []bool{false, true} {
			d.FancyScaled = fancy
			for _, k := range []int{8, 4, 2} {
				if m, err := fuzzmem.Call(t, decodeAllocBound, func() (*Image, error) { return d.Decode(data, k) }); err == nil {
					r := decodedImage(m).Bounds()
					if r.Dx() != (m.Width+k-1)/k || r.Dy() != (m.Height+k-1)/k {
						t.Fatalf("1/%d: bounds %v for %dx%d", k, r, m.Width, m.Height)
					}
					if fancy && m.Color != ColorGray && m.YCbCr.SubsampleRatio != image.YCbCrSubsampleRatio444 {
						t.Fatalf("1/%d FancyScaled: ratio %v", k, m.YCbCr.SubsampleRatio)
					}
				}
			}
		}
		m, err := fuzzmem.Call(t, decodeAllocBound, func() (*Image, error) { return d.Decode(data, 1) })
		cfg, cfgErr := jpeg.DecodeConfig(bytes.NewReader(data))
		if cfgErr != nil || cfg.Width*cfg.Height > fuzzMaxPixels {
			return // image/jpeg would allocate too much to compare quickly
		}
		want, stdErr := jpeg.Decode(bytes.NewReader(data))
		switch {
		case errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge):
			return
		case stdErr != nil && err == nil:
			t.Fatalf("image/jpeg fails (%v), jpegdec decodes", stdErr)
		case stdErr != nil:
			return
		case err != nil:
			t.Fatalf("image/jpeg decodes, jpegdec fails: %v", err)
		}
		got := decodedImage(m)
		b := want.Bounds()
		if got.Bounds() != b {
			t.Fatalf("bounds %v, image/jpeg %v", got.Bounds(), b)
		}
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if g, w := samplesAt(got, x, y), samplesAt(want, x, y); g != w {
					t.Fatalf("pixel (%d,%d): %v, image/jpeg %v", x, y, g, w)
				}
			}
		}
	})
}

// TestFuzzSeeds writes the seed corpus with -update and otherwise checks
// it is there.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if !*update {
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 10 {
			t.Fatalf("seed corpus %s: %d files, %v (go test -run TestFuzzSeeds -update)", dir, len(entries), err)
		}
		return
	}
	seeds := map[string][]byte{}
	var cases []corpusCase
	for _, s := range []string{"1x1", "2x1", "2x2", "1x2", "4x1", "2x1,2x1,2x1", ""} {
		cases = append(cases, corpusCase{w: 19, h: 11, quality: 75, sampling: s}, corpusCase{w: 24, h: 17, quality: 90, sampling: s})
	}
	cases = append(cases, corpusCase{w: 40, h: 17, quality: 90, sampling: "2x2", restart: 1}, corpusCase{w: 24, h: 17, quality: 80, restart: 2})
	for name, data := range makeCorpus(t, cases) {
		seeds[strings.ReplaceAll(name, ",", "_")] = data
	}
	for _, name := range []string{"progressive.jpg", "cmyk.jpg"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "stdcanary", name))
		if err != nil {
			t.Fatal(err)
		}
		seeds[strings.TrimSuffix(name, ".jpg")] = data
	}
	var buf bytes.Buffer
	src := image.NewYCbCr(image.Rect(0, 0, 13, 9), image.YCbCrSubsampleRatio420)
	for i := range src.Y {
		src.Y[i] = byte(i * 37)
	}
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	seeds["go-13x9-q100"] = buf.Bytes()
	seeds["go-13x9-q100-truncated"] = buf.Bytes()[:len(buf.Bytes())*2/3]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
