package transforms

import (
	"bytes"
	"image"
	"image/color"
	"testing"
)

// Exhaustive: our inlined formula equals the standard library's for all 2^24
// inputs.
func TestYCbCrToRGBMatchesStd(t *testing.T) {
	for y := range 256 {
		for cb := range 256 {
			for cr := range 256 {
				r, g, b := ycbcrToRGB(uint8(y), uint8(cb), uint8(cr))
				wr, wg, wb := color.YCbCrToRGB(uint8(y), uint8(cb), uint8(cr))
				if r != wr || g != wg || b != wb {
					t.Fatalf("ycbcrToRGB(%d,%d,%d) = %d,%d,%d; color.YCbCrToRGB = %d,%d,%d", y, cb, cr, r, g, b, wr, wg, wb)
				}
			}
		}
	}
}

// Exhaustive over 8-bit premultiplied colors: unpremultiply equals
// color.NRGBAModel, the standard library's definition of straight color.
func TestUnpremultiplyMatchesNRGBAModel(t *testing.T) {
	for a := range 256 {
		for v := 0; v <= a; v++ {
			c := color.RGBA{uint8(v), uint8(v / 2), uint8(a - v), uint8(a)}
			want := color.NRGBAModel.Convert(c).(color.NRGBA)
			a16 := uint32(a) * 0x101
			got := [3]uint8{
				unpremultiply(uint32(c.R)*0x101, a16),
				unpremultiply(uint32(c.G)*0x101, a16),
				unpremultiply(uint32(c.B)*0x101, a16),
			}
			if got != [3]uint8{want.R, want.G, want.B} {
				t.Fatalf("%v: got %v, NRGBAModel %v", c, got, want)
			}
		}
	}
}

// referenceRGB is the straight RGB of pixel (x, y) by an independent route:
// the standard library's conversions, or the raw bytes where the rule is
// "take the high byte".
func referenceRGB(img image.Image, x, y int) [3]uint8 {
	switch m := img.(type) {
	case *image.NRGBA64:
		i := m.PixOffset(x, y)
		return [3]uint8{m.Pix[i], m.Pix[i+2], m.Pix[i+4]}
	case *image.Gray16:
		i := m.PixOffset(x, y)
		return [3]uint8{m.Pix[i], m.Pix[i], m.Pix[i]}
	case *image.YCbCr:
		c := m.YCbCrAt(x, y)
		r, g, b := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
		return [3]uint8{r, g, b}
	case *image.NYCbCrA:
		c := m.NYCbCrAAt(x, y)
		r, g, b := color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
		return [3]uint8{r, g, b}
	}
	c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	return [3]uint8{c.R, c.G, c.B}
}

// fillRandom fills the pixel bytes of m with noise.
func fillRandom(pix []byte, seed uint64) {
	n := noise(seed)
	for i := range pix {
		pix[i] = uint8(n.next())
	}
}

