package transforms

import (
	"encoding/binary"
	"fmt"
)

// decodeGIF is decodeStd for GIF after gifDataCanHold: image/gif sizes the
// first frame's paletted image from its descriptor before reading any LZW
// data.
func (t *Transformer) decodeGIF(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	if !gifDataCanHold(data) {
		return pixels{}, fmt.Errorf("%w: gif: the file is too short for the frame size it declares", ErrDecode)
	}
	return t.decodeStd(data, hdr, g)
}

// gifMaxPixelsPerByte bounds LZW's expansion: a code is at least 3 bits
// (minimum code size 2, plus one) and stands for at most 4096 pixels (the
// longest string a 12-bit table can hold), so one byte of image data
// decodes to at most 4096*8/3 < 10923 pixels.
const gifMaxPixelsPerByte = 10923

// gifDataCanHold reports whether a GIF is long enough for the first
// frame's declared size at LZW's largest expansion. Without it a 29-byte
// file made image/gif allocate 61 MiB before failing on the missing data.
// It walks the blocks before the first image descriptor (extensions are
// sub-block chains); anything it cannot walk is left to image/gif.
//
//	header(6) screen: w(2) h(2) flags(1) bg(1) aspect(1) [global table]
//	image descriptor: 0x2C x(2) y(2) w(2) h(2) flags(1)
func gifDataCanHold(data []byte) bool {
	if len(data) < 13 {
		return true
	}
	i := 13
	if flags := data[10]; flags&0x80 != 0 {
		i += 3 << (flags&7 + 1)
	}
	for i < len(data) {
		switch data[i] {
		case 0x21: // extension: label, then sub-blocks up to a zero length
			i += 2
			for i < len(data) && data[i] != 0 {
				i += 1 + int(data[i])
			}
			i++
		case 0x2C:
			if i+10 > len(data) {
				return true
			}
			le := binary.LittleEndian
			w, h := uint64(le.Uint16(data[i+5:])), uint64(le.Uint16(data[i+7:]))
			return w*h <= uint64(len(data)-i)*gifMaxPixelsPerByte
		default:
			return true
		}
	}
	return true
}
