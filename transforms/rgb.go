package transforms

import (
	"image"
	"image/color"

	"warehouse-etl/transforms/internal/simd"
)

// convertToRGB writes the straight (non-premultiplied) 8-bit R, G, B of every
// pixel of img into dst, packed RGB with row stride 3*canvasW, at the
// pixel's own coordinates: img.Bounds() must lie inside the canvas
// (0,0)-(canvasW, len(dst)/(3*canvasW)). Pixels of the canvas outside the
// bounds are left untouched. Alpha is dropped:
//
//   - straight-alpha images (NRGBA, NRGBA64, paletted with NRGBA entries):
//     the stored color channels as they are, whatever the alpha;
//   - premultiplied images (RGBA, RGBA64): un-premultiplied exactly as
//     color.NRGBAModel does, so a fully transparent pixel is black;
//   - 16-bit channels: the high byte;
//   - YCbCr: the integer formula of color.YCbCrToRGB, i.e. what
//     image/jpeg's callers get from draw or YCbCrToRGB (the 16-bit
//     color.YCbCr.RGBA method rounds differently; it is not used).
//
// The common types have loops without interface calls; others go through
// At(), which allocates per pixel but only serves rare formats (CMYK JPEG,
// alpha-only TIFF).
func convertToRGB(dst []byte, canvasW int, img image.Image) {
	b := img.Bounds()
	stride := 3 * canvasW
	switch m := img.(type) {
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+4 {
				d[i], d[i+1], d[i+2] = s[j], s[j+1], s[j+2]
			}
		}
	case *image.NRGBA64:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+8 {
				d[i], d[i+1], d[i+2] = s[j], s[j+2], s[j+4] // big-endian: high byte first
			}
		}
	case *image.RGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+4 {
				a := s[j+3]
				if a == 0xff {
					d[i], d[i+1], d[i+2] = s[j], s[j+1], s[j+2]
					continue
				}
				a16 := uint32(a) * 0x101
				d[i] = unpremultiply(uint32(s[j])*0x101, a16)
				d[i+1] = unpremultiply(uint32(s[j+1])*0x101, a16)
				d[i+2] = unpremultiply(uint32(s[j+2])*0x101, a16)
			}
		}
	case *image.RGBA64:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+8 {
				a := uint32(s[j+6])<<8 | uint32(s[j+7])
				d[i] = unpremultiply(uint32(s[j])<<8|uint32(s[j+1]), a)
				d[i+1] = unpremultiply(uint32(s[j+2])<<8|uint32(s[j+3]), a)
				d[i+2] = unpremultiply(uint32(s[j+4])<<8|uint32(s[j+5]), a)
			}
		}
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+1 {
				v := s[j]
				d[i], d[i+1], d[i+2] = v, v, v
			}
		}
	case *image.Gray16:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+2 {
				v := s[j]
				d[i], d[i+1], d[i+2] = v, v, v
			}
		}
	case *image.Paletted:
		// Indices beyond the palette (possible in some files) read black.
		var lut [256][3]uint8
		for k, c := range m.Palette {
			if k == len(lut) {
				break
			}
			lut[k][0], lut[k][1], lut[k][2] = straightRGB(c)
		}
		for y := b.Min.Y; y < b.Max.Y; y++ {
			s := m.Pix[m.PixOffset(b.Min.X, y):]
			d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
			for i, j := 0, 0; i < len(d); i, j = i+3, j+1 {
				p := &lut[s[j]]
				d[i], d[i+1], d[i+2] = p[0], p[1], p[2]
			}
		}
	case *image.YCbCr:
		if !convertYCbCr(dst, stride, m) {
			convertGeneric(dst, stride, img)
		}
	case *image.NYCbCrA:
		if !convertYCbCr(dst, stride, &m.YCbCr) {
			convertGeneric(dst, stride, img)
		}
	default:
		convertGeneric(dst, stride, img)
	}
}

// convertGeneric is the slow path through At() for image types without a
// dedicated loop.
func convertGeneric(dst []byte, stride int, img image.Image) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			i := y*stride + 3*x
			dst[i], dst[i+1], dst[i+2] = straightRGB(img.At(x, y))
		}
	}
}

