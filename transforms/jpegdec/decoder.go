// Package jpegdec decodes sequential 8-bit Huffman JPEG (SOF0 baseline and
// SOF1 extended) into planar Y, Cb, Cr (or gray) samples, optionally scaled
// down by 2, 4 or 8 in the DCT domain. It exists for speed: the warehouse
// build shrinks most images several times, and an inverse DCT that emits
// 4x4, 2x2 or 1x1 pixels per block does a fraction of the work of decoding
// at full size and resampling afterwards.
//
// At scale 1/1 the samples equal image/jpeg's exactly: the parser accepts
// and rejects what image/jpeg does for the streams it decodes, the inverse
// DCT is image/jpeg's integer Loeffler IDCT (Go 1.25+), and the planes have
// image/jpeg's layout and subsampling ratios, so a caller that converts them
// with color.YCbCrToRGB's integers gets image/jpeg's colors. The scaled
// IDCTs follow the jidctred.c family of libjpeg (LL&M reduced to 4, 2 and 1
// outputs). Everything is integer arithmetic with Go's defined wraparound,
// so output does not depend on the CPU.
//
// Streams this package does not decode are reported with an error wrapping
// ErrUnsupported, for the caller to hand to a general decoder: progressive
// (SOF2), lossless, hierarchical and arithmetic-coded frames, 12-bit
// samples, 2- and 4-component (CMYK, YCCK) images, a zero height (DNL) or
// width, and Huffman tables whose code lengths are over-subscribed.
//
// A Decoder keeps its sample planes between calls, so a worker decoding many
// images allocates nothing per image once the planes have grown to the
// largest size seen. Sizes are checked before any allocation.
package jpegdec

import (
	"errors"
	"fmt"
	"image"
)

var (
	// ErrUnsupported is wrapped by errors for valid-looking streams this
	// package leaves to a general decoder (see the package comment).
	ErrUnsupported = errors.New("jpegdec: unsupported JPEG")
	// ErrFormat is wrapped by errors for streams that are not valid JPEG:
	// the ones image/jpeg rejects too.
	ErrFormat = errors.New("jpegdec: invalid JPEG")
	// ErrTooLarge is returned when the frame exceeds the Decoder's MaxPixels.
	ErrTooLarge = errors.New("jpegdec: image too large")
	// errShortData: the stream ends (or a marker comes) before the entropy
	// coded data the frame needs.
	errShortData = formatError("short Huffman data")
)

func formatError(msg string) error { return fmt.Errorf("%w: %s", ErrFormat, msg) }

func unsupported(msg string) error { return fmt.Errorf("%w: %s", ErrUnsupported, msg) }

// Markers, Table B.1.
const (
	markerSOF0  = 0xC0 // baseline sequential, Huffman
	markerSOF1  = 0xC1 // extended sequential, Huffman
	markerSOF2  = 0xC2 // progressive, Huffman
	markerDHT   = 0xC4
	markerJPG   = 0xC8
	markerDAC   = 0xCC
	markerRST0  = 0xD0
	markerRST7  = 0xD7
	markerSOI   = 0xD8
	markerEOI   = 0xD9
	markerSOS   = 0xDA
	markerDQT   = 0xDB
	markerDRI   = 0xDD
	markerAPP0  = 0xE0
	markerAPP14 = 0xEE
	markerAPP15 = 0xEF
	markerCOM   = 0xFE
)

const (
	maxComponents = 4
	maxTh         = 3 // Huffman table ids 0..3
	maxTq         = 3 // quantization table ids 0..3
	blockSize     = 64
)

// DefaultMaxPixels is the frame size limit of a Decoder whose MaxPixels is 0.
const DefaultMaxPixels = 1 << 26

// Color says how to turn the planes of an Image into RGB.
type Color int

