package jpegdec

import "encoding/binary"

// lookBits is the width of the Huffman lookahead: codes up to this long (in
// practice nearly every code of the standard tables) decode with one table
// read; longer ones walk the canonical code ranges. 10 bits also let more
// AC coefficients resolve with their extra bits in one read (huffTable.ac):
// 2.6% less decode CPU than 9 over 100 bench frames at 1/4 scale, 2% at
// 1/2; 11 was no faster and 12 slower (docs/performance.md, "The build
// against its decoder").
const lookBits = 10

// huffTable is a Huffman decoding table (C.2, F.2.2.3).
type huffTable struct {
	nCodes int32
	// look is indexed by the next lookBits bits of the stream: the code
	// length in bits 0..4 (0: longer than lookBits, or no such code) and
	// the decoded value in bits 8..15.
	look [1 << lookBits]uint16
	vals [256]uint8
	// maxCode[l] is the largest code of length l (1..16), -1 for none;
	// valOffset[l] turns a code of length l into an index into vals.
	maxCode   [17]int32
	valOffset [17]int32
	// ac resolves, for AC tables, a whole coefficient from the next
	// lookBits bits when its code and its extra bits fit there: the
	// extended value in bits 16..31, the zero run in bits 10..15, the code
	// length in bits 5..9 and code plus extra bits in bits 0..4 (0: not
	// resolvable, decode the code and then the extra bits). An end of block
	// (value 0x00) is a run of 63: past the end of any block, which ends it
	// with its code consumed.
	ac [1 << lookBits]int32
}

// processDHT reads Huffman tables (B.2.4.2) with image/jpeg's checks.
// Over-subscribed code lengths (more codes than the lengths allow) are
// ErrUnsupported: image/jpeg builds a table from them anyway, with its own
// wraparound, and decoding such a stream is left to it.
//
//	DHT := { Tc<<4|Th(1) L1..L16(16) values(sum L) } ...
func (d *Decoder) processDHT(n int) error {
	for n > 0 {
		if n < 17 {
			return formatError("DHT has wrong length")
		}
		p, err := d.read(17)
		if err != nil {
			return err
		}
		tc, th := p[0]>>4, p[0]&0x0f
		if tc > 1 {
			return formatError("bad Tc value")
		}
		if th > maxTh || (d.baseline && th > 1) {
			return formatError("bad Th value")
		}
		h := &d.huff[tc][th]
		var counts [17]int32
		total := int32(0)
		for l := 1; l <= 16; l++ {
			counts[l] = int32(p[l])
			total += counts[l]
		}
		if total == 0 {
			h.nCodes = 0
			return formatError("Huffman table has zero length")
		}
		if total > 256 {
			h.nCodes = 0
			return formatError("Huffman table has excessive length")
		}
		n -= int(total) + 17
		if n < 0 {
			h.nCodes = 0
			return formatError("DHT has wrong length")
		}
		vals, err := d.read(int(total))
		if err != nil {
			h.nCodes = 0
			return err
		}
		if err := h.build(&counts, vals); err != nil {
			return err
		}
	}
	return nil
}

// build derives the canonical codes (C.2) from the count of codes of each
// length and fills the lookahead table.
func (h *huffTable) build(counts *[17]int32, vals []byte) error {
	h.nCodes = 0
	code, k := int32(0), int32(0)
	for l := 1; l <= 16; l++ {
		if code+counts[l] > 1<<l {
			return unsupported("over-subscribed Huffman code lengths")
		}
		if counts[l] == 0 {
			h.maxCode[l] = -1
		} else {
			h.valOffset[l] = k - code
			code += counts[l]
			k += counts[l]
			h.maxCode[l] = code - 1
		}
		code <<= 1
	}
	copy(h.vals[:], vals)
	clear(h.look[:])
	code, k = 0, 0
	for l := 1; l <= lookBits; l++ {
		for range counts[l] {
			// Every lookBits-bit string starting with this code.
			shift := uint(lookBits - l)
			e := uint16(h.vals[k])<<8 | uint16(l)
			for i := code << shift; i < (code+1)<<shift; i++ {
				h.look[i] = e
			}
			code++
			k++
		}
		code <<= 1
	}
	h.nCodes = int32(len(vals))
	h.buildAC()
	return nil
}

// acEOBRun is the run an end of block has in huffTable.ac: 63 zeros take any
// position of a block past its last.
const acEOBRun = 63