// convertYCbCr converts with the chroma subsampling of m; it reports false
// for a subsample ratio it does not know. Coordinates are non-negative (the
// image lies inside the canvas), so x/2 is x>>1 as in (*image.YCbCr).COffset.
func convertYCbCr(dst []byte, stride int, m *image.YCbCr) bool {
	var xs, ys uint // chroma subsampling shifts
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
		xs, ys = 0, 0
	case image.YCbCrSubsampleRatio422:
		xs, ys = 1, 0
	case image.YCbCrSubsampleRatio420:
		xs, ys = 1, 1
	case image.YCbCrSubsampleRatio440:
		xs, ys = 0, 1
	case image.YCbCrSubsampleRatio411:
		xs, ys = 2, 0
	case image.YCbCrSubsampleRatio410:
		xs, ys = 2, 1
	default:
		return false
	}
	b := m.Bounds()
	r := m.Rect
	if xs == 0 && ys == 0 && r.Min == (image.Point{}) {
		// 4:4:4 at the origin (jpegdec's scaled output): whole rows.
		w := r.Max.X
		for y := range r.Max.Y {
			yrow := m.Y[y*m.YStride : y*m.YStride+w]
			cb := m.Cb[y*m.CStride : y*m.CStride+w]
			cr := m.Cr[y*m.CStride : y*m.CStride+w]
			convertYCbCrRow1(dst[y*stride:y*stride+3*w], yrow, cb, cr)
		}
		return true
	}
	if xs == 1 && r.Min == (image.Point{}) {
		// 4:2:0 and 4:2:2 as image/jpeg returns them (origin 0,0): one
		// chroma sample per pixel pair, see convertYCbCrRow2.
		for y := range r.Max.Y {
			c := (y >> ys) * m.CStride
			convertYCbCrRow2(dst[y*stride:y*stride+3*r.Max.X], m.Y[y*m.YStride:y*m.YStride+r.Max.X], m.Cb[c:], m.Cr[c:])
		}
		return true
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		yi := (y-r.Min.Y)*m.YStride + (b.Min.X - r.Min.X)
		cBase := ((y>>ys)-(r.Min.Y>>ys))*m.CStride - (r.Min.X >> xs)
		d := dst[y*stride+3*b.Min.X : y*stride+3*b.Max.X]
		for x := b.Min.X; x < b.Max.X; x++ {
			ci := cBase + (x >> xs)
			i := 3 * (x - b.Min.X)
			d[i], d[i+1], d[i+2] = ycbcrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			yi++
		}
	}
	return true
}

// convertYCbCrRow2 converts one row whose chroma is subsampled 2:1
// horizontally: luma yrow, chroma samples cb and cr from the row's start.
// It is ycbcrToRGB with the products looked up (ycbcrTab), the chroma
// ones once per pixel pair: the same integers, so the same bytes (tested
// against color.YCbCrToRGB).
func convertYCbCrRow2(dst, yrow, cb, cr []byte) {
	t := &ycbcrTab
	x, ci := 0, 0
	for ; x+1 < len(yrow); x, ci = x+2, ci+1 {
		c, r := cb[ci], cr[ci]
		rc, gc, bc := t.rCr[r], t.gCb[c]+t.gCr[r], t.bCb[c]
		y0, y1 := t.y[yrow[x]], t.y[yrow[x+1]]
		d := dst[3*x : 3*x+6 : 3*x+6]
		d[0] = t.clamp[uint32(y0+rc)>>16&1023]
		d[1] = t.clamp[uint32(y0+gc)>>16&1023]
		d[2] = t.clamp[uint32(y0+bc)>>16&1023]
		d[3] = t.clamp[uint32(y1+rc)>>16&1023]
		d[4] = t.clamp[uint32(y1+gc)>>16&1023]
		d[5] = t.clamp[uint32(y1+bc)>>16&1023]
	}
	if x < len(yrow) {
		dst[3*x], dst[3*x+1], dst[3*x+2] = ycbcrToRGB(yrow[x], cb[ci], cr[ci])
	}
}

