package transforms

import (
	"fmt"
	"image"
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
	acc      []int32

	horizontal, vertical axisWeights // cached for the last source/target sizes
}

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
	hdr, err := readHeader(encoded, t.maxPixels)
	if err != nil {
		return Geometry{}, err
	}
	w, h := hdr.displayedSize()
	g, err := planGeometry(t.spec, w, h)
	if err != nil {
		return Geometry{}, err
	}
	pix, err := t.decodePixels(encoded, hdr)
	if err != nil {
		return Geometry{}, err
	}
	t.resizeNormalize(pix, 3*w, g, out)
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
	t.resizeNormalize(pix, stride, g, out)
	return g, nil
}

func (t *Transformer) checkOut(out []byte) error {
	if len(out) != t.spec.OutputBytes() {
		return fmt.Errorf("transforms: output buffer is %d bytes, spec needs %d", len(out), t.spec.OutputBytes())
	}
	return nil
}

// decodePixels decodes the image described by hdr into packed RGB in
// displayed orientation (3 * width bytes per row) and returns it; the slice
// belongs to t and is valid until the next call.
func (t *Transformer) decodePixels(encoded []byte, hdr imageHeader) ([]byte, error) {
	img, err := callDecoder(hdr.format.decode, encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: %s data: %w", ErrDecode, hdr.format.name, err)
	}
	// The decoded image must lie inside the size the header announced: we
	// checked and sized everything by it. A GIF's first frame may be
	// smaller than its logical screen; the rest of the screen is black,
	// the color of a transparent GIF pixel after dropping alpha.
	canvas := image.Rect(0, 0, hdr.storedW, hdr.storedH)
	b := img.Bounds()
	if !b.In(canvas) {
		return nil, fmt.Errorf("%w: %s: decoded bounds %v outside header size %dx%d",
			ErrDecode, hdr.format.name, b, hdr.storedW, hdr.storedH)
	}
	n := 3 * hdr.storedW * hdr.storedH
	t.decoded = resize(t.decoded, n)
	if b != canvas {
		clear(t.decoded)
	}
	convertToRGB(t.decoded, hdr.storedW, img)
	if hdr.orientation == 1 {
		return t.decoded, nil
	}
	t.oriented = resize(t.oriented, n)
	orient(t.oriented, t.decoded, hdr.storedW, hdr.storedH, hdr.orientation)
	return t.oriented, nil
}

// resizeNormalize resamples src (g.SrcW x g.SrcH packed RGB at the given row
// stride) to g.NewW x g.NewH and writes it normalized into the image
// rectangle of out, and the pad value around it. Passes whose axis keeps its
// size are skipped, so an unscaled image is copied exactly. The horizontal
// pass runs first, into an 8-bit intermediate (as Pillow and imaging do).
func (t *Transformer) resizeNormalize(src []byte, stride int, g Geometry, out []byte) {
	t.norm.fillPadding(out, g)
	rowLen := 3 * g.NewW
	t.row = resize(t.row, rowLen)
	scaleX, scaleY := g.NewW != g.SrcW, g.NewH != g.SrcH

	if scaleX {
		t.horizontal.prepare(g.SrcW, g.NewW)
		if !scaleY {
			for y := range g.SrcH {
				t.horizontal.resampleRow(t.row, src[y*stride:])
				t.norm.writeRow(out, g.PadY+y, g.PadX, t.row)
			}
			return
		}
		t.inter = resize(t.inter, rowLen*g.SrcH)
		for y := range g.SrcH {
			t.horizontal.resampleRow(t.inter[y*rowLen:(y+1)*rowLen], src[y*stride:])
		}
		src, stride = t.inter, rowLen
	}

	if scaleY {
		t.vertical.prepare(g.SrcH, g.NewH)
		t.acc = resize(t.acc, rowLen)
		for y := range g.NewH {
			t.vertical.resampleColumn(t.row, t.acc, src, stride, y)
			t.norm.writeRow(out, g.PadY+y, g.PadX, t.row)
		}
		return
	}

	for y := range g.NewH {
		t.norm.writeRow(out, g.PadY+y, g.PadX, src[y*stride:y*stride+rowLen])
	}
}