func TestConvertToRGB(t *testing.T) {
	const w, h = 13, 7 // odd sizes exercise the chroma subsampling edges
	r := image.Rect(0, 0, w, h)
	var images []struct {
		name string
		img  image.Image
	}
	add := func(name string, img image.Image) {
		images = append(images, struct {
			name string
			img  image.Image
		}{name, img})
	}

	nrgba := image.NewNRGBA(r)
	fillRandom(nrgba.Pix, 1)
	add("NRGBA", nrgba)

	// Premultiplied: every channel <= alpha, including alpha 0 and 255.
	rgba := image.NewRGBA(r)
	fillRandom(rgba.Pix, 2)
	for i := 0; i < len(rgba.Pix); i += 4 {
		a := rgba.Pix[i+3]
		switch i / 4 % 5 {
		case 0:
			a = 0
		case 1:
			a = 255
		}
		rgba.Pix[i+3] = a
		for c := range 3 {
			rgba.Pix[i+c] = uint8(int(rgba.Pix[i+c]) * int(a) / 255)
		}
	}
	add("RGBA", rgba)

	rgba64 := image.NewRGBA64(r)
	for y := range h {
		for x := range w {
			a := uint16((x*7919 + y*104729) % 65536)
			if x == 0 {
				a = 0xffff
			}
			k := uint32(x*31 + y*17)
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(k * 97 % (uint32(a) + 1)), uint16(k * 13 % (uint32(a) + 1)), uint16(k % (uint32(a) + 1)), a})
		}
	}
	add("RGBA64", rgba64)

	nrgba64 := image.NewNRGBA64(r)
	fillRandom(nrgba64.Pix, 3)
	add("NRGBA64", nrgba64)

	gray := image.NewGray(r)
	fillRandom(gray.Pix, 4)
	add("Gray", gray)

	gray16 := image.NewGray16(r)
	fillRandom(gray16.Pix, 5)
	add("Gray16", gray16)

	pal := palettedImage(w, h, 6)
	pal.Palette[3] = color.NRGBA{200, 100, 50, 0} // straight color, transparent
	pal.Palette = pal.Palette[:15]                // index 15 now lies beyond the palette
	add("Paletted", pal)

	for _, ratio := range []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	} {
		m := image.NewYCbCr(r, ratio)
		fillRandom(m.Y, 7)
		fillRandom(m.Cb, 8)
		fillRandom(m.Cr, 9)
		add("YCbCr"+ratio.String(), m)
		// A sub-image starting at odd coordinates inside the canvas
		// exercises the chroma offsets.
		add("YCbCr"+ratio.String()+"-sub", m.SubImage(image.Rect(3, 1, 12, 6)))
	}
	nycbcra := image.NewNYCbCrA(r, image.YCbCrSubsampleRatio420)
	fillRandom(nycbcra.Y, 10)
	fillRandom(nycbcra.Cb, 11)
	fillRandom(nycbcra.Cr, 12)
	fillRandom(nycbcra.A, 13)
	add("NYCbCrA", nycbcra)

	cmyk := image.NewCMYK(r) // generic path
	fillRandom(cmyk.Pix, 14)
	add("CMYK", cmyk)

	alpha := image.NewAlpha(r) // generic path
	fillRandom(alpha.Pix, 15)
	add("Alpha", alpha)

	for _, tt := range images {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.img.Bounds()
			dst := bytes.Repeat([]byte{0xEE}, 3*w*h)
			convertToRGB(dst, w, tt.img)
			for y := range h {
				for x := range w {
					got := [3]uint8(dst[3*(y*w+x) : 3*(y*w+x)+3])
					want := [3]uint8{0xEE, 0xEE, 0xEE} // outside the bounds: untouched
					if (image.Point{x, y}).In(b) {
						if p, ok := tt.img.(*image.Paletted); ok && int(p.ColorIndexAt(x, y)) >= len(p.Palette) {
							want = [3]uint8{} // index beyond the palette reads black
						} else {
							want = referenceRGB(tt.img, x, y)
						}
					}
					if got != want {
						t.Fatalf("pixel (%d,%d): got %v, want %v", x, y, got, want)
					}
				}
			}
		})
	}
}

