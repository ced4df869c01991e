package transforms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The fast PNG path: 8-bit RGB and RGBA, not interlaced, the capture
// tool's native format and what most encoders write for photos. It reads
// the chunks in place, inflates the image data with inflate.go straight into
// one reusable buffer and undoes the row filters in place; the resampler
// then reads the RGBA rows as they are (pixels.bpp 4). No image.Image, no
// conversion pass, no allocation once the buffers have grown.
//
// Every other PNG (palette, gray, 16-bit, interlaced, tRNS), and every file
// this path refuses for any reason, is decoded by image/png through
// decodeStd, so image/png stays the reference for what a PNG means: the
// fast path only ever accepts files image/png accepts, with the same pixels
// (FuzzPNG compares them).
//
//	file  := signature(8) chunk*
//	chunk := length(4, big-endian) type(4) data(length) crc32(type+data)(4)
//	IHDR  := width(4) height(4) depth(1) colorType(1) compression(1) filter(1) interlace(1)
//	image data = the zlib stream split over consecutive IDAT chunks
//	raw   := (filterType(1) row(width*bpp))*height

const pngSignature = "\x89PNG\r\n\x1a\n"

// PNG row filter types.
const (
	filterNone    = 0
	filterSub     = 1
	filterUp      = 2
	filterAverage = 3
	filterPaeth   = 4
)

// Why the fast path declined a file; decodePNG then asks image/png, whose
// answer (an image or its own error) is the one that counts.
var (
	errPNGUnsupported = errors.New("png: not on the fast path") // valid PNG of another kind, or a chunk layout left to image/png
	errPNGStructure   = errors.New("png: bad chunk structure")  // signature, length, CRC, order, missing IEND
	errPNGFilter      = errors.New("png: unknown row filter")
)

// pngDecoder is the fast path's reusable state, one per Transformer.
type pngDecoder struct {
	idat []byte // the zlib stream, IDAT payloads concatenated
	raw  []byte // inflated rows, each a filter byte and width*bpp bytes
	inf  inflater
}

// decodePNG decodes a PNG: the fast path when it applies, image/png
// otherwise.
func (t *Transformer) decodePNG(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	// Both decoders allocate the whole image before reading its data.
	if !pngDataCanHold(data) {
		return pixels{}, fmt.Errorf("%w: png: a %dx%d image cannot come from so few bytes of image data", ErrDecode, hdr.storedW, hdr.storedH)
	}
	p, err := t.png.decode(data)
	if err == nil && p.w == hdr.storedW && p.h == hdr.storedH {
		return p, nil
	}
	if !errors.Is(err, errPNGUnsupported) {
		// The fast path may have inflated rows it now gives up on: let
		// them go before image/png allocates its own image.
		t.png.raw = nil
	}
	return t.decodeStd(data, hdr, g)
}

// decode returns the image's pixels (rows of RGB or RGBA inside d.raw) or
// an error when the file is not on the fast path or is not valid.
func (d *pngDecoder) decode(data []byte) (pixels, error) {
	if len(data) < len(pngSignature) || string(data[:len(pngSignature)]) != pngSignature {
		return pixels{}, errPNGStructure
	}
	const (
		stageStart = iota
		stageHeader
		stageData  // inside the run of IDAT chunks
		stageAfter // after it: image/png ignores further IDAT chunks
	)
	stage := stageStart
	var w, h, bpp int
	d.idat = d.idat[:0]
	p := len(pngSignature)
	for {
		if len(data)-p < 12 {
			return pixels{}, errPNGStructure // truncated, or no IEND
		}
		length := binary.BigEndian.Uint32(data[p:])
		if length > 0x7fffffff || uint64(len(data)-p-12) < uint64(length) {
			return pixels{}, errPNGStructure
		}
		typ := string(data[p+4 : p+8])
		body := data[p+8 : p+8+int(length)]
		end := p + 12 + int(length)
		if crc32.ChecksumIEEE(data[p+4:end-4]) != binary.BigEndian.Uint32(data[end-4:]) {
			return pixels{}, errPNGStructure
		}
		p = end
		if stage == stageData && typ != "IDAT" {
			stage = stageAfter
		}
		switch typ {
		case "IHDR":
			if stage != stageStart || length != 13 {
				return pixels{}, errPNGStructure
			}
			var err error
			if w, h, bpp, err = parseFastIHDR(body); err != nil {
				return pixels{}, err
			}
			stage = stageHeader
		case "IDAT":
			switch stage {
			case stageHeader, stageData:
				d.idat = append(d.idat, body...)
				stage = stageData
			case stageStart:
				return pixels{}, errPNGStructure
			}
		case "IEND":
			if stage < stageData || length != 0 {
				return pixels{}, errPNGStructure
			}
			return d.pixels(w, h, bpp)
		default:
			// Ancillary chunks (lower-case first letter) other than tRNS
			// carry nothing that changes RGB; image/png skips them too.
			// PLTE, tRNS and unknown critical chunks go to image/png.
			if stage == stageStart || typ[0]&0x20 == 0 || typ == "tRNS" {
				return pixels{}, errPNGUnsupported
			}
		}
	}
}

