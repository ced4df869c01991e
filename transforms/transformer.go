package transforms

import (
	"fmt"
	"image"
	"time"
)

// Transformer turns one image at a time into an output tensor. It owns all
// scratch memory (decoded pixels, resampler weights and rows), so a worker
// that keeps one Transformer allocates nothing per image beyond what the
// decoders allocate. Not safe for concurrent use: one per worker.
type Transformer struct {
	spec      Spec
	maxPixels int // source pixel limit; MaxSourcePixels except in tests
	norm      normalizer

	decoded  []byte // packed RGB as stored in the file
	oriented []byte // packed RGB after EXIF orientation (when not identity)
	inter    []byte // horizontal pass output: NewW x SrcH packed RGB
	row      []byte // one output row of packed RGB
	srcRow   []byte // one source row converted from YCbCr
	acc      []int32
	png      pngDecoder
	jpeg     jpegState

	horizontal, vertical axisWeights // cached for the last source/target sizes

	// Memory accounting (SetMemory, memory.go).
	acquire  func(int64) error
	release  func(int64, bool)
	keep     int64 // scratch is dropped after an image that needed more
	reserved int64 // reserved for the current image
	needed   int64 // the most the current image asked for

	timings Timings
	counts  Counts
}

// Timings is the time a Transformer has spent in each step since it was
// made, for build reports. Decode is header parsing, decompression and
// EXIF orientation (zero for ApplyRGB's raw frames); Normalize is the
// lookup-table conversion into the output tensor and its padding; Resize is
// the rest of the work: both resampler passes, including the YCbCr to RGB
// conversion that 4:2:0 and 4:2:2 JPEG planes get row by row on their way
// into the horizontal pass.
type Timings struct {
	Decode, Resize, Normalize time.Duration
}

// Timings returns the Transformer's cumulative step times.
func (t *Transformer) Timings() Timings { return t.timings }

// Counts tallies which decoder paths a Transformer's images took, for build
// reports.
type Counts struct {
	// JPEGFallback counts JPEG images the build's own JPEG decoder left
	// to image/jpeg: progressive, arithmetic-coded, 12-bit and CMYK/YCCK
	// streams in the pure-Go build (jpegdec.ErrUnsupported), CMYK/YCCK in
	// the turbojpeg build. Those decode at full size, more slowly.
	JPEGFallback int64
}

// Counts returns the Transformer's cumulative decoder path counts.
func (t *Transformer) Counts() Counts { return t.counts }

// NewTransformer validates s and builds the normalization tables.
func NewTransformer(s Spec) (*Transformer, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Transformer{spec: s, maxPixels: MaxSourcePixels, norm: newNormalizer(s)}, nil
}

// Spec returns the spec the Transformer was made with.
func (t *Transformer) Spec() Spec { return t.spec }

// Apply decodes an encoded image (PNG, JPEG, GIF, BMP, TIFF or WebP), applies
// its EXIF orientation (JPEG), drops alpha, resizes it by the spec's mode and
// writes the normalized CHW tensor (R, G, B planes, little-endian) into out,
// which must be Spec.OutputBytes() long. Every byte of out is written.
//
// The header is checked before any pixel is decoded: sizes beyond
// MaxSourceSide/MaxSourcePixels fail with ErrImageTooLarge, mode None with a
// different size fails with ErrSizeMismatch. Every failure caused by the
// bytes wraps ErrDecode. On error out holds unspecified bytes.
func (t *Transformer) Apply(encoded []byte, out []byte) (Geometry, error) {
	if err := t.checkOut(out); err != nil {
		return Geometry{}, err
	}
	t0 := time.Now()
	defer func() { t.timings.Decode += time.Since(t0) }() // resizeNormalize takes its share back out
	hdr, err := readHeader(encoded, t.maxPixels)
	if err != nil {
		return Geometry{}, err
	}
	w, h := hdr.displayedSize()
	g, err := planGeometry(t.spec, w, h)
	if err != nil {
		return Geometry{}, err
	}
	defer t.endImage()
	if err := t.reserve(hdr, decodeBytes(hdr, g, encoded)); err != nil {
		return Geometry{}, err
	}
	pix, err := t.decodePixels(encoded, hdr, g)
	if err != nil {
		return Geometry{}, err
	}
	spent := t.resizeNormalize(pix, g, out)
	t.timings.Decode -= spent
	return g, nil
}

