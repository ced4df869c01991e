package transforms

import (
	"encoding/binary"
	"fmt"
)

// decodeBMP is decodeStd for BMP after bmpDataCanHold: golang.org/x/image/bmp
// allocates the whole image from the header's size before it reads a pixel.
func (t *Transformer) decodeBMP(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	if !bmpDataCanHold(data) {
		return pixels{}, fmt.Errorf("%w: bmp: a %dx%d image does not fit in %d bytes", ErrDecode, hdr.storedW, hdr.storedH, len(data))
	}
	return t.decodeStd(data, hdr, g)
}

// bmpDataCanHold reports whether an uncompressed BMP (compression BI_RGB or
// BI_BITFIELDS, the only ones golang.org/x/image/bmp reads) is long enough
// for the pixel rows its header declares: pixel offset + rows of
// ceil(width*bpp/32)*4 bytes. Without it a 54-byte header declaring
// 8000x8000 made Apply allocate 244 MiB before failing on the missing rows.
// Anything it cannot read is left to the decoder, which refuses it.
func bmpDataCanHold(data []byte) bool {
	const infoEnd = 34 // through the compression field of BITMAPINFOHEADER
	if len(data) < infoEnd {
		return true
	}
	le := binary.LittleEndian
	offset := uint64(le.Uint32(data[10:]))
	w, h := int64(int32(le.Uint32(data[18:]))), int64(int32(le.Uint32(data[22:])))
	bpp, compression := uint64(le.Uint16(data[28:])), le.Uint32(data[30:])
	if compression != 0 && compression != 3 || w <= 0 || h == 0 || w > MaxSourceSide || h < -MaxSourceSide || h > MaxSourceSide {
		return true
	}
	row := (uint64(w)*bpp + 31) / 32 * 4
	return offset+row*uint64(max(h, -h)) <= uint64(len(data))
}