// pngQuickSize reads the size from a leading IHDR of a non-paletted PNG
// of at most MaxSourceSide per side: exactly what png.DecodeConfig returns
// for such a file (it stops after IHDR unless the image is paletted), with
// the same checks (CRC, methods, bit depth and color type), without its
// allocations. Anything else is left to png.DecodeConfig.
func pngQuickSize(data []byte) (w, h int, ok bool) {
	const ihdrEnd = len(pngSignature) + 8 + 13 + 4
	if len(data) < ihdrEnd || string(data[len(pngSignature):len(pngSignature)+8]) != "\x00\x00\x00\x0dIHDR" {
		return 0, 0, false
	}
	b := data[len(pngSignature)+8 : ihdrEnd-4]
	if crc32.ChecksumIEEE(data[len(pngSignature)+4:ihdrEnd-4]) != binary.BigEndian.Uint32(data[ihdrEnd-4:]) {
		return 0, 0, false
	}
	w64, h64 := binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:])
	depth, colorType, compression, filter, interlace := b[8], b[9], b[10], b[11], b[12]
	valid := false
	switch colorType {
	case 0: // gray
		valid = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16
	case 2, 4, 6: // RGB, gray+alpha, RGBA
		valid = depth == 8 || depth == 16
	}
	if !valid || compression != 0 || filter != 0 || interlace > 1 ||
		w64 < 1 || h64 < 1 || w64 > MaxSourceSide || h64 > MaxSourceSide {
		return 0, 0, false
	}
	return int(w64), int(h64), true
}

// parseFastIHDR accepts the headers of the fast path: 8-bit RGB (color
// type 2) or RGBA (6), compression and filter method 0, not interlaced,
// size within the source limits.
func parseFastIHDR(b []byte) (w, h, bpp int, err error) {
	w64, h64 := binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:])
	depth, colorType, compression, filter, interlace := b[8], b[9], b[10], b[11], b[12]
	switch {
	case colorType == 2:
		bpp = 3
	case colorType == 6:
		bpp = 4
	default:
		return 0, 0, 0, errPNGUnsupported
	}
	if depth != 8 || compression != 0 || filter != 0 || interlace != 0 ||
		w64 < 1 || h64 < 1 || w64 > MaxSourceSide || h64 > MaxSourceSide || w64*h64 > MaxSourcePixels {
		return 0, 0, 0, errPNGUnsupported
	}
	return int(w64), int(h64), bpp, nil
}

// deflateMaxRatio bounds the bytes one byte of a deflate stream decodes
// to: the longest match, 258 bytes, coded in as few as 2 bits (RFC 1951),
// hence 1032:1.
const deflateMaxRatio = 1032

// pngDataCanHold reports whether the IDAT chunks of a PNG hold enough
// compressed bytes to inflate to the image its IHDR declares: at least
// w*h*bits-per-pixel/8 bytes, interlaced or not, at deflateMaxRatio. It
// reads chunk lengths only (no CRCs: the decoders check those), so a file
// of a few hundred bytes that declares a 64-megapixel image is refused
// before a decoder allocates the image (found by FuzzPNG with
// internal/fuzzmem: 368 bytes made the decoder allocate 119 MiB). Anything
// it cannot read (no IHDR, an unknown color type) is left to the decoders.
func pngDataCanHold(data []byte) bool {
	if len(data) < len(pngSignature) || string(data[:len(pngSignature)]) != pngSignature {
		return true
	}
	var need, idat uint64
	for p := len(pngSignature); len(data)-p >= 8; {
		length := uint64(binary.BigEndian.Uint32(data[p:]))
		typ := string(data[p+4 : p+8])
		body := data[p+8:]
		body = body[:min(uint64(len(body)), length)]
		switch {
		case typ == "IHDR" && len(body) >= 10 && need == 0:
			w, h := uint64(binary.BigEndian.Uint32(body[0:])), uint64(binary.BigEndian.Uint32(body[4:]))
			channels := map[byte]uint64{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[body[9]]
			if w == 0 || h == 0 || w > MaxSourceSide || h > MaxSourceSide || channels == 0 {
				return true // the decoders refuse it
			}
			need = (w*h*uint64(body[8])*channels + 7) / 8
		case typ == "IDAT":
			idat += uint64(len(body))
		case typ == "IEND":
			return need <= deflateMaxRatio*idat
		}
		if length > uint64(len(data)-p-8) {
			break
		}
		p += 12 + int(length)
	}
	return need <= deflateMaxRatio*idat
}

// pixels inflates and unfilters the collected image data.
func (d *pngDecoder) pixels(w, h, bpp int) (pixels, error) {
	stride := 1 + w*bpp
	if uint64(stride)*uint64(h) > deflateMaxRatio*uint64(len(d.idat)) {
		return pixels{}, errPNGStructure // see pngDataCanHold
	}
	d.raw = resize(d.raw, stride*h)
	if err := d.inf.inflateZlib(d.raw, d.idat); err != nil {
		return pixels{}, err
	}
	var prev []byte
	for y := range h {
		row := d.raw[y*stride : (y+1)*stride]
		if !unfilterRow(row[0], row[1:], prev, bpp) {
			return pixels{}, errPNGFilter
		}
		prev = row[1:]
	}
	return pixels{pix: d.raw[1:], w: w, h: h, stride: stride, bpp: bpp}, nil
}

// unfilterRow reverses filter ft on cur in place; prev is the previous row
// after unfiltering, nil for the first row (all zero). bpp is 3 or 4. It
// reports false for an unknown filter type.
func unfilterRow(ft byte, cur, prev []byte, bpp int) bool {
	switch ft {
	case filterNone:
	case filterSub:
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp]
		}
	case filterUp:
		if prev == nil {
			break
		}
		addBytes(cur, prev[:len(cur)])
	case filterAverage:
		unaverage(cur, prev, bpp)
	case filterPaeth:
		if prev == nil {
			// With an all-zero row above, Paeth predicts from the left.
			for i := bpp; i < len(cur); i++ {
				cur[i] += cur[i-bpp]
			}
			break
		}
		unpaeth(cur, prev[:len(cur)], bpp)
	default:
		return false
	}
	return true
}