// buildAC fills h.ac from h.look. DC tables get one too: a DC symbol is a
// size alone, which the entry reads as run 0 and that size (sizes from 16
// up have a nonzero run nibble or size 0 and take the slow path).
func (h *huffTable) buildAC() {
	for i, e := range h.look {
		h.ac[i] = 0
		l := uint(e & 0x1f)
		v := uint8(e >> 8)
		run, size := uint(v>>4), uint(v&0x0f)
		if l != 0 && v == 0x00 { // EOB (in a DC table: size 0, left to the slow path there)
			h.ac[i] = acEOBRun<<10 | int32(l)<<5 | int32(l)
			continue
		}
		if l == 0 || size == 0 || l+size > lookBits {
			continue
		}
		// The size bits follow the code within the lookahead window.
		x := int32(uint(i)>>(lookBits-l-size)) & (1<<size - 1)
		if x < 1<<size>>1 {
			x += -1<<size + 1
		}
		h.ac[i] = x<<16 | int32(run)<<10 | int32(l)<<5 | int32(l+size)
	}
}

// bitReader reads entropy-coded data: bytes with 0xFF00 stuffing, up to the
// next marker. Bits are left-aligned in acc (the next bit is bit 63). At a
// marker or the end of data it appends zero bytes and counts them in pad:
// the stream was short iff a decode consumed any of them, i.e. n < pad.
type bitReader struct {
	data   []byte
	pos    int    // next byte to load
	acc    uint64 // unread bits, left-aligned
	n      uint   // number of bits in acc
	pad    uint   // zero bits appended after the data ended
	marker bool   // pos is at a marker (or the end): only zeros follow
}

// fill tops acc up to at least 57 bits: eight bytes at once when none of
// them is 0xFF (refill8), else fillBytes.
func (b *bitReader) fill() {
	if acc, n, k, ok := refill8(b.data, b.pos, b.acc, b.n); ok && !b.marker {
		b.acc, b.n, b.pos = acc, n, b.pos+k
		return
	}
	b.fillBytes()
}

// refill8 tops the bit buffer (acc, n bits) up with the whole bytes of the
// eight at data[pos:] that fit, when there are eight and none is 0xFF
// (stuffing or a marker): the new buffer and the bytes taken, ok. Small
// enough to inline into decodeBlock's AC loop, which keeps acc and n in
// registers.
func refill8(data []byte, pos int, acc uint64, n uint) (uint64, uint, int, bool) {
	if pos+8 > len(data) {
		return acc, n, 0, false
	}
	w := binary.BigEndian.Uint64(data[pos:])
	if x := ^w; (x-0x0101010101010101)&^x&0x8080808080808080 != 0 {
		return acc, n, 0, false
	}
	k := (64 - n) >> 3 // whole bytes that fit
	return acc | w>>(64-8*k)<<(64-8*k-n), n + 8*k, int(k), true
}

// fillBytes is fill a byte at a time: stuffed 0xFF bytes, markers and the
// end of the data.
func (b *bitReader) fillBytes() {
	for b.n <= 56 {
		var c uint64
		switch {
		case b.marker:
			b.pad += 8
		case b.pos >= len(b.data):
			b.marker = true
			b.pad += 8
		case b.data[b.pos] != 0xFF:
			c = uint64(b.data[b.pos])
			b.pos++
		case b.pos+1 < len(b.data) && b.data[b.pos+1] == 0x00:
			c = 0xFF
			b.pos += 2
		default:
			b.marker = true
			b.pad += 8
		}
		b.acc |= c << (56 - b.n)
		b.n += 8
	}
}

// short reports whether decoding consumed bits past the end of the data.
func (b *bitReader) short() bool { return b.n < b.pad }

// decode returns the next Huffman-coded value; acc must hold at least 16
// bits. ok is false for a bit string that is no code of h.
func (b *bitReader) decode(h *huffTable) (v uint8, ok bool) {
	if e := h.look[b.acc>>(64-lookBits)]; e != 0 {
		l := uint(e & 0x1f)
		b.acc <<= l
		b.n -= l
		return uint8(e >> 8), true
	}
	return b.decodeLong(h)
}

// decodeLong is decode for a code longer than lookBits (or none).
func (b *bitReader) decodeLong(h *huffTable) (v uint8, ok bool) {
	for l := lookBits + 1; l <= 16; l++ {
		code := int32(b.acc >> (64 - uint(l)))
		if code <= h.maxCode[l] {
			b.acc <<= uint(l)
			b.n -= uint(l)
			return h.vals[h.valOffset[l]+code], true
		}
	}
	return 0, false
}

// receiveExtend reads t bits (0..16) as a signed coefficient (F.2.2.1).
func (b *bitReader) receiveExtend(t uint8) int32 {
	x := int32(b.acc >> (64 - uint(t)) & (1<<t - 1))
	b.acc <<= t
	b.n -= uint(t)
	if x < int32(1)<<t>>1 {
		x += -1<<t + 1
	}
	return x
}

// bits reads t bits (1..14) as an unsigned number.
func (b *bitReader) bits(t uint8) uint32 {
	x := uint32(b.acc >> (64 - uint(t)))
	b.acc <<= t
	b.n -= uint(t)
	return x
}
