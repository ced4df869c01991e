package transforms

// Synthetic test images and the encoders that turn them into real files of
// every supported format. Everything here is deterministic: a fixed
// pseudo-random generator, no clock.

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"warehouse-etl/dtype"
)

// noise is a splitmix64 generator: deterministic test noise.
type noise uint64

func (n *noise) next() uint64 {
	*n += 0x9e3779b97f4a7c15
	z := uint64(*n)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// byteIn returns a value in [0, n).
func (n *noise) byteIn(k int) int { return int(n.next() % uint64(k)) }

// gradientNoiseRGB is a "real-looking" packed RGB image: smooth gradients in
// each channel (different directions), a few hard-edged rectangles, and
// per-pixel noise of amplitude +-amp.
func gradientNoiseRGB(w, h int, seed uint64, amp int) []byte {
	n := noise(seed)
	pix := make([]byte, 3*w*h)
	for y := range h {
		for x := range w {
			base := [3]int{
				255 * x / max(1, w-1),
				255 * y / max(1, h-1),
				255 * (x + y) / max(1, w+h-2),
			}
			// Hard edges: a bright block and a dark block.
			if x > w/5 && x < w/3 && y > h/4 && y < h/2 {
				base = [3]int{240, 220, 30}
			}
			if x > w/2 && x < 3*w/4 && y > h/2 && y < 4*h/5 {
				base = [3]int{20, 40, 200}
			}
			for c := range 3 {
				v := base[c]
				if amp > 0 {
					v += n.byteIn(2*amp+1) - amp
				}
				pix[3*(y*w+x)+c] = uint8(min(255, max(0, v)))
			}
		}
	}
	return pix
}

// rgbToNRGBA wraps packed RGB into an opaque *image.NRGBA.
func rgbToNRGBA(pix []byte, w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		copy(m.Pix[4*i:4*i+3], pix[3*i:3*i+3])
		m.Pix[4*i+3] = 255
	}
	return m
}

// rgbToRGBA wraps packed RGB into an opaque *image.RGBA.
func rgbToRGBA(pix []byte, w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		copy(m.Pix[4*i:4*i+3], pix[3*i:3*i+3])
		m.Pix[4*i+3] = 255
	}
	return m
}

