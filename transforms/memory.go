package transforms

import (
	"fmt"
)

// Memory accounting. A build shares one memory budget between its
// workers (see SetMemory): before a decode allocates, the Transformer
// reserves an upper bound of what that decode will hold at once, computed
// from the header alone, and gives it back when Apply returns. The bounds
// below are per path: the fast paths (PNG 8-bit RGB/RGBA, jpegdec or
// libjpeg-turbo with DCT scaling) hold their own buffers; a fallback to the
// standard decoders (decodeStd) reserves that decoder's image and the
// conversion buffers before it runs. A bound is an upper bound of the
// buffers' sizes, not of what the garbage collector has yet to reclaim.
//
// Between images a Transformer keeps its scratch buffers (no allocation
// per image) as long as the last image needed at most keep bytes; after a
// larger one it drops them, so what a worker keeps is bounded by keep and
// a hostile 8000x8000 PNG does not stay resident in every worker.

// SetMemory makes t reserve the bytes each decode holds with acquire
// before it allocates and give them back with release when Apply returns.
// acquire may wait (for other workers' decodes to finish); an error from
// it fails the image with ErrDecode wrapping that error. Scratch buffers
// are dropped after an image that needed more than keep bytes.
//
// release's garbage is true when the image's buffers were dropped rather
// than kept: the bytes are free only once the garbage collector has run.
func (t *Transformer) SetMemory(acquire func(n int64) error, release func(n int64, garbage bool), keep int64) {
	t.acquire, t.release, t.keep = acquire, release, keep
}

// reserve makes sure n bytes are reserved for the current image. Growing
// a reservation gives the old one back first and then asks for the whole:
// a worker never holds bytes while it waits for more, so two workers
// cannot wait on each other.
func (t *Transformer) reserve(hdr imageHeader, n int64) error {
	if n > t.needed {
		t.needed = n
	}
	if t.acquire == nil || n <= t.reserved {
		return nil
	}
	if t.reserved > 0 {
		t.release(t.reserved, false)
		t.reserved = 0
	}
	if err := t.acquire(n); err != nil {
		return fmt.Errorf("%w: %s: decoding needs %d bytes of memory: %w", ErrDecode, hdr.describe(), n, err)
	}
	t.reserved = n
	return nil
}

// endImage gives back the current image's reservation and drops the
// scratch buffers if the image needed more than keep bytes.
func (t *Transformer) endImage() {
	drop := t.keep > 0 && t.needed > t.keep
	if drop {
		t.dropScratch()
	}
	if t.reserved > 0 {
		t.release(t.reserved, drop)
		t.reserved = 0
	}
	t.needed = 0
}

// dropScratch lets the garbage collector have every buffer t keeps between
// images.
func (t *Transformer) dropScratch() {
	t.decoded, t.oriented, t.inter, t.row, t.srcRow, t.acc = nil, nil, nil, nil, nil, nil
	t.png.idat, t.png.raw = nil, nil
	t.jpeg.dropScratch()
	t.horizontal, t.vertical = axisWeights{}, axisWeights{}
}

// resampleBytes bounds the resampler's buffers for a w x h source (as
// decoded) going to g: the horizontal pass's intermediate (3 * NewW * h),
// a source row, an output row and the vertical accumulator.
func resampleBytes(w, h int, g Geometry) int64 {
	return 3*int64(g.NewW)*int64(h) + 3*int64(w) + 16*int64(g.NewW) + 64*int64(w+h)
}

// decodeBytes is the upper bound reserved before decoding an image of
// header hdr into geometry g, n bytes encoded: the first path's buffers
// (the fast path where the format has one) and the resampler's.
func decodeBytes(hdr imageHeader, g Geometry, data []byte) int64 {
	w, h := int64(hdr.storedW), int64(hdr.storedH)
	long := max(hdr.storedW, hdr.storedH) // the decoded height, either orientation
	switch hdr.format.name {
	case "png":
		if bpp, ok := pngFastBPP(data); ok {
			return int64(len(data)) + h*(1+w*int64(bpp)) + resampleBytes(hdr.storedW, long, g)
		}
	case "jpeg":
		nw, nh := g.NewW, g.NewH
		if hdr.orientation >= 5 {
			nw, nh = nh, nw
		}
		k := int64(dctScaleDenom(hdr.storedW, hdr.storedH, nw, nh))
		sw, sh := (w+k-1)/k+16, (h+k-1)/k+16 // MCU padding
		// Planes (at most 3 full-resolution), FancyScaled's chroma, the
		// packed RGB and its oriented copy.
		return 11*sw*sh + resampleBytes(int(sw), int(max(sw, sh)), g)
	}
	return stdDecodeBytes(hdr, g, data)
}

// stdDecodeBytes bounds decodeStd: the standard decoder's image and its
// working memory, the packed RGB conversion and its oriented copy, and
// the resampler's buffers.
func stdDecodeBytes(hdr imageHeader, g Geometry, data []byte) int64 {
	p := int64(hdr.storedW) * int64(hdr.storedH)
	var img int64
	switch hdr.format.name {
	case "png":
		img = pngStdBytesPerPixel(data) * p
	case "gif":
		img = p
	case "bmp":
		img = 4 * p
	case "jpeg":
		// image/jpeg: a CMYK image (4 bytes a pixel) and, progressive,
		// one int32 per coefficient of up to four components.
		img = 4*p + 16*p
	case "tiff":
		// x/image/tiff reads every strip uncompressed (up to 8 bytes a
		// pixel) and then builds an image of up to 8 bytes a pixel.
		img = 16 * p
	default: // webp: lossless keeps ARGB words and transform buffers
		img = 12 * p
	}
	conv := 3 * p
	if hdr.orientation != 1 {
		conv *= 2
	}
	long := max(hdr.storedW, hdr.storedH)
	return img + conv + 4096 + resampleBytes(hdr.storedW, long, g)
}

// pngFastBPP reports the bytes per pixel of a PNG the fast path decodes
// (8-bit RGB or RGBA, not interlaced), from its leading IHDR.
func pngFastBPP(data []byte) (int, bool) {
	ct, depth, interlace, ok := pngIHDRFormat(data)
	if !ok || depth != 8 || interlace != 0 {
		return 0, false
	}
	switch ct {
	case 2:
		return 3, true
	case 6:
		return 4, true
	}
	return 0, false
}

// pngStdBytesPerPixel bounds image/png's memory per pixel: its image
// (Gray 1, Gray16 2, Paletted 1, RGBA/NRGBA 4, RGBA64/NRGBA64 8) and, for
// interlaced files, the pass images it assembles it from.
func pngStdBytesPerPixel(data []byte) int64 {
	ct, depth, interlace, ok := pngIHDRFormat(data)
	if !ok {
		return 16
	}
	var n int64
	switch {
	case ct == 0 || ct == 3:
		n = 1
		if depth == 16 {
			n = 2
		}
	case depth == 16:
		n = 8
	default:
		n = 4
	}
	if interlace != 0 {
		n *= 2
	}
	return n + 1 // and its row buffers
}

// pngIHDRFormat reads color type, bit depth and interlace method from a
// leading IHDR.
func pngIHDRFormat(data []byte) (colorType, depth, interlace byte, ok bool) {
	const ihdr = len(pngSignature) + 8
	if len(data) < ihdr+13 || string(data[len(pngSignature)+4:ihdr]) != "IHDR" {
		return 0, 0, 0, false
	}
	b := data[ihdr:]
	return b[9], b[8], b[12], true
}