// ApplyRGB is Apply for raw frames: pix holds h rows of w packed 8-bit RGB
// pixels, each row starting stride bytes after the previous one. A frame too
// short for its declared layout fails with ErrDecode.
func (t *Transformer) ApplyRGB(pix []byte, w, h, stride int, out []byte) (Geometry, error) {
	if err := t.checkOut(out); err != nil {
		return Geometry{}, err
	}
	if err := checkSourceSize(w, h, t.maxPixels); err != nil {
		return Geometry{}, fmt.Errorf("%w: raw RGB frame: %w", ErrDecode, err)
	}
	if stride < 3*w {
		return Geometry{}, fmt.Errorf("%w: raw RGB frame %dx%d: stride %d < %d", ErrDecode, w, h, stride, 3*w)
	}
	if need := (h-1)*stride + 3*w; len(pix) < need {
		return Geometry{}, fmt.Errorf("%w: raw RGB frame %dx%d stride %d needs %d bytes, have %d",
			ErrDecode, w, h, stride, need, len(pix))
	}
	g, err := planGeometry(t.spec, w, h)
	if err != nil {
		return Geometry{}, err
	}
	// Raw frames are not reserved: their pixels belong to the source
	// (which reserves a cached block itself and holds it while this
	// runs, so waiting here could wait on ourselves); the resampler's
	// buffers come out of what the worker keeps, and are dropped after a
	// frame that needed more.
	defer t.endImage()
	t.needed = resampleBytes(w, h, g)
	t.resizeNormalize(pixels{pix: pix, w: w, h: h, stride: stride, bpp: 3}, g, out)
	return g, nil
}

func (t *Transformer) checkOut(out []byte) error {
	if len(out) != t.spec.OutputBytes() {
		return fmt.Errorf("transforms: output buffer is %d bytes, spec needs %d", len(out), t.spec.OutputBytes())
	}
	return nil
}

// pixels is a decoded image as the resampler reads it: h rows of w pixels,
// each row starting stride bytes after the previous, a pixel bpp bytes of
// which the first three are R, G, B (bpp 3: packed RGB; bpp 4: RGBA, the
// alpha byte is skipped). The rows are in displayed orientation. w and h
// may be smaller than the source's size when the decoder scaled the image
// down on the way (jpegdec's or libjpeg-turbo's DCT scaling); the
// resampler then continues from that size.
//
// ycc, when set, replaces pix: 4:2:0 or 4:2:2 YCbCr planes (jpegdec's or
// image/jpeg's), converted to RGB one row at a time as the resampler reads
// it (convertYCbCrRow2), so no full-size RGB copy is written and read back.
type pixels struct {
	pix               []byte
	w, h, stride, bpp int
	ycc               *image.YCbCr
}

// packedRGB describes w x h packed RGB rows in pix.
func packedRGB(pix []byte, w, h int) pixels {
	return pixels{pix: pix, w: w, h: h, stride: 3 * w, bpp: 3}
}

// decodePixels decodes the image described by hdr in displayed
// orientation; g is its planned geometry, which a decoder that scales
// while decoding uses to choose its scale. The pixels belong to t and are
// valid until the next call.
func (t *Transformer) decodePixels(encoded []byte, hdr imageHeader, g Geometry) (pixels, error) {
	return hdr.format.decodePixels(t, encoded, hdr, g)
}

// decodeStd decodes through the format's image.Image decoder (the
// standard library or x/image), converts to packed RGB and applies the
// EXIF orientation: the general path every format can take.
func (t *Transformer) decodeStd(encoded []byte, hdr imageHeader, g Geometry) (pixels, error) {
	if err := t.reserve(hdr, stdDecodeBytes(hdr, g, encoded)); err != nil {
		return pixels{}, err
	}
	img, err := callDecoder(hdr.format.decode, encoded)
	if err != nil {
		return pixels{}, fmt.Errorf("%w: %s data: %w", ErrDecode, hdr.format.name, err)
	}
	// The decoded image must lie inside the size the header announced: we
	// checked and sized everything by it. A GIF's first frame may be
	// smaller than its logical screen; the rest of the screen is black,
	// the color of a transparent GIF pixel after dropping alpha.
	canvas := image.Rect(0, 0, hdr.storedW, hdr.storedH)
	b := img.Bounds()
	if !b.In(canvas) {
		return pixels{}, fmt.Errorf("%w: %s: decoded bounds %v outside header size %dx%d",
			ErrDecode, hdr.format.name, b, hdr.storedW, hdr.storedH)
	}
	if m, ok := img.(*image.YCbCr); ok && b == canvas && hdr.orientation == 1 &&
		(m.SubsampleRatio == image.YCbCrSubsampleRatio420 || m.SubsampleRatio == image.YCbCrSubsampleRatio422) {
		return pixels{w: hdr.storedW, h: hdr.storedH, bpp: 3, ycc: m}, nil
	}
	n := 3 * hdr.storedW * hdr.storedH
	t.decoded = resize(t.decoded, n)
	if b != canvas {
		clear(t.decoded)
	}
	convertToRGB(t.decoded, hdr.storedW, img)
	return t.orientRGB(t.decoded, hdr.storedW, hdr.storedH, hdr.orientation), nil
}

