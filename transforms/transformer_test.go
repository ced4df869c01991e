package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"slices"
	"sync"
	"testing"

	"warehouse-etl/dtype"
)

// Tiny images through ApplyRGB with the whole output written out by hand:
// CHW order, little-endian, padding position and pad value. Pixel values are
// multiples of 51 so every element has a known bit pattern (see
// TestNormalizerKnownValues): 0 0x0000, 51 0x3266, 102 0x3666, 153 0x38CD,
// 204 0x3A66, 255 0x3C00 in f16.
func TestApplyRGBLayoutAndPadding(t *testing.T) {
	const (
		h0   = 0x0000
		h51  = 0x3266
		h102 = 0x3666
		h153 = 0x38CD
		h204 = 0x3A66
		h255 = 0x3C00
		hm1  = 0xBC00 // -1
		s0   = 0x00000000
		s51  = 0x3E4CCCCD
		s102 = 0x3ECCCCCD
		s153 = 0x3F19999A
		s204 = 0x3F4CCCCD
		s255 = 0x3F800000
	)
	p0 := []byte{0, 51, 102}
	p1 := []byte{153, 204, 255}
	pix := slices.Concat(p0, p1)
	tests := []struct {
		name         string
		spec         Spec
		src          []byte
		w, h, stride int
		want         []uint32 // elements in CHW order (f16 values in the low 16 bits)
	}{
		// 2x1 into 2x4: width limits, new 2x1, pad (4-1)/2 = 1 row on top, 2 below. Pad 255.
		{"letterbox rows f16", Spec{Width: 2, Height: 4, Mode: Letterbox, Pad: 255, DType: dtype.F16}, pix, 2, 1, 6, []uint32{
			h255, h255, h0, h153, h255, h255, h255, h255, // R
			h255, h255, h51, h204, h255, h255, h255, h255, // G
			h255, h255, h102, h255, h255, h255, h255, h255, // B
		}},
		// 1x2 (p0 over p1) into 4x2: height limits, new 1x2, pad (4-1)/2 = 1 column left, 2 right. Pad 0.
		{"letterbox columns f32", Spec{Width: 4, Height: 2, Mode: Letterbox, Pad: 0, DType: dtype.F32}, pix, 1, 2, 3, []uint32{
			s0, s0, s0, s0, s0, s153, s0, s0, // R
			s0, s51, s0, s0, s0, s204, s0, s0, // G
			s0, s102, s0, s0, s0, s255, s0, s0, // B
		}},
		// Row stride 8 with two garbage bytes per row, mode None.
		{"stride f16", Spec{Width: 2, Height: 2, Mode: None, DType: dtype.F16},
			slices.Concat(p0, p1, []byte{9, 9}, p1, p0, []byte{9, 9}), 2, 2, 8, []uint32{
				h0, h153, h153, h0, // R
				h51, h204, h204, h51, // G
				h102, h255, h255, h102, // B
			}},
		// Pad 0 goes through the normalization: (0 - 0.5)/0.5 = -1; 255 -> 1, 51 -> -0.6.
		{"normalized pad", Spec{Width: 1, Height: 3, Mode: Letterbox, Pad: 0, DType: dtype.F16,
			Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}}, []byte{255, 255, 255}, 1, 1, 3, []uint32{
			hm1, h255, hm1,
			hm1, h255, hm1,
			hm1, h255, hm1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := bytes.Repeat([]byte{0x5A}, tt.spec.OutputBytes())
			if _, err := mustTransformer(t, tt.spec).ApplyRGB(tt.src, tt.w, tt.h, tt.stride, out); err != nil {
				t.Fatal(err)
			}
			var want []byte
			for _, v := range tt.want {
				if tt.spec.DType == dtype.F16 {
					want = binary.LittleEndian.AppendUint16(want, uint16(v))
				} else {
					want = binary.LittleEndian.AppendUint32(want, v)
				}
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("got  % x\nwant % x", out, want)
			}
		})
	}
}