// unaverage undoes the Average filter: each byte gains the floor of the
// mean of its left neighbour and the byte above (0 outside the image). The
// left neighbours of 4-byte and 3-byte pixels stay in registers.
func unaverage(cur, prev []byte, bpp int) {
	if prev == nil {
		for i := bpp; i < len(cur); i++ {
			cur[i] += cur[i-bpp] / 2
		}
		return
	}
	prev = prev[:len(cur)]
	switch bpp {
	case 4:
		var a0, a1, a2, a3 uint
		for i := 0; i+4 <= len(cur); i += 4 {
			c := cur[i : i+4 : i+4]
			p := prev[i : i+4 : i+4]
			a0 = (uint(c[0]) + (a0+uint(p[0]))>>1) & 0xff
			a1 = (uint(c[1]) + (a1+uint(p[1]))>>1) & 0xff
			a2 = (uint(c[2]) + (a2+uint(p[2]))>>1) & 0xff
			a3 = (uint(c[3]) + (a3+uint(p[3]))>>1) & 0xff
			c[0], c[1], c[2], c[3] = byte(a0), byte(a1), byte(a2), byte(a3)
		}
	default:
		var a0, a1, a2 uint
		for i := 0; i+3 <= len(cur); i += 3 {
			c := cur[i : i+3 : i+3]
			p := prev[i : i+3 : i+3]
			a0 = (uint(c[0]) + (a0+uint(p[0]))>>1) & 0xff
			a1 = (uint(c[1]) + (a1+uint(p[1]))>>1) & 0xff
			a2 = (uint(c[2]) + (a2+uint(p[2]))>>1) & 0xff
			c[0], c[1], c[2] = byte(a0), byte(a1), byte(a2)
		}
	}
}

// addBytes adds src to dst byte-wise modulo 256, 8 bytes per step: the low
// 7 bits of each byte add without carrying into the next byte, the top bit
// is their carry xor both top bits.
func addBytes(dst, src []byte) {
	const low7, high = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		a := binary.LittleEndian.Uint64(dst[i:])
		b := binary.LittleEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(dst[i:], ((a&low7)+(b&low7))^((a^b)&high))
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// unpaeth undoes the Paeth filter (PNG spec 9.4) one channel at a time,
// keeping the left (a) and upper-left (c) neighbours in registers, with the
// predictor arithmetic of image/png's paeth.
func unpaeth(cur, prev []byte, bpp int) {
	for ch := range bpp {
		var a, c int
		for i := ch; i < len(cur); i += bpp {
			b := int(prev[i])
			pa := b - c
			pb := a - c
			pc := pa + pb
			pa = abs(pa)
			pb = abs(pb)
			pc = abs(pc)
			if pa <= pb && pa <= pc {
				// a
			} else if pb <= pc {
				a = b
			} else {
				a = c
			}
			a = (a + int(cur[i])) & 0xff
			cur[i] = uint8(a)
			c = b
		}
	}
}

// abs without a branch (the predictor's comparisons are unpredictable).
func abs(x int) int {
	m := x >> 63 // -1 if x < 0, else 0, whatever the size of int
	return (x ^ m) - m
}