const (
	// ColorGray: one plane, Y.
	ColorGray Color = iota
	// ColorYCbCr: JFIF YCbCr, to be converted with color.YCbCrToRGB.
	ColorYCbCr
	// ColorRGB: the three planes are R, G, B (Adobe APP14 transform 0, or
	// component ids 'R', 'G', 'B' without JFIF, as image/jpeg reads them);
	// the second and third planes use the chroma layout.
	ColorRGB
)

// Image is a decoded frame. Its planes belong to the Decoder and are valid
// until its next Decode.
type Image struct {
	// Width and Height are the full frame size from the SOF header.
	Width, Height int
	// Scale is the denominator the planes were decoded at (1, 2, 4, 8).
	Scale int
	Color Color
	// YCbCr holds the planes of ColorYCbCr and ColorRGB images: Rect is
	// (0,0)-(ceil(Width/Scale), ceil(Height/Scale)), SubsampleRatio the
	// frame's, Y/Cb/Cr padded to whole MCUs as image/jpeg pads them.
	YCbCr image.YCbCr
	// Gray holds the plane of ColorGray images, Rect as above.
	Gray image.Gray
}

// component is one frame component (B.2.2).
type component struct {
	id   uint8
	h, v int   // sampling factors
	tq   uint8 // quantization table
	// plane is this component's samples in the Decoder's buffer; stride is
	// its row length, scanned whether a scan has decoded it.
	plane   []byte
	stride  int
	scanned bool
	// scale is the denominator of this component's IDCT: the Decoder's,
	// or half of it for FancyScaled 4:2:0 chroma (see layoutPlanes).
	scale int
}

// Decoder decodes JPEG streams. The zero value is ready to use; it is not
// safe for concurrent use.
type Decoder struct {
	// MaxPixels bounds Width*Height of the frames it decodes (0:
	// DefaultMaxPixels); larger ones fail with ErrTooLarge before any
	// allocation.
	MaxPixels int
	// FancyScaled makes scaled decodes (1/2, 1/4, 1/8) of subsampled
	// frames return 4:4:4 planes, as libjpeg-turbo does: chroma that is
	// subsampled 2x on both axes (4:2:0) is decoded at twice the luma's
	// DCT scale, other subsamplings are interpolated with libjpeg's
	// triangle filter (upsampleChroma). At a reduced size a chroma sample
	// would otherwise cover several output pixels, and replicating it
	// shows. At 1/1 chroma is left as image/jpeg leaves it.
	FancyScaled bool

	data []byte
	pos  int

	width, height int
	nComp         int
	comp          [maxComponents]component
	baseline      bool
	sof           bool
	jfif          bool
	adobeValid    bool
	adobeXform    uint8
	ri            int    // restart interval in MCUs
	eobRun        uint16 // image/jpeg's EOB run, carried across blocks and scans
	scale         int
	mxx, myy      int // MCUs per row, rows of MCUs

	quant [maxTq + 1][blockSize]int32 // zig-zag order
	huff  [2][maxTh + 1]huffTable     // [0] DC, [1] AC

	planes    []byte // all component planes, grown as needed
	upsampled []byte // FancyScaled chroma planes
	img       Image
}

