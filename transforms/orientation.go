package transforms

import (
	"bytes"
	"encoding/binary"
)

// JPEG markers the orientation scan needs.
const (
	markerSOI  = 0xD8 // start of image, no length
	markerEOI  = 0xD9 // end of image
	markerSOS  = 0xDA // start of scan: metadata segments all come before it
	markerAPP1 = 0xE1 // Exif (or XMP) application segment
	markerRST0 = 0xD0 // RST0..RST7 and TEM (0x01) have no length
	markerRST7 = 0xD7
	markerTEM  = 0x01
)

// EXIF/TIFF constants.
const (
	exifHeader     = "Exif\x00\x00"
	tiffHeaderLen  = 8  // byte order (2), magic 42 (2), IFD0 offset (4)
	ifdEntryLen    = 12 // tag (2), type (2), count (4), value or offset (4)
	tagOrientation = 0x0112
	typeShort      = 3
)

// jpegSegments calls visit with the marker and payload of every segment
// of a JPEG stream before its first SOS, in order, until visit returns
// false. It reports false when the stream is not well formed up to there
// (no SOI, a non-marker byte between segments, a segment running past the
// end). The orientation and size parsers share it.
//
//	segment := 0xFF marker(1) length(2, big-endian, includes itself) payload
func jpegSegments(data []byte, visit func(marker byte, payload []byte) bool) bool {
	if len(data) < 2 || data[0] != 0xFF || data[1] != markerSOI {
		return false
	}
	i := 2
	for i+1 < len(data) {
		if data[i] != 0xFF {
			return false
		}
		marker := data[i+1]
		switch {
		case marker == 0xFF: // fill byte before a marker
			i++
			continue
		case marker == markerSOI || marker == markerTEM || (marker >= markerRST0 && marker <= markerRST7):
			i += 2
			continue
		case marker == markerSOS || marker == markerEOI:
			return true
		}
		if i+4 > len(data) {
			return false
		}
		segLen := int(data[i+2])<<8 | int(data[i+3])
		if segLen < 2 || i+2+segLen > len(data) {
			return false
		}
		if !visit(marker, data[i+4:i+2+segLen]) {
			return true
		}
		i += 2 + segLen
	}
	return false
}

// jpegOrientation returns the EXIF orientation (1..8) of a JPEG stream: the
// Orientation tag of IFD0 in the first APP1 segment that starts with
// "Exif\0\0". Anything missing, out of bounds or out of range gives 1, the
// identity: a broken tag must not turn a readable image into an error.
//
//	APP1    := "Exif\0\0" TIFF
//	TIFF    := ("II" 42 as u16le | "MM" 42 as u16be) ifd0Offset(u32) ...
//	IFD     := count(u16) entry(12 bytes) x count nextIFD(u32)
func jpegOrientation(data []byte) int {
	o := 1
	jpegSegments(data, func(marker byte, payload []byte) bool {
		if marker == markerAPP1 && bytes.HasPrefix(payload, []byte(exifHeader)) {
			o = tiffOrientation(payload[len(exifHeader):])
			return false
		}
		return true
	})
	return o
}

// tiffOrientation reads the Orientation tag from IFD0 of a TIFF structure.
func tiffOrientation(t []byte) int {
	if len(t) < tiffHeaderLen {
		return 1
	}
	var order binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		order = binary.LittleEndian
	case "MM\x00*":
		order = binary.BigEndian
	default:
		return 1
	}
	off := uint64(order.Uint32(t[4:8]))
	if off < tiffHeaderLen || off+2 > uint64(len(t)) {
		return 1
	}
	count := int(order.Uint16(t[off:]))
	entries := t[off+2:]
	for k := 0; k < count; k++ {
		if (k+1)*ifdEntryLen > len(entries) {
			return 1
		}
		e := entries[k*ifdEntryLen : (k+1)*ifdEntryLen]
		if order.Uint16(e[0:2]) != tagOrientation {
			continue
		}
		// One SHORT fits in the value field, left-justified.
		if order.Uint16(e[2:4]) != typeShort || order.Uint32(e[4:8]) != 1 {
			return 1
		}
		v := int(order.Uint16(e[8:10]))
		if v < 1 || v > 8 {
			return 1
		}
		return v
	}
	return 1
}

// orient writes the displayed form of the packed RGB image src (w x h,
// stride 3w, stored with EXIF orientation o) into dst, which must hold
// 3*w*h bytes, and returns the displayed size. Orientations 5..8 swap the
// axes. With D the displayed and S the stored image:
//
//	1 D(x,y) = S(x, y)          identity
//	2 D(x,y) = S(w-1-x, y)      mirror left-right
//	3 D(x,y) = S(w-1-x, h-1-y)  rotate 180
//	4 D(x,y) = S(x, h-1-y)      mirror top-bottom
//	5 D(x,y) = S(y, x)          transpose
//	6 D(x,y) = S(y, h-1-x)      rotate 90 clockwise
//	7 D(x,y) = S(w-1-y, h-1-x)  transverse
//	8 D(x,y) = S(w-1-y, x)      rotate 90 counter-clockwise
//
// Each displayed row is a straight walk through S: a start index and a step.
func orient(dst, src []byte, w, h, o int) (dw, dh int) {
	dw, dh = w, h
	if o >= 5 {
		dw, dh = h, w
	}
	row := 3 * w
	for y := 0; y < dh; y++ {
		var base, step int
		switch o {
		case 2:
			base, step = y*row+3*(w-1), -3
		case 3:
			base, step = (h-1-y)*row+3*(w-1), -3
		case 4:
			base, step = (h-1-y)*row, 3
		case 5:
			base, step = 3*y, row
		case 6:
			base, step = (h-1)*row+3*y, -row
		case 7:
			base, step = (h-1)*row+3*(w-1-y), -row
		case 8:
			base, step = 3*(w-1-y), row
		default:
			base, step = y*row, 3
		}
		d := dst[y*3*dw : (y+1)*3*dw]
		for x := 0; x < dw; x++ {
			s := base + x*step
			copy(d[3*x:3*x+3], src[s:s+3])
		}
	}
	return dw, dh
}
