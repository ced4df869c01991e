package transforms

// JPEG tests both builds run: the DCT scale rule and the scaled decode
// against image/jpeg at full size. The tolerances differ per build
// (jpeg_std_test.go, jpeg_turbo_test.go).

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"testing"

	"warehouse-etl/dtype"
)

// applyStd runs the pure-Go decode (image/jpeg) and the same resample and
// normalization: the reference output for one image.
func applyStd(t *testing.T, spec Spec, data []byte) ([]byte, Geometry) {
	t.Helper()
	tr := mustTransformer(t, spec)
	hdr, err := readHeader(data, MaxSourcePixels)
	if err != nil {
		t.Fatal(err)
	}
	w, h := hdr.displayedSize()
	g, err := planGeometry(spec, w, h)
	if err != nil {
		t.Fatal(err)
	}
	pix, err := tr.decodeStd(data, hdr, g)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, spec.OutputBytes())
	tr.resizeNormalize(pix, g, out)
	return out, g
}

// jpegScaleInputs are JPEGs that exercise every DCT scale and the unscaled
// path, color and gray, with and without EXIF orientation.
func jpegScaleInputs(t testing.TB) []struct {
	name string
	data []byte
	spec Spec
	k    int // expected DCT scale denominator
} {
	color420 := func(w, h int, seed uint64) []byte {
		return encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(w, h, seed, 12), w, h), 90)
	}
	gray := image.NewGray(image.Rect(0, 0, 320, 240))
	for i, v := range gradientNoiseRGB(320, 240, 31, 12) {
		if i%3 == 1 {
			gray.Pix[i/3] = v
		}
	}
	letterbox := func(w, h int) Spec { return Spec{Width: w, Height: h, Mode: Letterbox, DType: dtype.F32} }
	return []struct {
		name string
		data []byte
		spec Spec
		k    int
	}{
		{"1920x1080-to-640-half", color420(1920, 1080, 41), letterbox(640, 640), 2},
		{"1920x1080-to-384-quarter", color420(1920, 1080, 42), letterbox(384, 384), 4},
		{"1920x1080-to-160-eighth", color420(1920, 1080, 43), letterbox(160, 160), 8},
		{"1280x720-to-640-half-exact", color420(1280, 720, 44), letterbox(640, 640), 2},
		{"640x480-to-640-unscaled", color420(640, 480, 45), letterbox(640, 640), 1},
		{"1000x700-to-600-unscaled", color420(1000, 700, 46), letterbox(600, 600), 1},
		{"gray-320x240-to-96-half", encodeJPEG(t, gray, 90), letterbox(96, 96), 2},
		{"orient6-1280x720-to-320-quarter",
			spliceAfterSOI(color420(1280, 720, 47), orientationAPP1(binary.BigEndian, 6)), letterbox(320, 320), 4},
		{"stretch-800x600-to-300x200-half", color420(800, 600, 48), Spec{Width: 300, Height: 200, Mode: Stretch, DType: dtype.F32}, 2},
	}
}

func TestDCTScaleDenom(t *testing.T) {
	tests := []struct {
		w, h, nw, nh, want int
	}{
		{1920, 1080, 640, 360, 2}, // 1/4 would be 480x270 < 640x360
		{1280, 720, 640, 360, 2},  // exactly 2x: the DCT does the whole downscale
		{1279, 720, 640, 360, 1},  // width just short of 2x
		{1280, 719, 640, 360, 1},  // height just short of 2x
		{1920, 1080, 480, 270, 4}, // exactly 4x
		{1920, 1080, 240, 135, 8}, // exactly 8x
		{4000, 3000, 100, 75, 8},  // 8 is the largest scale
		{640, 480, 640, 480, 1},   // mode None
		{100, 1000, 10, 600, 1},   // one axis enlarges
	}
	for _, tt := range tests {
		if got := dctScaleDenom(tt.w, tt.h, tt.nw, tt.nh); got != tt.want {
			t.Errorf("dctScaleDenom(%d, %d, %d, %d) = %d, want %d", tt.w, tt.h, tt.nw, tt.nh, got, tt.want)
		}
	}
}

