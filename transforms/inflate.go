package transforms

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"sync"
)

// A whole-buffer zlib/DEFLATE decoder (RFC 1950, RFC 1951) for PNG image
// data. compress/flate streams through an io.Reader one byte at a time and
// copies through a 32 KiB window; here the whole compressed stream is in
// memory and the output size is known in advance (PNG says it), so the
// decoder writes straight into the caller's buffer, reads the input 8 bytes
// at a time into a 64-bit bit buffer, and resolves most codes with one table
// lookup. That is what makes the native capture format (RGBA PNG) decode
// faster than OpenCV's libpng + zlib.
//
// It accepts exactly the streams compress/zlib accepts (the same header
// checks, Huffman code completeness rules, length/distance limits and
// Adler-32 check), and in addition requires that the stream fills dst
// exactly and ends exactly at the end of src; png.go falls back to
// image/png for anything it refuses, so the two decoders never disagree
// about an image (FuzzPNG checks this).

var (
	errInflateCorrupt   = errors.New("corrupt deflate stream")
	errInflateTruncated = errors.New("deflate stream truncated")
	errInflateSize      = errors.New("deflate stream does not fill the image exactly")
	errZlibHeader       = errors.New("bad zlib header")
	errZlibChecksum     = errors.New("zlib checksum mismatch")
	errZlibTrailing     = errors.New("data after the zlib stream")
)

// Table entries. One uint32 per table slot:
//
//	bits 0-7    bits to consume: the code length, or for a subtable link
//	            the primary table's width
//	bits 8-11   extra bits that follow the code (length and distance
//	            symbols), or for a link the subtable's width
//	bits 12-15  kind
//	bits 16-31  literal byte, length or distance base, or subtable offset
const (
	kindLiteral  = 0
	kindLength   = 1 // also used for distance symbols
	kindEnd      = 2 // end of block
	kindLink     = 3 // go to a subtable
	kindInvalid  = 4 // no code maps here (an incomplete single-code tree, an empty tree, or symbols 286, 287, 30, 31)
	kindShift    = 12
	kindMask     = 0xf << kindShift
	litTableBits = 11 // covers every code of the fixed literal/length tree
	// distTableBits covers the fixed distance codes (5 bits) and most
	// dynamic ones.
	distTableBits = 8
	clenTableBits = 7 // code length codes are at most 7 bits: no subtables

	// Table sizes, powers of two so that a masked index needs no bounds
	// check. A subtable of 2^k slots hangs below a primary slot whose
	// deepest code is k bits longer than the primary width; a complete
	// subtree of depth k has at least k+1 codes. With at most 286 codes
	// of at most 15 bits, the literal/length subtables hold at most
	// floor(286/5)*16 = 912 slots (k = 4 each) beside the 2048 primary
	// ones; with 30 distance codes, at most 3*128 = 384 beside 256.
	litTableSize  = 4096
	distTableSize = 1024
	clenTableSize = 1 << clenTableBits
)

type (
	litTable  [litTableSize]uint32
	distTable [distTableSize]uint32
)

func entry(kind int, length, extra int, value int) uint32 {
	return uint32(value)<<16 | uint32(kind)<<kindShift | uint32(extra)<<8 | uint32(length)
}

// Length symbols 257..285: base length and extra bits (RFC 1951 3.2.5).
var lengthBase = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
	35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
var lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
	3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}

// Distance symbols 0..29.
var distBase = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
	257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
var distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6,
	7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}

// codeLengthOrder is the order of the code length code lengths (RFC 1951 3.2.7).
var codeLengthOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// symbolKind tells buildTable what a symbol of a tree decodes to.
type symbolKind int

const (
	litLenSymbols symbolKind = iota
	distSymbols
	codeLengthSymbols
)

// symbolEntry is the table entry (without the code length) for symbol s.
func symbolEntry(k symbolKind, s int) uint32 {
	switch k {
	case litLenSymbols:
		switch {
		case s < 256:
			return entry(kindLiteral, 0, 0, s)
		case s == 256:
			return entry(kindEnd, 0, 0, 0)
		case s <= 285:
			return entry(kindLength, 0, int(lengthExtra[s-257]), int(lengthBase[s-257]))
		}
	case distSymbols:
		if s < 30 {
			return entry(kindLength, 0, int(distExtra[s]), int(distBase[s]))
		}
	case codeLengthSymbols:
		return entry(kindLiteral, 0, 0, s)
	}
	return entry(kindInvalid, 0, 0, 0)
}