// withAlpha returns an NRGBA copy of pix whose alpha varies over the image,
// including fully transparent pixels (which still store a color).
func withAlpha(pix []byte, w, h int) *image.NRGBA {
	m := rgbToNRGBA(pix, w, h)
	for i := range w * h {
		m.Pix[4*i+3] = uint8((i * 37) % 256)
	}
	return m
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJPEG(t testing.TB, m image.Image, quality int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: quality}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeBMP(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := bmp.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeTIFF(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tiff.Encode(&buf, m, &tiff.Options{Compression: tiff.Deflate}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// palettedImage is a w x h paletted image with a 16-color palette (one
// entry transparent, storing black as image/gif decodes it) and noisy
// indices.
func palettedImage(w, h int, seed uint64) *image.Paletted {
	pal := make(color.Palette, 16)
	for i := range pal {
		pal[i] = color.RGBA{uint8(i * 16), uint8(255 - i*16), uint8(i * 7), 255}
	}
	pal[15] = color.RGBA{} // transparent
	m := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	n := noise(seed)
	for i := range m.Pix {
		m.Pix[i] = uint8(n.byteIn(16))
	}
	return m
}

func encodeGIF(t testing.TB, m *image.Paletted) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := gif.Encode(&buf, m, &gif.Options{NumColors: len(m.Palette)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// vp8lBits writes a VP8L bit stream: least significant bit first.
type vp8lBits struct {
	buf   []byte
	nbits uint
}

func (b *vp8lBits) write(v uint32, n uint) {
	for i := range n {
		if b.nbits%8 == 0 {
			b.buf = append(b.buf, 0)
		}
		b.buf[len(b.buf)-1] |= byte((v>>i)&1) << (b.nbits % 8)
		b.nbits++
	}
}

// encodeWebPLossless writes a lossless WebP (VP8L) image of an NRGBA image in
// which every channel takes at most two distinct values. That restriction
// lets each channel use a "simple" prefix code of one or two symbols (code
// 0 for the smaller value, 1 for the larger; a single symbol costs no
// bits), so no general Huffman encoder is needed. See the WebP lossless
// bitstream specification, sections 3 (header) and 6.2 (simple code).
func encodeWebPLossless(t testing.TB, m *image.NRGBA) []byte {
	t.Helper()
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	// channel order of the bit stream: green, red, blue, alpha
	chans := [4]int{1, 0, 2, 3}
	var symbols [4][]uint8
	for k, c := range chans {
		seen := map[uint8]bool{}
		for i := 0; i < w*h; i++ {
			seen[m.Pix[4*i+c]] = true
		}
		for v := range 256 {
			if seen[uint8(v)] {
				symbols[k] = append(symbols[k], uint8(v))
			}
		}
		if len(symbols[k]) > 2 {
			t.Fatalf("encodeWebPLossless: channel %d has %d values, at most 2 supported", c, len(symbols[k]))
		}
	}
	var bits vp8lBits
	bits.write(0x2f, 8) // signature
	bits.write(uint32(w-1), 14)
	bits.write(uint32(h-1), 14)
	bits.write(1, 1) // alpha_is_used hint
	bits.write(0, 3) // version
	bits.write(0, 1) // no transform
	bits.write(0, 1) // no color cache
	bits.write(0, 1) // no meta prefix codes
	simple := func(syms []uint8) {
		bits.write(1, 1) // simple code
		bits.write(uint32(len(syms)-1), 1)
		bits.write(1, 1) // first symbol uses 8 bits
		for _, s := range syms {
			bits.write(uint32(s), 8)
		}
	}
	for k := range 4 {
		simple(symbols[k])
	}
	simple([]uint8{0}) // distance code, unused
	for i := 0; i < w*h; i++ {
		for k, c := range chans {
			if len(symbols[k]) == 2 && m.Pix[4*i+c] == symbols[k][1] {
				bits.write(1, 1)
			} else if len(symbols[k]) == 2 {
				bits.write(0, 1)
			}
		}
	}
	payload := bits.buf
	chunk := append([]byte("VP8L"), binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))...)
	chunk = append(chunk, payload...)
	if len(payload)%2 == 1 {
		chunk = append(chunk, 0)
	}
	out := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(4+len(chunk)))...)
	out = append(out, "WEBP"...)
	return append(out, chunk...)
}

// twoLevelNRGBA is an image whose channels each take one of two values, for
// encodeWebPLossless.
func twoLevelNRGBA(w, h int, seed uint64) *image.NRGBA {
	n := noise(seed)
	levels := [4][2]uint8{{10, 240}, {60, 200}, {0, 255}, {255, 128}}
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		for c := range 4 {
			m.Pix[4*i+c] = levels[c][n.byteIn(2)]
		}
	}
	return m
}

// outputRGB reads an F32 output of a spec without mean/std back into packed
// 8-bit RGB (the image rectangle g), checking each value is exactly
// float32(v/255) for an integer v.
func outputRGB(t testing.TB, out []byte, s Spec, g Geometry) []byte {
	t.Helper()
	if s.DType != dtype.F32 || s.Std != ([3]float64{}) {
		t.Fatal("outputRGB needs an F32 spec without normalization")
	}
	plane := s.Width * s.Height
	rgb := make([]byte, 3*g.NewW*g.NewH)
	for y := range g.NewH {
		for x := range g.NewW {
			for c := range 3 {
				i := c*plane + (g.PadY+y)*s.Width + g.PadX + x
				f := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
				v := math.Round(float64(f) * 255)
				if v < 0 || v > 255 || float32(v/255) != f {
					t.Fatalf("element (%d,%d,%d) = %v is not v/255 for an integer v", c, y, x, f)
				}
				rgb[3*(y*g.NewW+x)+c] = uint8(v)
			}
		}
	}
	return rgb
}

// mustTransformer makes a Transformer or fails the test.
func mustTransformer(t testing.TB, s Spec) *Transformer {
	t.Helper()
	tr, err := NewTransformer(s)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
