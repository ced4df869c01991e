//go:build !turbojpeg

package transforms

import (
	"errors"
	"fmt"
	"image"

	"warehouse-etl/transforms/jpegdec"
)

// decodeJPEG decodes with this module's own decoder (transforms/jpegdec) in
// the default, pure-Go build, shrinking in the DCT domain by the same rule
// as the turbojpeg build (dctScaleDenom), then applies the EXIF
// orientation. Streams jpegdec leaves alone (progressive, arithmetic,
// 12-bit, CMYK/YCCK: jpegdec.ErrUnsupported) go to image/jpeg at full size
// and are counted in Counts.JPEGFallback.
//
// At 1/1, 4:2:0 and 4:2:2 planes in stored orientation reach the resampler
// as they are (pixels.ycc), converted to RGB one row at a time with
// image/jpeg's replicated chroma; scaled, jpegdec returns chroma at the
// luma resolution (FancyScaled: 4:2:0 chroma decoded at twice the luma's
// DCT scale, other subsamplings triangle-interpolated; replicating a
// chroma sample that covers 2x2 output-sized pixels doubled the error
// against OpenCV, TestJPEGMatchesOpenCVArea). Everything else is
// converted to packed RGB at the decoded size first, as decodeStd does.
func (t *Transformer) decodeJPEG(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	if !jpegDataCanHold(data) {
		return pixels{}, fmt.Errorf("%w: %w", ErrDecode, errJPEGShortScan)
	}
	nw, nh := g.NewW, g.NewH
	if hdr.orientation >= 5 {
		nw, nh = nh, nw
	}
	k := dctScaleDenom(hdr.storedW, hdr.storedH, nw, nh)
	d := &t.jpeg.dec
	d.MaxPixels = t.maxPixels
	d.FancyScaled = true
	m, err := d.Decode(data, k)
	switch {
	case errors.Is(err, jpegdec.ErrUnsupported):
		t.counts.JPEGFallback++
		return t.decodeStd(data, hdr, g)
	case err != nil:
		return pixels{}, fmt.Errorf("%w: jpeg data: %w", ErrDecode, err)
	case m.Width != hdr.storedW || m.Height != hdr.storedH:
		return pixels{}, fmt.Errorf("%w: jpeg: frame is %dx%d, the header said %dx%d",
			ErrDecode, m.Width, m.Height, hdr.storedW, hdr.storedH)
	}
	var img image.Image
	switch m.Color {
	case jpegdec.ColorGray:
		img = &m.Gray
	case jpegdec.ColorYCbCr:
		y := &m.YCbCr
		if r := y.SubsampleRatio; hdr.orientation == 1 &&
			(r == image.YCbCrSubsampleRatio420 || r == image.YCbCrSubsampleRatio422) {
			return pixels{w: y.Rect.Dx(), h: y.Rect.Dy(), bpp: 3, ycc: y}, nil
		}
		img = y
	}
	sw, sh := m.YCbCr.Rect.Dx(), m.YCbCr.Rect.Dy()
	if m.Color == jpegdec.ColorGray {
		sw, sh = m.Gray.Rect.Dx(), m.Gray.Rect.Dy()
	}
	t.decoded = resize(t.decoded, 3*sw*sh)
	if img != nil {
		convertToRGB(t.decoded, sw, img)
	} else {
		planesToRGB(t.decoded, &m.YCbCr)
	}
	return t.orientRGB(t.decoded, sw, sh, hdr.orientation), nil
}

// planesToRGB packs planes that hold R, G, B (an Adobe transform-0 JPEG)
// into dst, the second and third planes sampled as chroma: what
// image/jpeg returns for such files as *image.RGBA.
func planesToRGB(dst []byte, m *image.YCbCr) {
	b := m.Rect
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := m.COffset(x, y)
			dst[i], dst[i+1], dst[i+2] = m.Y[m.YOffset(x, y)], m.Cb[c], m.Cr[c]
			i += 3
		}
	}
}

// jpegIdentity is what DecoderIdentity adds for the JPEG decoder: jpegdec's
// version and settings, and the streams it leaves to image/jpeg (whose
// pixels TestStdDecoderCanary pins, as no Go version is in the identity).
var jpegIdentity = " jpeg=transforms/jpegdec/" + jpegdec.Version +
	"(islow=image/jpeg-loeffler,reduced-idct=jidctred,chroma=1/1:replicate,scaled:420-at-2x-dct-scale-else-triangle," +
	"dct-scale=largest-of-1/2,1/4,1/8-with-src>=k*new-both-axes," +
	"fallback=image/jpeg:progressive,arithmetic,12-bit,cmyk,ycck)"

// TurboJPEGVersion is the libjpeg-turbo release linked into this binary, ""
// in the pure-Go build.
func TurboJPEGVersion() string { return "" }

// jpegState is the per-Transformer JPEG decoder with its reusable planes.
type jpegState struct {
	dec jpegdec.Decoder
}

// dropScratch lets go of the decoder's planes.
func (s *jpegState) dropScratch() { s.dec = jpegdec.Decoder{} }