// buildTable builds the decoding table of the canonical Huffman code with
// the given code lengths into *table (primary table of 2^tableBits entries
// followed by subtables), reusing its storage. It enforces compress/flate's
// rule: the code must be complete, except that an empty code and a single
// code of length 1 are allowed (their unused slots decode as invalid).
func buildTable(t []uint32, lengths []uint8, k symbolKind, tableBits uint) bool {
	var count [16]int
	maxLen := 0
	for _, n := range lengths {
		count[n]++
		maxLen = max(maxLen, int(n))
	}
	count[0] = 0
	var next [16]int
	code := 0
	for n := 1; n <= 15; n++ {
		code = (code + count[n-1]) << 1
		next[n] = code
	}
	// Kraft sum scaled to 2^maxLen: complete iff it equals 2^maxLen.
	kraft := 0
	for n := 1; n <= maxLen; n++ {
		kraft += count[n] << (maxLen - n)
	}
	if maxLen > 0 && kraft != 1<<maxLen && !(kraft == 1 && maxLen == 1) {
		return false
	}

	// Pass 1: the width of each subtable, indexed by the primary slot of
	// the codes longer than tableBits that share it; then the link
	// entries, which pass 2 reads back.
	primary := 1 << tableBits
	var subBits [1 << litTableBits]uint8
	codes := next
	if maxLen > int(tableBits) {
		for _, n := range lengths {
			if int(n) <= int(tableBits) {
				continue
			}
			c := codes[n]
			codes[n]++
			rev := int(bits.Reverse16(uint16(c)) >> (16 - n))
			slot := rev & (primary - 1)
			subBits[slot] = max(subBits[slot], n-uint8(tableBits))
		}
	}
	size := primary
	for slot := range primary {
		if subBits[slot] > 0 {
			size += 1 << subBits[slot]
		}
	}
	if size > len(t) {
		return false // cannot happen, see litTableSize
	}
	t = t[:size]
	invalid := entry(kindInvalid, 0, 0, 0)
	for i := range t {
		t[i] = invalid
	}
	if maxLen > int(tableBits) {
		off := primary
		for slot := range primary {
			if subBits[slot] > 0 {
				t[slot] = entry(kindLink, int(tableBits), int(subBits[slot]), off)
				off += 1 << subBits[slot]
			}
		}
	}

	// Pass 2: every code fills the slots whose low bits are its
	// bit-reversed code (DEFLATE sends codes most significant bit first
	// into an LSB-first bit stream).
	codes = next
	for s, n := range lengths {
		if n == 0 {
			continue
		}
		c := codes[n]
		codes[n]++
		rev := int(bits.Reverse16(uint16(c)) >> (16 - n))
		e := symbolEntry(k, s)
		if int(n) <= int(tableBits) {
			e |= uint32(n)
			for i := rev; i < primary; i += 1 << n {
				t[i] = e
			}
			continue
		}
		link := t[rev&(primary-1)]
		off := int(link >> 16)
		sub := t[off : off+1<<((link>>8)&0xf)]
		e |= uint32(int(n) - int(tableBits))
		for i := rev >> tableBits; i < len(sub); i += 1 << (int(n) - int(tableBits)) {
			sub[i] = e
		}
	}
	return true
}

// The fixed Huffman code (RFC 1951 3.2.6), built once. Symbols 286, 287
// and distances 30, 31 have codes but are invalid, as in compress/flate.
var (
	fixedOnce                         sync.Once
	fixedLit                          litTable
	fixedDist                         distTable
	fixedLitLengths, fixedDistLengths [320]uint8
)

