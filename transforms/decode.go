package transforms

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"
)

var (
	// ErrDecode is wrapped by every failure caused by the image bytes:
	// unknown format, corrupt or truncated data, a header beyond the size
	// limits, a raw frame too short for its declared size.
	ErrDecode = errors.New("transforms: cannot decode image")
	// ErrImageTooLarge is wrapped (together with ErrDecode when it comes
	// from image bytes) when a source exceeds MaxSourceSide or
	// MaxSourcePixels.
	ErrImageTooLarge = errors.New("transforms: image too large")
	// ErrSizeMismatch is returned in mode None when the source size differs
	// from the target size.
	ErrSizeMismatch = errors.New("transforms: source size differs from target size")
)

// imageFormat is one decoder. The table below is the only registry this
// package consults: image.Decode's global registry would let any package
// linked into the binary add or shadow a format and silently change output.
type imageFormat struct {
	name         string
	magic        string // '?' matches any byte
	decode       func(io.Reader) (image.Image, error)
	decodeConfig func(io.Reader) (image.Config, error)
	// decodePixels is the Transformer's way to this format's pixels:
	// decodeStd (through decode) or a faster path into reusable buffers.
	decodePixels func(t *Transformer, data []byte, hdr imageHeader, g Geometry) (pixels, error)
	// quickSize, when set, reads the stored size of common headers
	// without allocating; when it reports !ok, decodeConfig decides.
	quickSize func(data []byte) (w, h int, ok bool)
}

// Versions of the dependencies whose code decides output pixels. A test
// checks them against go.mod, so a dependency bump cannot forget them.
const (
	xImageVersion  = "v0.47.0"
	float16Version = "v0.8.4"
)

// pixelCodeVersion names this package's own pixel code: RGB conversion,
// orientation, resampler, normalization. Bump it with any change that can
// alter a single output byte.
const pixelCodeVersion = "1"

var imageFormats = [...]imageFormat{
	{"png", "\x89PNG\r\n\x1a\n", png.Decode, png.DecodeConfig, (*Transformer).decodePNG, pngQuickSize},
	{"jpeg", "\xff\xd8", jpeg.Decode, jpeg.DecodeConfig, (*Transformer).decodeJPEG, jpegQuickSize},
	{"gif", "GIF8?a", gif.Decode, gif.DecodeConfig, (*Transformer).decodeGIF, nil},
	{"bmp", "BM????\x00\x00\x00\x00", bmp.Decode, bmp.DecodeConfig, (*Transformer).decodeBMP, nil},
	{"tiff", "II*\x00", tiff.Decode, tiff.DecodeConfig, (*Transformer).decodeStd, nil},
	{"tiff", "MM\x00*", tiff.Decode, tiff.DecodeConfig, (*Transformer).decodeStd, nil},
	{"webp", "RIFF????WEBPVP8", webp.Decode, webp.DecodeConfig, (*Transformer).decodeStd, nil},
}

// DecoderIdentity names everything besides Spec that decides output pixels:
// golang.org/x/image, x448/float16, this package's own pixel code and the
// JPEG decoder (jpegdec with its version and settings, or the linked
// libjpeg-turbo). It goes into the warehouse version key, so a dependency
// upgrade makes a new version instead of mixing pixels of two decoders in
// one warehouse.
//
// The Go toolchain is not named: image/png and image/gif decode exactly by
// their specs, the common JPEGs are decoded by jpegdec (or libjpeg-turbo),
// and the pixel code is integer or explicitly rounded, so a Go upgrade
// alone gives the same bytes. What the standard decoders still decide (the
// JPEGs left to image/jpeg: progressive, CMYK) is pinned by
// TestStdDecoderCanary, which fails on an upgrade that changes a pixel and
// asks for a pixelCodeVersion bump.
func DecoderIdentity() string {
	return "transforms/" + pixelCodeVersion +
		" x/image=" + xImageVersion +
		" float16=" + float16Version +
		" formats=png,jpeg,gif,bmp,tiff,webp" +
		" rgb=straight-alpha,ycbcr-int,16bit-high-byte" +
		" orient=jpeg-exif" +
		" resample=triangle-antialias-q22" +
		" normalize=f64-f32-f16rne" +
		jpegIdentity
}

// sniffFormat finds the decoder whose magic matches the start of data.
func sniffFormat(data []byte) *imageFormat {
	for i := range imageFormats {
		f := &imageFormats[i]
		if len(data) < len(f.magic) {
			continue
		}
		match := true
		for j := 0; j < len(f.magic); j++ {
			if f.magic[j] != '?' && f.magic[j] != data[j] {
				match = false
				break
			}
		}
		if match {
			return f
		}
	}
	return nil
}

// imageHeader is what the cheap header parse learns about an image.
type imageHeader struct {
	format           *imageFormat
	storedW, storedH int // size as encoded
	orientation      int // EXIF orientation 1..8 (always 1 except for JPEG)
}

// displayedSize is the size after orientation: 5..8 swap the axes.
func (h imageHeader) displayedSize() (w, ht int) {
	if h.orientation >= 5 {
		return h.storedH, h.storedW
	}
	return h.storedW, h.storedH
}

// describe names the image in errors: format and stored size.
func (h imageHeader) describe() string {
	return fmt.Sprintf("%s %dx%d", h.format.name, h.storedW, h.storedH)
}

// readHeader sniffs the format, parses the header and checks the size
// limits, all without decoding pixels. Errors wrap ErrDecode.
func readHeader(data []byte, maxPixels int) (imageHeader, error) {
	f := sniffFormat(data)
	if f == nil {
		return imageHeader{}, fmt.Errorf("%w: unknown image format", ErrDecode)
	}
	w, ht, ok := 0, 0, false
	if f.quickSize != nil {
		w, ht, ok = f.quickSize(data)
	}
	if !ok {
		cfg, err := callDecoder(f.decodeConfig, data)
		if err != nil {
			return imageHeader{}, fmt.Errorf("%w: %s header: %w", ErrDecode, f.name, err)
		}
		w, ht = cfg.Width, cfg.Height
	}
	if err := checkSourceSize(w, ht, maxPixels); err != nil {
		return imageHeader{}, fmt.Errorf("%w: %s: %w", ErrDecode, f.name, err)
	}
	h := imageHeader{format: f, storedW: w, storedH: ht, orientation: 1}
	if f.name == "jpeg" {
		h.orientation = jpegOrientation(data)
	}
	return h, nil
}

// DecodeConfig reads only the header of an encoded image and returns its
// displayed size (EXIF orientation applied: a JPEG stored 640x480 with
// orientation 6 reports 480x640, the size its label boxes refer to) and the
// format name (png, jpeg, gif, bmp, tiff, webp). Errors wrap ErrDecode;
// sizes beyond the limits also wrap ErrImageTooLarge.
func DecodeConfig(encoded []byte) (w, h int, format string, err error) {
	hdr, err := readHeader(encoded, MaxSourcePixels)
	if err != nil {
		return 0, 0, "", err
	}
	w, h = hdr.displayedSize()
	return w, h, hdr.format.name, nil
}

// callDecoder runs a third-party decoder on data and turns a panic into an
// error. The decoders see untrusted bytes; a bug in one of them must become
// a decode_error for that sample, not take down a build of millions.
func callDecoder[T any](decode func(io.Reader) (T, error), data []byte) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, fmt.Errorf("decoder panic: %v", r)
		}
	}()
	return decode(bytes.NewReader(data))
}