// Decode decodes data at 1/scale of its size (scale 1, 2, 4 or 8). Each
// plane's size is its full size divided by scale and rounded up, so the
// image is ceil(Width/scale) x ceil(Height/scale).
func (d *Decoder) Decode(data []byte, scale int) (*Image, error) {
	switch scale {
	case 1, 2, 4, 8:
	default:
		return nil, fmt.Errorf("jpegdec: scale 1/%d not one of 1/1, 1/2, 1/4, 1/8", scale)
	}
	d.reset(data, scale)
	if len(data) < 2 || data[0] != 0xFF || data[1] != markerSOI {
		return nil, formatError("missing SOI marker")
	}
	d.pos = 2
	for {
		// As image/jpeg: skip bytes up to a 0xFF, 0xFF00 and fill bytes.
		if d.pos+2 > len(data) {
			return nil, errEOF
		}
		a, b := data[d.pos], data[d.pos+1]
		d.pos += 2
		for a != 0xFF {
			if d.pos >= len(data) {
				return nil, errEOF
			}
			a, b = b, data[d.pos]
			d.pos++
		}
		marker := b
		if marker == 0 {
			continue
		}
		for marker == 0xFF {
			if d.pos >= len(data) {
				return nil, errEOF
			}
			marker = data[d.pos]
			d.pos++
		}
		if marker == markerEOI {
			break
		}
		if markerRST0 <= marker && marker <= markerRST7 {
			continue
		}
		if d.pos+2 > len(data) {
			return nil, errEOF
		}
		n := int(data[d.pos])<<8 | int(data[d.pos+1]) - 2
		d.pos += 2
		if n < 0 {
			return nil, formatError("short segment length")
		}
		var err error
		switch marker {
		case markerSOF0, markerSOF1:
			d.baseline = marker == markerSOF0
			err = d.processSOF(n)
		case markerSOF2:
			err = unsupported("progressive")
		case markerDHT:
			err = d.processDHT(n)
		case markerDQT:
			err = d.processDQT(n)
		case markerSOS:
			err = d.processSOS(n)
		case markerDRI:
			err = d.processDRI(n)
		case markerAPP0:
			err = d.processAPP0(n)
		case markerAPP14:
			err = d.processAPP14(n)
		default:
			switch {
			case markerAPP0 <= marker && marker <= markerAPP15 || marker == markerCOM:
				_, err = d.read(n)
			case marker < 0xC0:
				err = formatError("unknown marker")
			case marker <= 0xCF && marker != markerJPG && marker != markerDAC:
				err = unsupported(fmt.Sprintf("SOF%d frame", marker-markerSOF0))
			default:
				err = fmt.Errorf("%w: unknown marker 0x%02X", ErrFormat, marker)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if !d.sof || !d.planesReady() {
		return nil, formatError("missing SOS marker")
	}
	return d.finish(), nil
}

// errEOF is image/jpeg's io.ErrUnexpectedEOF.
var errEOF = formatError("unexpected EOF")

func (d *Decoder) reset(data []byte, scale int) {
	d.data, d.pos = data, 0
	d.width, d.height, d.nComp = 0, 0, 0
	d.baseline, d.sof, d.jfif, d.adobeValid, d.adobeXform = false, false, false, false, 0
	d.ri, d.eobRun, d.scale = 0, 0, scale
	d.mxx, d.myy = 0, 0
	d.comp = [maxComponents]component{}
	d.quant = [maxTq + 1][blockSize]int32{}
	for i := range d.huff {
		for j := range d.huff[i] {
			d.huff[i][j].nCodes = 0
		}
	}
}

// read returns the next n bytes of the current segment.
func (d *Decoder) read(n int) ([]byte, error) {
	if n > len(d.data)-d.pos {
		return nil, errEOF
	}
	p := d.data[d.pos : d.pos+n]
	d.pos += n
	return p, nil
}

// processSOF reads a frame header (B.2.2) with image/jpeg's checks, then
// sizes the planes.
//
//	SOF := P(1) Y(2) X(2) Nf(1) { C(1) H<<4|V(1) Tq(1) } x Nf
func (d *Decoder) processSOF(n int) error {
	if d.sof {
		return formatError("multiple SOF markers")
	}
	switch n {
	case 6 + 3*1, 6 + 3*3:
		d.nComp = (n - 6) / 3
	case 6 + 3*4:
		return unsupported("4-component (CMYK/YCCK) frame")
	default:
		return unsupported("number of components")
	}
	p, err := d.read(n)
	if err != nil {
		return err
	}
	if p[0] != 8 {
		return unsupported(fmt.Sprintf("%d-bit precision", p[0]))
	}
	d.height = int(p[1])<<8 | int(p[2])
	d.width = int(p[3])<<8 | int(p[4])
	if int(p[5]) != d.nComp {
		return formatError("SOF has wrong length")
	}
	for i := 0; i < d.nComp; i++ {
		c := &d.comp[i]
		c.id = p[6+3*i]
		for j := 0; j < i; j++ {
			if c.id == d.comp[j].id {
				return formatError("repeated component identifier")
			}
		}
		c.tq = p[8+3*i]
		if c.tq > maxTq {
			return formatError("bad Tq value")
		}
		hv := p[7+3*i]
		h, v := int(hv>>4), int(hv&0x0f)
		if h < 1 || 4 < h || v < 1 || 4 < v {
			return formatError("luma/chroma subsampling ratio")
		}
		if h == 3 || v == 3 {
			return errSubsampling
		}
		if d.nComp == 1 {
			h, v = 1, 1
		} else {
			switch i {
			case 0:
				if v == 4 {
					return errSubsampling
				}
			case 1:
				if d.comp[0].h%h != 0 || d.comp[0].v%v != 0 {
					return errSubsampling
				}
			case 2:
				if d.comp[1].h != h || d.comp[1].v != v {
					return errSubsampling
				}
			}
		}
		c.h, c.v = h, v
	}
	d.sof = true
	if d.width == 0 || d.height == 0 {
		return unsupported(fmt.Sprintf("frame size %dx%d (DNL)", d.width, d.height))
	}
	maxPixels := d.MaxPixels
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	if int64(d.width)*int64(d.height) > int64(maxPixels) {
		return fmt.Errorf("%w: %dx%d exceeds %d pixels", ErrTooLarge, d.width, d.height, maxPixels)
	}
	return nil
}

// errSubsampling is image/jpeg's error for sampling factors it rejects
// (3, a luma v of 4, chroma factors that do not divide luma's, Cb != Cr).
var errSubsampling = fmt.Errorf("%w: unsupported luma/chroma subsampling ratio", ErrFormat)

// planesReady reports whether the planes were laid out (by the first SOS).
func (d *Decoder) planesReady() bool { return d.mxx > 0 }

// layoutPlanes lays out the component planes for the first scan, as
// image/jpeg's makeImg does at full size: component i has 8*h_i*mxx x
// 8*v_i*myy samples, MCUs sized by component 0's factors. At scale 1/k each
// block gives 8/k x 8/k samples.
func (d *Decoder) layoutPlanes() {
	h0, v0 := d.comp[0].h, d.comp[0].v
	d.mxx = (d.width + 8*h0 - 1) / (8 * h0)
	d.myy = (d.height + 8*v0 - 1) / (8 * v0)
	total := 0
	for i := 0; i < d.nComp; i++ {
		c := &d.comp[i]
		c.scale = d.scale
		if i > 0 && d.FancyScaled && d.scale > 1 && h0 == 2*c.h && v0 == 2*c.v {
			// 4:2:0-like chroma: a chroma block spans twice the
			// luma's extent, so decoding it at twice the luma's scale
			// gives chroma at the luma's resolution (libjpeg-turbo
			// does the same) instead of interpolating it.
			c.scale = d.scale / 2
		}
		bs := 8 / c.scale
		c.stride = bs * c.h * d.mxx
		total += c.stride * bs * c.v * d.myy
	}
	if cap(d.planes) < total {
		d.planes = make([]byte, total)
	}
	d.planes = d.planes[:total]
	off := 0
	for i := 0; i < d.nComp; i++ {
		c := &d.comp[i]
		n := c.stride * (8 / c.scale) * c.v * d.myy
		c.plane = d.planes[off : off+n : off+n]
		off += n
	}
}

// finish clears the planes of components no scan decoded (image/jpeg's are
// freshly allocated zeros) and describes the result.
func (d *Decoder) finish() *Image {
	for i := 0; i < d.nComp; i++ {
		if !d.comp[i].scanned {
			clear(d.comp[i].plane)
		}
	}
	k := d.scale
	r := image.Rect(0, 0, (d.width+k-1)/k, (d.height+k-1)/k)
	img := &d.img
	*img = Image{Width: d.width, Height: d.height, Scale: k}
	if d.nComp == 1 {
		img.Color = ColorGray
		img.Gray = image.Gray{Pix: d.comp[0].plane, Stride: d.comp[0].stride, Rect: r}
		return img
	}
	img.Color = ColorYCbCr
	if d.isRGB() {
		img.Color = ColorRGB
	}
	img.YCbCr = image.YCbCr{
		Y: d.comp[0].plane, Cb: d.comp[1].plane, Cr: d.comp[2].plane,
		YStride: d.comp[0].stride, CStride: d.comp[1].stride,
		SubsampleRatio: d.subsampleRatio(), Rect: r,
	}
	if d.comp[1].scale != k {
		img.YCbCr.SubsampleRatio = image.YCbCrSubsampleRatio444
	} else if d.FancyScaled && k > 1 {
		d.upsampleChroma(img)
	}
	return img
}

// subsampleRatio is image/jpeg's ratio of luma to chroma factors; the
// SOF checks leave only these six.
func (d *Decoder) subsampleRatio() image.YCbCrSubsampleRatio {
	switch (d.comp[0].h/d.comp[1].h)<<4 | d.comp[0].v/d.comp[1].v {
	case 0x12:
		return image.YCbCrSubsampleRatio440
	case 0x21:
		return image.YCbCrSubsampleRatio422
	case 0x22:
		return image.YCbCrSubsampleRatio420
	case 0x41:
		return image.YCbCrSubsampleRatio411
	case 0x42:
		return image.YCbCrSubsampleRatio410
	}
	return image.YCbCrSubsampleRatio444
}

// isRGB is image/jpeg's rule for 3-component frames stored as RGB.
func (d *Decoder) isRGB() bool {
	if d.jfif {
		return false
	}
	if d.adobeValid && d.adobeXform == 0 {
		return true
	}
	return d.comp[0].id == 'R' && d.comp[1].id == 'G' && d.comp[2].id == 'B'
}

// processDQT reads quantization tables (B.2.4.1), 8- or 16-bit.
func (d *Decoder) processDQT(n int) error {
loop:
	for n > 0 {
		n--
		p, err := d.read(1)
		if err != nil {
			return err
		}
		tq := p[0] & 0x0f
		if tq > maxTq {
			return formatError("bad Tq value")
		}
		switch p[0] >> 4 {
		default:
			return formatError("bad Pq value")
		case 0:
			if n < blockSize {
				break loop
			}
			n -= blockSize
			q, err := d.read(blockSize)
			if err != nil {
				return err
			}
			for i := range d.quant[tq] {
				d.quant[tq][i] = int32(q[i])
			}
		case 1:
			if n < 2*blockSize {
				break loop
			}
			n -= 2 * blockSize
			q, err := d.read(2 * blockSize)
			if err != nil {
				return err
			}
			for i := range d.quant[tq] {
				d.quant[tq][i] = int32(q[2*i])<<8 | int32(q[2*i+1])
			}
		}
	}
	if n != 0 {
		return formatError("DQT has wrong length")
	}
	return nil
}

func (d *Decoder) processDRI(n int) error {
	if n != 2 {
		return formatError("DRI has wrong length")
	}
	p, err := d.read(2)
	if err != nil {
		return err
	}
	d.ri = int(p[0])<<8 | int(p[1])
	return nil
}

func (d *Decoder) processAPP0(n int) error {
	p, err := d.read(n)
	if err != nil {
		return err
	}
	if n >= 5 {
		d.jfif = string(p[:5]) == "JFIF\x00"
	}
	return nil
}

// processAPP14 reads the Adobe segment's color transform flag:
//
//	APP14 := "Adobe" version(2) flags0(2) flags1(2) transform(1) ...
func (d *Decoder) processAPP14(n int) error {
	p, err := d.read(n)
	if err != nil {
		return err
	}
	if n >= 12 && string(p[:5]) == "Adobe" {
		d.adobeValid, d.adobeXform = true, p[11]
	}
	return nil
}

// Version names this decoder's output: bump it with any change that can
// alter a decoded sample (the warehouse version recipe includes it).
const Version = "1"