// The decoder scales by the expected factor: the pixels it hands to the
// resampler are ceil(stored/k) in displayed orientation.
func TestJPEGChoosesScale(t *testing.T) {
	for _, in := range jpegScaleInputs(t) {
		t.Run(in.name, func(t *testing.T) {
			tr := mustTransformer(t, in.spec)
			hdr, err := readHeader(in.data, MaxSourcePixels)
			if err != nil {
				t.Fatal(err)
			}
			w, h := hdr.displayedSize()
			g, err := planGeometry(in.spec, w, h)
			if err != nil {
				t.Fatal(err)
			}
			pix, err := tr.decodeJPEG(in.data, hdr, g)
			if err != nil {
				t.Fatal(err)
			}
			wantW, wantH := (w+in.k-1)/in.k, (h+in.k-1)/in.k
			if pix.w != wantW || pix.h != wantH || pix.w < g.NewW || pix.h < g.NewH {
				t.Fatalf("decoded %dx%d for %dx%d -> %dx%d, want %dx%d (scale 1/%d)", pix.w, pix.h, w, h, g.NewW, g.NewH, wantW, wantH, in.k)
			}
		})
	}
}

// The build's JPEG decoder (jpegdec, or libjpeg-turbo), scaling in the DCT
// domain, stays within the documented tolerance of image/jpeg decoding at
// full size followed by the same resampler, for every scale, orientation
// and color model.
func TestJPEGMatchesImageJPEG(t *testing.T) {
	for _, in := range jpegScaleInputs(t) {
		t.Run(in.name, func(t *testing.T) {
			out := make([]byte, in.spec.OutputBytes())
			g, err := mustTransformer(t, in.spec).Apply(in.data, out)
			if err != nil {
				t.Fatal(err)
			}
			ref, gRef := applyStd(t, in.spec, in.data)
			if g != gRef {
				t.Fatalf("geometry %+v, pure Go %+v", g, gRef)
			}
			got, want := outputRGB(t, out, in.spec, g), outputRGB(t, ref, in.spec, g)
			var hist [256]int
			sum := 0
			for i := range got {
				d := int(got[i]) - int(want[i])
				d = max(d, -d)
				hist[d]++
				sum += d
			}
			mean := float64(sum) / float64(len(got))
			p99, maxDiff, seen := -1, 0, 0
			for d, n := range hist {
				seen += n
				if p99 < 0 && 100*seen >= 99*len(got) {
					p99 = d
				}
				if n > 0 {
					maxDiff = d
				}
			}
			t.Logf("vs image/jpeg at full size: |diff| mean %.3f, 99th percentile %d, max %d", mean, p99, maxDiff)
			if mean > jpegMeanTolerance || p99 > jpegP99Tolerance || maxDiff > jpegMaxTolerance {
				t.Fatalf("|diff| mean %.3f, 99th percentile %d, max %d: tolerances %.1f, %d, %d",
					mean, p99, maxDiff, jpegMeanTolerance, jpegP99Tolerance, jpegMaxTolerance)
			}
		})
	}
}

// EXIF orientation on the scaled path: quadrants of distinct colors land
// where the orientation puts them (a 1/4 scaled decode of 256x128).
func TestJPEGOrientationScaled(t *testing.T) {
	A, B, C, D := [3]int{230, 30, 30}, [3]int{30, 230, 30}, [3]int{30, 30, 230}, [3]int{230, 230, 230}
	stored := image.NewRGBA(image.Rect(0, 0, 256, 128))
	for y := range 128 {
		for x := range 256 {
			q := [2][2][3]int{{A, B}, {C, D}}[y/64][x/128]
			stored.Set(x, y, color.RGBA{uint8(q[0]), uint8(q[1]), uint8(q[2]), 255})
		}
	}
	jpg := encodeJPEG(t, stored, 100)
	layouts := map[int][4][3]int{1: {A, B, C, D}, 3: {D, C, B, A}, 6: {C, A, D, B}, 8: {B, D, A, C}}
	for o, layout := range layouts {
		t.Run(fmt.Sprint(o), func(t *testing.T) {
			data := spliceAfterSOI(jpg, orientationAPP1(binary.LittleEndian, o))
			w, h := 64, 32 // 256x128 / 4
			if o >= 5 {
				w, h = h, w
			}
			spec := Spec{Width: w, Height: h, Mode: Stretch, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).Apply(data, out)
			if err != nil {
				t.Fatal(err)
			}
			rgb := outputRGB(t, out, spec, g)
			centres := [4][2]int{{w / 4, h / 4}, {3 * w / 4, h / 4}, {w / 4, 3 * h / 4}, {3 * w / 4, 3 * h / 4}}
			for q, c := range centres {
				i := 3 * (c[1]*w + c[0])
				for ch := range 3 {
					if d := int(rgb[i+ch]) - layout[q][ch]; d < -24 || d > 24 {
						t.Fatalf("quadrant %d at %v: got %v, want about %v", q, c, rgb[i:i+3], layout[q])
					}
				}
			}
		})
	}
}