// An image that already has the target size is copied exactly, with and
// without padding in the rows.
func TestApplyRGBIdentityIsExact(t *testing.T) {
	for _, sz := range [][2]int{{640, 480}, {1, 1}, {33, 17}} {
		for _, extra := range []int{0, 5} {
			w, h := sz[0], sz[1]
			src := gradientNoiseRGB(w, h, 42, 40)
			stride := 3*w + extra
			strided := make([]byte, stride*h)
			for y := range h {
				copy(strided[y*stride:], src[3*w*y:3*w*(y+1)])
			}
			for _, mode := range []ResizeMode{Letterbox, Stretch, None} {
				spec := Spec{Width: w, Height: h, Mode: mode, DType: dtype.F32}
				out := make([]byte, spec.OutputBytes())
				g, err := mustTransformer(t, spec).ApplyRGB(strided, w, h, stride, out)
				if err != nil {
					t.Fatal(err)
				}
				if got := outputRGB(t, out, spec, g); !bytes.Equal(got, src) {
					t.Fatalf("%dx%d stride %d %s: not an exact copy", w, h, stride, mode)
				}
			}
		}
	}
}

// Every output byte is written: the result does not depend on what the
// buffer held before.
func TestApplyWritesEveryByte(t *testing.T) {
	cases := []struct {
		spec Spec
		w, h int
	}{
		{Spec{Width: 64, Height: 64, Mode: Letterbox, Pad: 114, DType: dtype.F16}, 100, 37},
		{Spec{Width: 64, Height: 48, Mode: Letterbox, Pad: 3, DType: dtype.F32}, 20, 90},
		{Spec{Width: 31, Height: 29, Mode: Stretch, DType: dtype.F16}, 100, 37},
		{Spec{Width: 31, Height: 29, Mode: Letterbox, DType: dtype.F16}, 31, 5}, // no horizontal pass
		{Spec{Width: 31, Height: 29, Mode: Letterbox, DType: dtype.F16}, 5, 29}, // no vertical pass
	}
	for _, c := range cases {
		src := gradientNoiseRGB(c.w, c.h, 7, 30)
		var outs [][]byte
		for _, fill := range []byte{0x00, 0xFF, 0x7E} {
			out := bytes.Repeat([]byte{fill}, c.spec.OutputBytes())
			if _, err := mustTransformer(t, c.spec).ApplyRGB(src, c.w, c.h, 3*c.w, out); err != nil {
				t.Fatal(err)
			}
			outs = append(outs, out)
		}
		if !bytes.Equal(outs[0], outs[1]) || !bytes.Equal(outs[0], outs[2]) {
			t.Errorf("%+v from %dx%d: output depends on the buffer's previous contents", c.spec, c.w, c.h)
		}
	}
}