func fixedTables() (*litTable, *distTable) {
	fixedOnce.Do(func() {
		l := fixedLitLengths[:288]
		for i := range l {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		d := fixedDistLengths[:32]
		for i := range d {
			d[i] = 5
		}
		buildTable(fixedLit[:], l, litLenSymbols, litTableBits)
		buildTable(fixedDist[:], d, distSymbols, distTableBits)
	})
	return &fixedLit, &fixedDist
}

// inflater holds the tables of the dynamic Huffman codes; reused across
// images so a worker allocates them once.
type inflater struct {
	lit     litTable
	dist    distTable
	clen    [clenTableSize]uint32
	lengths [320]uint8
}

// bitReader reads src LSB-first. Bits above n in buf are always the true
// next input bits (or zero), which makes the 8-byte refill idempotent; ip
// may run past len(src) by whole zero bytes near the end, which end()
// reports as truncation.
type bitReader struct {
	src []byte
	ip  int
	buf uint64
	n   uint
}

// refill makes at least 49 bits available.
func (br *bitReader) refill() {
	if br.ip+8 <= len(br.src) {
		br.buf |= binary.LittleEndian.Uint64(br.src[br.ip:]) << br.n
		br.ip += 7 - int(br.n>>3)
		br.n |= 56
		return
	}
	for br.n <= 48 {
		if br.ip < len(br.src) {
			br.buf |= uint64(br.src[br.ip]) << br.n
		}
		br.ip++
		br.n += 8
	}
}

// take consumes and returns k bits (k <= 32, at least k available).
func (br *bitReader) take(k uint) uint32 {
	v := uint32(br.buf & (1<<k - 1))
	br.buf >>= k
	br.n -= k
	return v
}

// pos is the number of bytes consumed, rounding a partial byte up.
func (br *bitReader) pos() int {
	return br.ip - int(br.n>>3)
}

// inflateZlib decodes the zlib stream src into dst, which it must fill
// exactly, and checks its Adler-32 trailer. It never panics on bad input.
func (f *inflater) inflateZlib(dst, src []byte) error {
	// RFC 1950: CMF (method 8, window <= 32K), FLG (check bits, no preset
	// dictionary), as compress/zlib checks them.
	if len(src) < 2 {
		return errInflateTruncated
	}
	cmf, flg := src[0], src[1]
	if cmf&0x0f != 8 || cmf>>4 > 7 || (uint(cmf)<<8|uint(flg))%31 != 0 || flg&0x20 != 0 {
		return errZlibHeader
	}
	end, err := f.inflate(dst, src[2:])
	if err != nil {
		return err
	}
	trailer := src[2+end:]
	if len(trailer) < 4 {
		return errInflateTruncated
	}
	if len(trailer) > 4 {
		return errZlibTrailing
	}
	if binary.BigEndian.Uint32(trailer) != adler32(dst) {
		return errZlibChecksum
	}
	return nil
}

// inflate decodes the raw DEFLATE stream at the start of src into dst and
// returns the number of bytes of src it used.
func (f *inflater) inflate(dst, src []byte) (int, error) {
	br := bitReader{src: src}
	op := 0
	for {
		br.refill()
		final := br.take(1)
		switch br.take(2) {
		case 0:
			// Stored: skip to the byte boundary, LEN, NLEN, LEN bytes.
			br.take(br.n & 7)
			p := br.pos()
			if p+4 > len(src) {
				return 0, errInflateTruncated
			}
			n := int(binary.LittleEndian.Uint16(src[p:]))
			if binary.LittleEndian.Uint16(src[p+2:]) != ^uint16(n) {
				return 0, errInflateCorrupt
			}
			p += 4
			if p+n > len(src) {
				return 0, errInflateTruncated
			}
			if op+n > len(dst) {
				return 0, errInflateSize
			}
			op += copy(dst[op:], src[p:p+n])
			br = bitReader{src: src, ip: p + n}
		case 1:
			lit, dist := fixedTables()
			var err error
			if op, err = decodeBlock(dst, op, &br, lit, dist); err != nil {
				return 0, err
			}
		case 2:
			if err := f.readDynamic(&br); err != nil {
				return 0, err
			}
			var err error
			if op, err = decodeBlock(dst, op, &br, &f.lit, &f.dist); err != nil {
				return 0, err
			}
		default:
			return 0, errInflateCorrupt
		}
		if br.ip > len(src) && br.pos() > len(src) {
			return 0, errInflateTruncated
		}
		if final == 1 {
			break
		}
	}
	if op != len(dst) {
		return 0, errInflateSize
	}
	// The stream ends at the byte holding its last bit.
	br.take(br.n & 7)
	end := br.pos()
	if end > len(src) {
		return 0, errInflateTruncated
	}
	return end, nil
}

// readDynamic reads a dynamic block's code trees (RFC 1951 3.2.7) into
// f.lit and f.dist, with compress/flate's limits: at most 286 literal/length
// and 30 distance codes, a repeat needs a previous length and may not run
// past the end, and every tree must pass buildTable.
func (f *inflater) readDynamic(br *bitReader) error {
	br.refill()
	nlit := int(br.take(5)) + 257
	ndist := int(br.take(5)) + 1
	nclen := int(br.take(4)) + 4
	if nlit > 286 || ndist > 30 {
		return errInflateCorrupt
	}
	var clens [19]uint8
	for i := range nclen {
		if i%16 == 0 {
			br.refill()
		}
		clens[codeLengthOrder[i]] = uint8(br.take(3))
	}
	if !buildTable(f.clen[:], clens[:], codeLengthSymbols, clenTableBits) {
		return errInflateCorrupt
	}
	lengths := f.lengths[:nlit+ndist]
	for i := 0; i < len(lengths); {
		br.refill()
		e := f.clen[br.buf&(1<<clenTableBits-1)]
		if e&kindMask != kindLiteral<<kindShift {
			return errInflateCorrupt
		}
		br.take(uint(e & 0xff))
		sym := e >> 16
		if sym < 16 {
			lengths[i] = uint8(sym)
			i++
			continue
		}
		var rep int
		var v uint8
		switch sym {
		case 16:
			if i == 0 {
				return errInflateCorrupt
			}
			rep, v = 3+int(br.take(2)), lengths[i-1]
		case 17:
			rep = 3 + int(br.take(3))
		default:
			rep = 11 + int(br.take(7))
		}
		if i+rep > len(lengths) {
			return errInflateCorrupt
		}
		for range rep {
			lengths[i] = v
			i++
		}
	}
	if !buildTable(f.lit[:], lengths[:nlit], litLenSymbols, litTableBits) ||
		!buildTable(f.dist[:], lengths[nlit:], distSymbols, distTableBits) {
		return errInflateCorrupt
	}
	return nil
}

// decodeBlock decodes one Huffman-coded block into dst from position op
// up to and including its end-of-block code, and returns the new position.
//
// Bit budget: after a refill at least 49 bits are available; a
// literal/length code with its extra bits takes at most 15+5 and a
// distance code with its extra bits at most 15+13, 48 together, so one
// refill per symbol suffices. The bit reader lives in locals here so the
// compiler keeps it in registers.
func decodeBlock(dst []byte, op int, br *bitReader, lit *litTable, dist *distTable) (int, error) {
	src, ip, buf, n := br.src, br.ip, br.buf, br.n
	const litMask = 1<<litTableBits - 1
	const distMask = 1<<distTableBits - 1
	// Table indexes are masked to the table size and shift counts with
	// 63 (all counts here are below 64 anyway): the compiler then emits
	// no bounds checks and bare shifts.
	isLiteral := func(e uint32) bool { return e&kindMask == kindLiteral<<kindShift }
	for {
		// refill, as bitReader.refill
		if ip+8 <= len(src) {
			buf |= binary.LittleEndian.Uint64(src[ip:]) << (n & 63)
			ip += 7 - int(n>>3)
			n |= 56
		} else {
			for n <= 48 {
				if ip < len(src) {
					buf |= uint64(src[ip]) << (n & 63)
				}
				ip++
				n += 8
			}
			if ip > len(src)+8 {
				return 0, errInflateTruncated // only zero padding left
			}
		}

		e := lit[buf&litMask]
		if isLiteral(e) {
			// Up to three literals per refill: a primary-table code is at
			// most 11 bits, and 49 - 3*11 bits still cover the next lookup.
			buf >>= e & 63
			n -= uint(e & 0xff)
			if op >= len(dst) {
				return 0, errInflateSize
			}
			dst[op] = byte(e >> 16)
			op++
			if e = lit[buf&litMask]; !isLiteral(e) {
				continue
			}
			buf >>= e & 63
			n -= uint(e & 0xff)
			if op >= len(dst) {
				return 0, errInflateSize
			}
			dst[op] = byte(e >> 16)
			op++
			if e = lit[buf&litMask]; !isLiteral(e) {
				continue
			}
			buf >>= e & 63
			n -= uint(e & 0xff)
			if op >= len(dst) {
				return 0, errInflateSize
			}
			dst[op] = byte(e >> 16)
			op++
			continue
		}
		if e&kindMask == kindLink<<kindShift {
			buf >>= litTableBits
			n -= litTableBits
			e = lit[(int(e>>16)+int(buf&(1<<((e>>8)&0xf)-1)))&(litTableSize-1)]
		}
		buf >>= e & 63
		n -= uint(e & 0xff)
		switch e & kindMask {
		case kindLiteral << kindShift:
			if op >= len(dst) {
				return 0, errInflateSize
			}
			dst[op] = byte(e >> 16)
			op++
			continue
		case kindEnd << kindShift:
			br.ip, br.buf, br.n = ip, buf, n
			return op, nil
		case kindLength << kindShift:
		default:
			return 0, errInflateCorrupt
		}
		x := (e >> 8) & 0xf
		length := int(e>>16) + int(buf&(1<<x-1))
		buf >>= x
		n -= uint(x)

		e = dist[buf&distMask]
		if e&kindMask == kindLink<<kindShift {
			buf >>= distTableBits
			n -= distTableBits
			e = dist[(int(e>>16)+int(buf&(1<<((e>>8)&0xf)-1)))&(distTableSize-1)]
		}
		if e&kindMask != kindLength<<kindShift {
			return 0, errInflateCorrupt
		}
		buf >>= e & 63
		n -= uint(e & 0xff)
		x = (e >> 8) & 0xf
		d := int(e>>16) + int(buf&(1<<x-1))
		buf >>= x
		n -= uint(x)

		if d > op {
			return 0, errInflateCorrupt // before the start of the output
		}
		if length > len(dst)-op {
			return 0, errInflateSize
		}
		from := op - d
		switch {
		case d >= 8 && len(dst)-op >= length+8:
			// 8 bytes at a time; the source of every word is complete
			// (d >= 8) and the overshoot stays inside dst, where later
			// output overwrites it.
			for i := 0; i < length; i += 8 {
				binary.LittleEndian.PutUint64(dst[op+i:], binary.LittleEndian.Uint64(dst[from+i:]))
			}
		case d == 1:
			b := dst[from]
			s := dst[op : op+length]
			for i := range s {
				s[i] = b
			}
		default:
			s := dst[from : op+length]
			for i := d; i < len(s); i++ {
				s[i] = s[i-d]
			}
		}
		op += length
	}
}

// adler32 is hash/adler32.Checksum, 16 bytes per step: s1 gains the byte
// sum and s2 16*s1 plus the bytes weighted 16..1, computed with SWAR
// multiplies (a 64-bit product of 16-bit lanes sums the lane-wise products
// into its top lane, exactly, since no lane sum exceeds 16 bits). Tested
// against hash/adler32.
func adler32(p []byte) uint32 {
	const mod = 65521
	s1, s2 := uint64(1), uint64(0)
	const (
		lanes = 0x00ff00ff00ff00ff
		ones  = 0x0001000100010001
		// weights of bytes 0,2,4,6 (16,14,12,10) and 1,3,5,7 (15,13,11,9)
		// of the first half; the second half has each weight minus 8.
		wEvenHi = 10 | 12<<16 | 14<<32 | 16<<48
		wOddHi  = 9 | 11<<16 | 13<<32 | 15<<48
		wEvenLo = 2 | 4<<16 | 6<<32 | 8<<48
		wOddLo  = 1 | 3<<16 | 5<<32 | 7<<48
	)
	for len(p) > 0 {
		// s2 grows by less than 255*n*(n+1)/2 + n*s1 per n bytes: 1 MiB
		// between reductions keeps it far below 2^64.
		chunk := p[:min(len(p), 1<<20)]
		p = p[len(chunk):]
		for len(chunk) >= 16 {
			a := binary.LittleEndian.Uint64(chunk)
			b := binary.LittleEndian.Uint64(chunk[8:])
			ae, ao := a&lanes, (a>>8)&lanes
			be, bo := b&lanes, (b>>8)&lanes
			sum := ((ae + ao + be + bo) * ones) >> 48
			weighted := (ae*wEvenHi)>>48 + (ao*wOddHi)>>48 + (be*wEvenLo)>>48 + (bo*wOddLo)>>48
			s2 += 16*s1 + weighted
			s1 += sum
			chunk = chunk[16:]
		}
		for _, c := range chunk {
			s1 += uint64(c)
			s2 += s1
		}
		s1 %= mod
		s2 %= mod
	}
	return uint32(s2<<16 | s1)
}