// The rule "alpha is dropped, straight color kept" made concrete.
func TestAlphaDropped(t *testing.T) {
	tests := []struct {
		name string
		img  image.Image
		want [3]uint8
	}{
		{"NRGBA transparent keeps color", &image.NRGBA{Pix: []byte{200, 100, 50, 0}, Stride: 4, Rect: image.Rect(0, 0, 1, 1)}, [3]uint8{200, 100, 50}},
		{"NRGBA half keeps color", &image.NRGBA{Pix: []byte{200, 100, 50, 128}, Stride: 4, Rect: image.Rect(0, 0, 1, 1)}, [3]uint8{200, 100, 50}},
		// 100/128 of full scale: 100*255/128 = 199.2 (NRGBAModel truncates via 16 bits: 199).
		{"RGBA half un-premultiplied", &image.RGBA{Pix: []byte{100, 50, 25, 128}, Stride: 4, Rect: image.Rect(0, 0, 1, 1)}, [3]uint8{199, 99, 49}},
		{"RGBA transparent is black", &image.RGBA{Pix: []byte{0, 0, 0, 0}, Stride: 4, Rect: image.Rect(0, 0, 1, 1)}, [3]uint8{0, 0, 0}},
		{"NRGBA64 high byte", &image.NRGBA64{Pix: []byte{0x12, 0xff, 0x34, 0x00, 0x56, 0x80, 0x00, 0x10}, Stride: 8, Rect: image.Rect(0, 0, 1, 1)}, [3]uint8{0x12, 0x34, 0x56}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 3)
			convertToRGB(dst, 1, tt.img)
			if [3]uint8(dst) != tt.want {
				t.Fatalf("got %v, want %v", dst, tt.want)
			}
		})
	}
}

// The row converters equal color.YCbCrToRGB for all 2^24 inputs: per luma
// value, a row of every (Cb, Cr) through convertYCbCrRow1 (the SIMD steps
// where the CPU has them), convertYCbCrRow1Go and convertYCbCrRow2 (a chroma
// sample per pixel pair, an odd width for its last pixel).
// TestConvertYCbCrRow1Widths covers the rows that are not 16-pixel
// multiples.
func TestConvertYCbCrRowsMatchStd(t *testing.T) {
	const n = 1 << 16
	yrow, cb, cr, dst := make([]byte, 2*n+1), make([]byte, n+1), make([]byte, n+1), make([]byte, 6*n+3)
	for i := range n + 1 {
		cb[i], cr[i] = uint8(i), uint8(i>>8)
	}
	for y := range 256 {
		for i := range yrow {
			yrow[i] = uint8(y)
		}
		for _, conv := range []string{"Row1", "Row1Go", "Row2"} {
			sub, w := 1, n
			switch conv {
			case "Row1":
				convertYCbCrRow1(dst[:3*w], yrow[:w], cb[:w], cr[:w])
			case "Row1Go":
				convertYCbCrRow1Go(dst[:3*w], yrow[:w], cb[:w], cr[:w])
			case "Row2":
				sub, w = 2, 2*n+1
				convertYCbCrRow2(dst[:3*w], yrow[:w], cb, cr)
			}
			for x := range w {
				i := x / sub
				r, g, b := color.YCbCrToRGB(uint8(y), cb[i], cr[i])
				if dst[3*x] != r || dst[3*x+1] != g || dst[3*x+2] != b {
					t.Fatalf("%s, Y %d Cb %d Cr %d: %v, color.YCbCrToRGB %d,%d,%d", conv, y, cb[i], cr[i], dst[3*x:3*x+3], r, g, b)
				}
			}
		}
	}
}

// convertYCbCrRow1 of every width from 0 to 70 and at every start offset
// in its buffers equals convertYCbCrRow1Go, and leaves the bytes after the
// row alone.
func TestConvertYCbCrRow1Widths(t *testing.T) {
	n := noise(9)
	src := make([]byte, 3*80)
	for i := range src {
		src[i] = uint8(n.next())
	}
	for w := range 71 {
		for off := range 3 {
			y, cb, cr := src[off:off+w], src[80+off:80+off+w], src[160+off:160+off+w]
			got, want := bytes.Repeat([]byte{0xEE}, 3*w+5), bytes.Repeat([]byte{0xEE}, 3*w+5)
			convertYCbCrRow1(got[:3*w], y, cb, cr)
			convertYCbCrRow1Go(want[:3*w], y, cb, cr)
			if !bytes.Equal(got, want) {
				t.Fatalf("width %d at +%d: %v, want %v", w, off, got, want)
			}
		}
	}
}