func TestApplyRGBErrors(t *testing.T) {
	spec := Spec{Width: 8, Height: 8, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	pix := make([]byte, 3*4*4)
	tests := []struct {
		name         string
		pix          []byte
		w, h, stride int
		out          []byte
		want         error // nil: some error that is not ErrDecode
	}{
		{"short output", pix, 4, 4, 12, out[1:], nil},
		{"long output", pix, 4, 4, 12, append(out, 0), nil},
		{"stride too small", pix, 4, 4, 11, out, ErrDecode},
		{"frame too short", pix[:47], 4, 4, 12, out, ErrDecode},
		{"stride past end", pix, 4, 4, 13, out, ErrDecode},
		{"zero width", pix, 0, 4, 12, out, ErrDecode},
		{"too large", pix, 20000, 20000, 60000, out, ErrImageTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tr.ApplyRGB(tt.pix, tt.w, tt.h, tt.stride, tt.out)
			switch {
			case err == nil:
				t.Fatal("ApplyRGB succeeded")
			case tt.want == nil && errors.Is(err, ErrDecode):
				t.Fatalf("error %v wraps ErrDecode, but the caller's buffer is at fault", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("error %v does not wrap %v", err, tt.want)
			}
		})
	}
	// The exact minimum length (last row without stride padding) is enough.
	if _, err := tr.ApplyRGB(make([]byte, 3*13+12), 4, 4, 13, out); err != nil {
		t.Fatalf("minimal strided frame: %v", err)
	}
	none := mustTransformer(t, Spec{Width: 8, Height: 8, Mode: None, DType: dtype.F16})
	if _, err := none.ApplyRGB(pix, 4, 4, 12, out); !errors.Is(err, ErrSizeMismatch) {
		t.Fatalf("mode none with 4x4 into 8x8: %v, want ErrSizeMismatch", err)
	}
}

// After the first image of a size, resize + normalize allocates nothing.
func TestApplyRGBDoesNotAllocate(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F16, dtype.F32} {
		spec := Spec{Width: 96, Height: 96, Mode: Letterbox, Pad: 114, DType: dt}
		tr := mustTransformer(t, spec)
		out := make([]byte, spec.OutputBytes())
		src := gradientNoiseRGB(333, 217, 1, 20)
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := tr.ApplyRGB(src, 333, 217, 3*333, out); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per ApplyRGB, want 0", dt, allocs)
		}
	}
}

// encodedInput is one encoded test image with its expected displayed RGB.
type encodedInput struct {
	name string
	data []byte
	w, h int
	rgb  []byte // expected straight RGB; nil when only decodability is checked
	// tolerance is the largest difference per channel from rgb: 0 except
	// for JPEG in the turbojpeg build (jpegFormatTolerance).
	tolerance int
}

// straightPixels is the reference RGB of an image: the standard library's
// conversions (see referenceRGB).
func straightPixels(m image.Image) []byte {
	b := m.Bounds()
	var out []byte
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			p := referenceRGB(m, x, y)
			out = append(out, p[:]...)
		}
	}
	return out
}

// formatInputs is one or more real files of every supported format.
func formatInputs(t testing.TB) []encodedInput {
	const w, h = 29, 19
	rgb := gradientNoiseRGB(w, h, 3, 40)
	alpha := withAlpha(rgb, w, h)
	premultiplied := image.NewRGBA(alpha.Rect)
	for i := 0; i < len(alpha.Pix); i += 4 {
		c := color.RGBAModel.Convert(color.NRGBA{alpha.Pix[i], alpha.Pix[i+1], alpha.Pix[i+2], alpha.Pix[i+3]}).(color.RGBA)
		premultiplied.Pix[i], premultiplied.Pix[i+1], premultiplied.Pix[i+2], premultiplied.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	gray := image.NewGray(image.Rect(0, 0, w, h))
	for i := range gray.Pix {
		gray.Pix[i] = rgb[3*i+1]
	}
	deep := image.NewNRGBA64(image.Rect(0, 0, w, h))
	fillRandom(deep.Pix, 9)
	pal := palettedImage(w, h, 4)
	twoLevel := twoLevelNRGBA(w, h, 5)

	jpg := encodeJPEG(t, rgbToRGBA(rgb, w, h), 90)
	decodedJPEG, err := jpegDecodeForReference(jpg)
	if err != nil {
		t.Fatal(err)
	}

	// A GIF whose first frame covers only part of the logical screen.
	frame := image.NewPaletted(image.Rect(2, 1, 6, 4), color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{200, 100, 0, 255}})
	for i := range frame.Pix {
		frame.Pix[i] = uint8(i % 2)
	}
	var partial bytes.Buffer
	if err := gif.EncodeAll(&partial, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: frame.Palette, Width: 8, Height: 6}}); err != nil {
		t.Fatal(err)
	}
	partialRGB := make([]byte, 3*8*6)
	for y := 1; y < 4; y++ {
		for x := 2; x < 6; x++ {
			p := referenceRGB(frame, x, y)
			copy(partialRGB[3*(y*8+x):], p[:])
		}
	}

	return []encodedInput{
		{"png-rgba", encodePNG(t, alpha), w, h, straightPixels(alpha), 0},
		{"png-rgb", encodePNG(t, rgbToRGBA(rgb, w, h)), w, h, rgb, 0},
		{"png-gray", encodePNG(t, gray), w, h, straightPixels(gray), 0},
		{"png-rgba16", encodePNG(t, deep), w, h, straightPixels(deep), 0},
		{"png-paletted", encodePNG(t, pal), w, h, straightPixels(pal), 0},
		{"jpeg", jpg, w, h, straightPixels(decodedJPEG), jpegFormatTolerance},
		{"gif", encodeGIF(t, pal), w, h, straightPixels(pal), 0},
		{"gif-partial-frame", partial.Bytes(), 8, 6, partialRGB, 0},
		{"bmp", encodeBMP(t, rgbToRGBA(rgb, w, h)), w, h, rgb, 0},
		{"tiff-nrgba", encodeTIFF(t, alpha), w, h, straightPixels(alpha), 0},
		{"tiff-premultiplied", encodeTIFF(t, premultiplied), w, h, straightPixels(premultiplied), 0},
		{"webp-lossless", encodeWebPLossless(t, twoLevel), w, h, straightPixels(twoLevel), 0},
	}
}