// convertYCbCrRow1 converts one row with a chroma sample per pixel (jpegdec's
// scaled output): ycbcrToRGB's integers, 16 pixels a step with AVX2 where
// the CPU has it (transforms/internal/simd), the rest with the products
// and the clamping looked up (ycbcrTab); the same bytes either way.
func convertYCbCrRow1(dst, yrow, cb, cr []byte) {
	cb, cr, dst = cb[:len(yrow)], cr[:len(yrow)], dst[:3*len(yrow)]
	n := simd.YCbCrRows16(dst, yrow, cb, cr)
	convertYCbCrRow1Go(dst[3*n:], yrow[n:], cb[n:], cr[n:])
}

// convertYCbCrRow1Go is convertYCbCrRow1 without SIMD (the rest of a row
// after simd.YCbCrRows16, or all of it).
func convertYCbCrRow1Go(dst, yrow, cb, cr []byte) {
	cb, cr = cb[:len(yrow)], cr[:len(yrow)]
	t := &ycbcrTab
	for x, yv := range yrow {
		c, r := cb[x], cr[x]
		y1 := t.y[yv]
		d := dst[3*x : 3*x+3 : 3*x+3]
		d[0] = t.clamp[uint32(y1+t.rCr[r])>>16&1023]
		d[1] = t.clamp[uint32(y1+t.gCb[c]+t.gCr[r])>>16&1023]
		d[2] = t.clamp[uint32(y1+t.bCb[c])>>16&1023]
	}
}

// ycbcrTab holds ycbcrToRGB's products by input byte. Its sums plus
// biasRGB are non-negative below 2^26, so (sum>>16)&1023 indexes clamp,
// which maps them back to 0..255 as clampShift16 does.
var ycbcrTab = func() (t struct {
	y, rCr, gCb, gCr, bCb [256]int32
	clamp                 [1024]uint8
}) {
	for i := range 256 {
		v := int32(i) - 128
		t.y[i] = int32(i)*0x10101 + biasRGB
		t.rCr[i], t.gCb[i], t.gCr[i], t.bCb[i] = 91881*v, -22554*v, -46802*v, 116130*v
	}
	for i := range t.clamp {
		t.clamp[i] = clamp8(int32(i-biasRGB>>16) << 16)
	}
	return t
}()

// biasRGB lifts ycbcrToRGB's sums (down to -226*2^16) above zero.
const biasRGB = 256 << 16

// ycbcrToRGB is color.YCbCrToRGB, written out so the compiler inlines it into
// the pixel loop; an exhaustive test keeps the two identical.
func ycbcrToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy1 := int32(y) * 0x10101
	cb1 := int32(cb) - 128
	cr1 := int32(cr) - 128
	return clampShift16(yy1 + 91881*cr1),
		clampShift16(yy1 - 22554*cb1 - 46802*cr1),
		clampShift16(yy1 + 116130*cb1)
}

// clamp8 is clampShift16 without a branch (conditional moves): in the
// pixel loops saturated values are common enough to make a branch
// mispredict.
func clamp8(v int32) uint8 {
	return uint8(min(max(v>>16, 0), 255))
}

// clampShift16 is v>>16 clamped to 0..255.
func clampShift16(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}

// straightRGB is the straight 8-bit color of c by the rules of convertToRGB.
func straightRGB(c color.Color) (r, g, b uint8) {
	switch c := c.(type) {
	case color.NRGBA:
		return c.R, c.G, c.B
	case color.NRGBA64:
		return uint8(c.R >> 8), uint8(c.G >> 8), uint8(c.B >> 8)
	case color.Gray:
		return c.Y, c.Y, c.Y
	case color.Gray16:
		return uint8(c.Y >> 8), uint8(c.Y >> 8), uint8(c.Y >> 8)
	case color.YCbCr:
		return ycbcrToRGB(c.Y, c.Cb, c.Cr)
	case color.NYCbCrA:
		return ycbcrToRGB(c.Y, c.Cb, c.Cr)
	}
	r16, g16, b16, a16 := c.RGBA()
	return unpremultiply(r16, a16), unpremultiply(g16, a16), unpremultiply(b16, a16)
}

// unpremultiply turns a 16-bit premultiplied channel into the straight 8-bit
// value with color.NRGBAModel's formula (exhaustively tested against it).
func unpremultiply(v, a uint32) uint8 {
	switch a {
	case 0xffff:
		return uint8(v >> 8)
	case 0:
		return 0
	}
	return uint8((v * 0xffff / a) >> 8)
}
