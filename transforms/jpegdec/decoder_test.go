package jpegdec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// convertCmd is Debian's ImageMagick (/usr/local/bin/convert on the build
// machines is a stand-in that cannot write JPEG).
const convertCmd = "/usr/bin/convert"

// pythonCmd is Debian's python3, which has python3-opencv.
const pythonCmd = "/usr/bin/python3"

// testPattern is a w x h RGB image (binary PPM) with gradients, edges and
// deterministic noise: every DCT frequency gets energy.
func testPattern(w, h int, seed uint32) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "P6\n%d %d\n255\n", w, h)
	s := seed*2654435761 + 1
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			s ^= s << 13
			s ^= s >> 17
			s ^= s << 5
			n := int(s % 48)
			r := (x*255/max(w-1, 1) + n) % 256
			g := (y*255/max(h-1, 1) + 2*n) % 256
			b := 40 + n
			if (x/7+y/5)%3 == 0 {
				b = 220 - n
			}
			buf.Write([]byte{byte(r), byte(g), byte(b)})
		}
	}
	return buf.Bytes()
}

// corpusCase is one ImageMagick encoding of a test pattern.
type corpusCase struct {
	name     string
	w, h     int
	quality  int
	sampling string // -sampling-factor, "" for grayscale
	restart  int    // restart interval in MCUs, 0 for none
}

func (c corpusCase) String() string {
	s := c.sampling
	if s == "" {
		s = "gray"
	}
	return fmt.Sprintf("%dx%d-q%d-%s-ri%d", c.w, c.h, c.quality, s, c.restart)
}

// corpus lists the encodings TestMatchesImageJPEG compares: every sampling
// factor combination image/jpeg decodes, qualities 50..100, restart
// intervals, sizes that are not multiples of the MCU, 1x1.
func corpus() []corpusCase {
	var cs []corpusCase
	samplings := []string{"1x1", "2x1", "2x2", "1x2", "4x1", "4x2", "2x1,2x1,2x1", "2x2,1x2,1x2", "4x1,2x1,2x1", ""}
	sizes := [][2]int{{333, 251}, {17, 13}, {64, 48}}
	for i, s := range samplings {
		for j, sz := range sizes {
			q := []int{50, 75, 90, 100}[(i+j)%4]
			cs = append(cs, corpusCase{w: sz[0], h: sz[1], quality: q, sampling: s})
		}
	}
	// ImageMagick 6 writes no restart markers; OpenCV does (4:2:0 or gray).
	for i, s := range []string{"2x2", ""} {
		for _, ri := range []int{1, 2, 7} {
			cs = append(cs, corpusCase{w: 203 - 2*i, h: 99 + i, quality: 90 - 15*i, sampling: s, restart: ri})
		}
	}
	cs = append(cs, corpusCase{w: 1, h: 1, quality: 90, sampling: "2x2"}, corpusCase{w: 1, h: 1, quality: 75, sampling: ""},
		corpusCase{w: 2, h: 1, quality: 75, sampling: "4x1"})
	return cs
}

// makeCorpus encodes every corpus case with ImageMagick, or with OpenCV
// (Debian's python3-opencv) when it has a restart interval; it skips the
// test when either is missing.
func makeCorpus(t testing.TB, cases []corpusCase) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(convertCmd); err != nil {
		t.Skipf("ImageMagick not installed: %v", err)
	}
	if _, err := os.Stat(pythonCmd); err != nil {
		t.Skipf("python3 with OpenCV not installed: %v", err)
	}
	dir := t.TempDir()
	out := map[string][]byte{}
	for i, c := range cases {
		src := filepath.Join(dir, fmt.Sprintf("src%d.ppm", i))
		if err := os.WriteFile(src, testPattern(c.w, c.h, uint32(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, c.String()+".jpg")
		if c.restart > 0 {
			if c.sampling != "2x2" && c.sampling != "" {
				t.Fatalf("%v: OpenCV writes only 4:2:0 or gray", c)
			}
			flag := "cv2.IMREAD_COLOR"
			if c.sampling == "" {
				flag = "cv2.IMREAD_GRAYSCALE"
			}
			code := fmt.Sprintf("import cv2, sys; cv2.imwrite(sys.argv[2], cv2.imread(sys.argv[1], %s), "+
				"[cv2.IMWRITE_JPEG_QUALITY, %d, cv2.IMWRITE_JPEG_RST_INTERVAL, %d]) or sys.exit(1)", flag, c.quality, c.restart)
			if b, err := exec.Command(pythonCmd, "-c", code, src, dst).CombinedOutput(); err != nil {
				t.Fatalf("opencv %v: %v\n%s", c, err, b)
			}
			data, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte{0xFF, markerRST0}) {
				t.Fatalf("%v: no RST0 marker written", c)
			}
			out[c.String()] = data
			continue
		}
		args := []string{src, "-strip", "-quality", fmt.Sprint(c.quality)}
		if c.sampling == "" {
			args = append(args, "-colorspace", "Gray")
		} else {
			args = append(args, "-sampling-factor", c.sampling)
		}
		args = append(args, dst)
		if b, err := exec.Command(convertCmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("convert %v: %v\n%s", args, err, b)
		}
		data, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		out[c.String()] = data
	}
	return out
}