// Every format decodes to exactly the expected pixels (mode None, f32, so
// the output can be read back to bytes); only libjpeg-turbo differs from
// image/jpeg, by at most its tolerance.
func TestApplyFormats(t *testing.T) {
	for _, in := range formatInputs(t) {
		t.Run(in.name, func(t *testing.T) {
			w, h, _, err := DecodeConfig(in.data)
			if err != nil || w != in.w || h != in.h {
				t.Fatalf("DecodeConfig = %dx%d, %v; want %dx%d", w, h, err, in.w, in.h)
			}
			spec := Spec{Width: in.w, Height: in.h, Mode: None, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).Apply(in.data, out)
			if err != nil {
				t.Fatal(err)
			}
			got := outputRGB(t, out, spec, g)
			for i := range got {
				if d := int(got[i]) - int(in.rgb[i]); d > in.tolerance || -d > in.tolerance {
					t.Fatalf("first difference beyond %d at pixel %d channel %d: got %d, want %d", in.tolerance, i/3, i%3, got[i], in.rgb[i])
				}
			}
		})
	}
}

// The same input gives the same bytes: twice on one Transformer, on a fresh
// one, after other sizes went through (weight cache), and on concurrent
// Transformers.
func TestDeterminism(t *testing.T) {
	spec := Spec{Width: 48, Height: 40, Mode: Letterbox, Pad: 114, DType: dtype.F16,
		Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}
	inputs := formatInputs(t)
	run := func(tr *Transformer, data []byte) []byte {
		out := make([]byte, spec.OutputBytes())
		if _, err := tr.Apply(data, out); err != nil {
			t.Error(err)
		}
		return out
	}
	want := make([][]byte, len(inputs))
	for i, in := range inputs {
		want[i] = run(mustTransformer(t, spec), in.data)
	}
	shared := mustTransformer(t, spec)
	for pass := range 2 {
		for i, in := range inputs {
			if got := run(shared, in.data); !bytes.Equal(got, want[i]) {
				t.Fatalf("pass %d, %s: differs from a fresh Transformer", pass, in.name)
			}
		}
	}
	// Reverse order: each size follows a different predecessor.
	for i := len(inputs) - 1; i >= 0; i-- {
		if got := run(shared, inputs[i].data); !bytes.Equal(got, want[i]) {
			t.Fatalf("reverse order, %s: differs from a fresh Transformer", inputs[i].name)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(inputs))
	for worker := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := mustTransformer(t, spec)
			for k := range inputs {
				i := (k + worker) % len(inputs)
				if got := run(tr, inputs[i].data); !bytes.Equal(got, want[i]) {
					errs <- fmt.Sprintf("worker %d, %s differs", worker, inputs[i].name)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The row-by-row YCbCr path (pixels.ycc) resamples exactly what converting
// the whole image first gives, for 4:2:0 and 4:2:2, odd sizes, and every
// combination of scaled axes.
func TestYCbCrRowsMatchConverted(t *testing.T) {
	const w, h = 131, 77
	for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio422} {
		m := image.NewYCbCr(image.Rect(0, 0, w, h), ratio)
		fillRandom(m.Y, 111)
		fillRandom(m.Cb, 112)
		fillRandom(m.Cr, 113)
		rgb := make([]byte, 3*w*h)
		convertToRGB(rgb, w, m)
		for _, size := range [][2]int{{40, 30}, {w, 30}, {40, h}, {w, h}, {200, 150}} {
			spec := Spec{Width: size[0], Height: size[1], Mode: Stretch, DType: dtype.F16}
			g, err := PlanGeometry(spec, w, h)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, spec.OutputBytes())
			mustTransformer(t, spec).resizeNormalize(packedRGB(rgb, w, h), g, want)
			got := make([]byte, spec.OutputBytes())
			mustTransformer(t, spec).resizeNormalize(pixels{w: w, h: h, bpp: 3, ycc: m}, g, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v to %v: row-by-row YCbCr differs", ratio, size)
			}
		}
	}
}

// Timings accumulate per step: Apply decodes, resizes and normalizes;
// ApplyRGB has nothing to decode; a failed header adds only decode time.
func TestTimingsAccumulate(t *testing.T) {
	spec := Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	if got := tr.Timings(); got != (Timings{}) {
		t.Fatalf("new Transformer has timings %+v", got)
	}
	src := gradientNoiseRGB(200, 120, 3, 10)
	if _, err := tr.ApplyRGB(src, 200, 120, 600, out); err != nil {
		t.Fatal(err)
	}
	raw := tr.Timings()
	if raw.Decode != 0 || raw.Resize <= 0 || raw.Normalize <= 0 {
		t.Fatalf("after ApplyRGB: %+v, want no decode time and some resize and normalize time", raw)
	}
	if _, err := tr.Apply(encodePNG(t, rgbToRGBA(src, 200, 120)), out); err != nil {
		t.Fatal(err)
	}
	enc := tr.Timings()
	if enc.Decode <= 0 || enc.Resize <= raw.Resize || enc.Normalize <= raw.Normalize {
		t.Fatalf("after Apply: %+v (before %+v), want every step to grow", enc, raw)
	}
	if _, err := tr.Apply([]byte("not an image"), out); err == nil {
		t.Fatal("Apply of garbage succeeded")
	}
	bad := tr.Timings()
	if bad.Resize != enc.Resize || bad.Normalize != enc.Normalize || bad.Decode < enc.Decode {
		t.Fatalf("after a failed Apply: %+v (before %+v), want only decode time to change", bad, enc)
	}
}

// Decode decodes at the size Apply would (DCT-scaled for JPEG) and checks
// the bytes as Apply does.
func TestDecodeAlone(t *testing.T) {
	tr := mustTransformer(t, Spec{Width: 128, Height: 128, Mode: Letterbox, DType: dtype.F16})
	data := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(640, 360, 7, 12), 640, 360), 90)
	w, h, err := tr.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// 640x360 into 128x128 (content 128x72): 1/4 scale, the largest
	// that keeps the content size.
	if w != 160 || h != 90 {
		t.Errorf("decoded %dx%d, want 160x90 (1/4 scale)", w, h)
	}
	if _, _, err := tr.Decode(data[:len(data)/2]); !errors.Is(err, ErrDecode) {
		t.Errorf("truncated JPEG: %v, want ErrDecode", err)
	}
}