// orientRGB applies EXIF orientation o to w x h packed RGB pixels (stored
// orientation), returning pix itself for the identity.
func (t *Transformer) orientRGB(pix []byte, w, h, o int) pixels {
	if o == 1 {
		return packedRGB(pix, w, h)
	}
	t.oriented = resize(t.oriented, 3*w*h)
	dw, dh := orient(t.oriented, pix, w, h, o)
	return packedRGB(t.oriented, dw, dh)
}

// resizeNormalize resamples src to g.NewW x g.NewH and writes it
// normalized into the image rectangle of out, and the pad value around it.
// Passes whose axis keeps its size are skipped, so an unscaled image is
// copied exactly. The horizontal pass runs first, into an 8-bit
// intermediate of packed RGB (as Pillow and imaging do); it reads 4-byte
// pixels as they come from the decoder, so RGBA is never repacked to RGB
// first.
//
// It adds its time to t.timings (Normalize: the normalizer's calls, Resize:
// the rest) and returns the total.
func (t *Transformer) resizeNormalize(src pixels, g Geometry, out []byte) time.Duration {
	start := time.Now()
	norm := t.resample(src, g, out)
	total := time.Since(start)
	t.timings.Normalize += norm
	t.timings.Resize += total - norm
	return total
}

// resample is resizeNormalize's work; it returns the time spent in the
// normalizer.
func (t *Transformer) resample(src pixels, g Geometry, out []byte) (norm time.Duration) {
	start := time.Now()
	t.norm.sums = contentSums{}
	t.norm.fillPadding(out, g)
	norm = time.Since(start)
	writeRow := func(y int, row []byte) {
		t0 := time.Now()
		t.norm.writeRow(out, g.PadY+y, g.PadX, row)
		norm += time.Since(t0)
	}
	rowLen := 3 * g.NewW
	t.row = resize(t.row, rowLen)
	scaleX, scaleY := g.NewW != src.w, g.NewH != src.h
	if scaleX {
		t.horizontal.prepare(src.w, g.NewW)
	}

	if !scaleY {
		for y := range src.h {
			writeRow(y, t.horizontalRow(t.row, src, y, scaleX))
		}
		return norm
	}

	pix, stride := src.pix, src.stride
	if scaleX || src.bpp != 3 || src.ycc != nil {
		t.inter = resize(t.inter, rowLen*src.h)
		for y := range src.h {
			t.horizontalRow(t.inter[y*rowLen:(y+1)*rowLen], src, y, scaleX)
		}
		pix, stride = t.inter, rowLen
	}
	t.vertical.prepare(src.h, g.NewH)
	t.acc = resize(t.acc, rowLen)
	for y := range g.NewH {
		t.vertical.resampleColumn(t.row, t.acc, pix, stride, y)
		writeRow(y, t.row)
	}
	return norm
}

// horizontalRow returns source row y as packed RGB of the new width:
// resampled into dst when scaleX, else the source bytes themselves
// (packed RGB) or their R, G, B repacked or converted into dst.
func (t *Transformer) horizontalRow(dst []byte, src pixels, y int, scaleX bool) []byte {
	if m := src.ycc; m != nil {
		// Chroma row: y/2 for 4:2:0, y for 4:2:2.
		c := y * m.CStride
		if m.SubsampleRatio == image.YCbCrSubsampleRatio420 {
			c = (y >> 1) * m.CStride
		}
		luma := m.Y[y*m.YStride : y*m.YStride+src.w]
		if !scaleX {
			convertYCbCrRow2(dst, luma, m.Cb[c:], m.Cr[c:])
			return dst
		}
		t.srcRow = resize(t.srcRow, 3*src.w)
		convertYCbCrRow2(t.srcRow, luma, m.Cb[c:], m.Cr[c:])
		t.horizontal.resampleRow(dst, t.srcRow, 3)
		return dst
	}
	row := src.pix[y*src.stride:]
	switch {
	case scaleX:
		t.horizontal.resampleRow(dst, row, src.bpp)
		return dst
	case src.bpp == 3:
		return row[:len(dst)]
	}
	row = row[:4*src.w]
	for i, j := 0, 0; i < len(dst); i, j = i+3, j+4 {
		dst[i], dst[i+1], dst[i+2] = row[j], row[j+1], row[j+2]
	}
	return dst
}