// samplesAt returns the Y, Cb, Cr (or gray) samples image/jpeg's callers
// see at pixel (x, y) of img.
func samplesAt(img image.Image, x, y int) [3]byte {
	switch m := img.(type) {
	case *image.Gray:
		return [3]byte{m.Pix[m.PixOffset(x, y)]}
	case *image.YCbCr:
		c := m.COffset(x, y)
		return [3]byte{m.Y[m.YOffset(x, y)], m.Cb[c], m.Cr[c]}
	case *image.RGBA:
		i := m.PixOffset(x, y)
		return [3]byte{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
	}
	panic(fmt.Sprintf("unexpected image type %T", img))
}

// decodedImage is the image.Image view of a decoded Image (RGB frames as
// their planes).
func decodedImage(m *Image) image.Image {
	if m.Color == ColorGray {
		return &m.Gray
	}
	return &m.YCbCr
}

// equalToStd reports the first pixel where d's decode of data differs from
// image/jpeg's.
func equalToStd(t *testing.T, d *Decoder, data []byte) {
	t.Helper()
	want, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("image/jpeg: %v", err)
	}
	got, err := d.Decode(data, 1)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	b := want.Bounds()
	if b != decodedImage(got).Bounds() {
		t.Fatalf("bounds %v, image/jpeg %v", decodedImage(got).Bounds(), b)
	}
	_, wantRGB := want.(*image.RGBA)
	if wantRGB != (got.Color == ColorRGB) {
		t.Fatalf("color %v, image/jpeg returned %T", got.Color, want)
	}
	if m, ok := want.(*image.YCbCr); ok && m.SubsampleRatio != got.YCbCr.SubsampleRatio {
		t.Fatalf("subsampling %v, image/jpeg %v", got.YCbCr.SubsampleRatio, m.SubsampleRatio)
	}
	gi := decodedImage(got)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if g, w := samplesAt(gi, x, y), samplesAt(want, x, y); g != w {
				t.Fatalf("pixel (%d,%d): %v, image/jpeg %v", x, y, g, w)
			}
		}
	}
}

// At 1/1 the decoder's samples equal image/jpeg's exactly, for every
// sampling factor combination, quality, restart interval and odd size of
// the ImageMagick corpus; one Decoder decodes them all (buffer reuse).
func TestMatchesImageJPEG(t *testing.T) {
	files := makeCorpus(t, corpus())
	var d Decoder
	for name, data := range files {
		t.Run(name, func(t *testing.T) { equalToStd(t, &d, data) })
	}
}

// adobeRGB rewrites a JFIF YCbCr stream into one image/jpeg reads as RGB:
// the APP0 JFIF segment replaced by an Adobe APP14 with transform 0.
func adobeRGB(t *testing.T, data []byte) []byte {
	t.Helper()
	if data[2] != 0xFF || data[3] != markerAPP0 {
		t.Fatal("no APP0 after SOI")
	}
	n := int(data[4])<<8 | int(data[5])
	app14 := []byte{0xFF, markerAPP14, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0}
	out := append([]byte{0xFF, markerSOI}, app14...)
	return append(out, data[4+n:]...)
}

// Adobe APP14 transform 0 makes the planes R, G, B, as in image/jpeg.
func TestAdobeRGB(t *testing.T) {
	var buf bytes.Buffer
	src := image.NewYCbCr(image.Rect(0, 0, 37, 21), image.YCbCrSubsampleRatio420)
	for i := range src.Y {
		src.Y[i] = byte(i * 7)
	}
	for i := range src.Cb {
		src.Cb[i], src.Cr[i] = byte(i*3), byte(255-i)
	}
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if data[3] != markerAPP0 { // image/jpeg writes no JFIF; add one to replace
		data = append([]byte{0xFF, markerSOI, 0xFF, markerAPP0, 0, 7, 'J', 'F', 'I', 'F', 0}, data[2:]...)
	}
	var d Decoder
	equalToStd(t, &d, adobeRGB(t, data))
	if m, _ := d.Decode(adobeRGB(t, data), 1); m.Color != ColorRGB {
		t.Fatalf("color %v, want ColorRGB", m.Color)
	}
}

// Streams left to image/jpeg wrap ErrUnsupported, before any pixel work.
func TestUnsupported(t *testing.T) {
	if _, err := os.Stat(convertCmd); err != nil {
		t.Skipf("ImageMagick not installed: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.ppm")
	if err := os.WriteFile(src, testPattern(40, 30, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"progressive", []string{"-interlace", "JPEG"}},
		{"cmyk", []string{"-colorspace", "CMYK"}},
		{"arithmetic", nil}, // baseline with the SOF marker made SOF9
		{"12-bit", nil},     // baseline with the SOF precision made 12
	} {
		dst := filepath.Join(dir, tc.name+".jpg")
		if b, err := exec.Command(convertCmd, append(append([]string{src}, tc.args...), dst)...).CombinedOutput(); err != nil {
			t.Fatalf("convert: %v\n%s", err, b)
		}
		data, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if tc.args == nil {
			sof := bytes.Index(data, []byte{0xFF, markerSOF0})
			if sof < 0 {
				t.Fatal("no SOF0")
			}
			if tc.name == "arithmetic" {
				data[sof+1] = 0xC9
			} else {
				data[sof+4] = 12
			}
		}
		var d Decoder
		if _, err := d.Decode(data, 1); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: error %v, want ErrUnsupported", tc.name, err)
		}
	}
}
