// Package xzstream decompresses .xz data (roverd's lzma and lzmaf channels,
// written by Python's lzma module) with a hard limit that is checked before
// anything is decompressed or allocated.
//
// github.com/ulikunitz/xz's own xz reader trusts the file twice: it
// decompresses as much as the stream holds, and it allocates the LZMA2
// dictionary the block header asks for (up to 4 GiB, for a file of a few
// bytes). This package therefore parses the .xz container itself, from the
// end as `xz --list` does: every stream's footer and index first, which
// declare each block's compressed and uncompressed size, then each block
// header. Only when the declared total is within the limit does it
// allocate the output and hand each block's LZMA2 data to ulikunitz/xz's
// LZMA2 decoder, with a dictionary no larger than the block's declared
// uncompressed size (a match can never reach further back than that).
// Every block must then produce exactly its declared size, consume exactly
// its compressed bytes and match its check.
//
// # Layout (xz file format 1.2.1; integers little-endian)
//
//	stream   = header block* index footer, streams may be concatenated with
//	           zero padding (a multiple of 4 bytes) between and after them
//	header   = fd '7zXZ' 00 <flags 2: 00, check id> <crc32 of flags 4>
//	block    = <header size byte: (n+1)*4> <flags 1: filters-1 | 0x40 csize | 0x80 usize>
//	           [csize vli] [usize vli] (<filter id vli> <props size vli> <props>)+
//	           <zero padding> <crc32 4> <lzma2 data> <zero padding to 4> <check>
//	index    = 00 <records vli> (<unpadded size vli> <uncompressed size vli>)*
//	           <zero padding to 4> <crc32 4>
//	footer   = <crc32 of the next 6 bytes 4> <backward size 4: index size/4 - 1> <flags 2> 'YZ'
//
// Only the LZMA2 filter (id 0x21) is supported, with the checks none,
// CRC32, CRC64 and SHA-256: what liblzma, and so Python, writes.
package xzstream

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

var (
	// ErrCorrupt is wrapped by every error about malformed data.
	ErrCorrupt = errors.New("xz: corrupt data")
	// ErrTooLarge is wrapped when the data declares more uncompressed
	// bytes than the caller's limit. Nothing has been decompressed then.
	ErrTooLarge = errors.New("xz: uncompressed size over the limit")
	// ErrUnsupported is wrapped for valid .xz data this package does not
	// decode: filters other than LZMA2, unknown check types.
	ErrUnsupported = errors.New("xz: unsupported")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Format constants.
const (
	headerSize      = 12
	footerSize      = 12
	headerMagic     = "\xfd7zXZ\x00"
	footerMagic     = "YZ"
	filterLZMA2     = 0x21
	maxVLIBytes     = 9
	maxBlockHeader  = 1024
	minBlockHeader  = 8
	lzma2DictMax    = 40 // props value for a 4 GiB - 1 dictionary
	checkNone       = 0x0
	checkCRC32      = 0x1
	checkCRC64      = 0x4
	checkSHA256     = 0xA
	blockFlagsCSize = 0x40
	blockFlagsUSize = 0x80
	blockFlagsRsvd  = 0x3C
)

// MaxIndexBytes bounds one stream's index. A record takes at least two
// bytes and Python writes one block per stream; liblzma's multithreaded
// encoder writes one per 24 MiB or so.
const MaxIndexBytes = 1 << 20

// checkSizes are the sizes of the check field by check id (0..15).
var checkSizes = [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}

// block is one index record, located in the file.
type block struct {
	start        int64 // offset of the block header
	unpadded     int64 // header + compressed data + check
	uncompressed int64
}

// stream is one parsed stream: its check type and blocks.
type stream struct {
	check  byte
	blocks []block
}

// Info is what the indexes declare.
type Info struct {
	Uncompressed int64 // total over all streams
	Streams      int
	Blocks       int
}

// Stat reads the footers and indexes of the .xz data in r (size bytes) and
// returns the declared sizes without decompressing anything.
func Stat(r io.ReaderAt, size int64) (Info, error) {
	streams, total, err := parseStreams(r, size, -1)
	if err != nil {
		return Info{}, err
	}
	info := Info{Uncompressed: total, Streams: len(streams)}
	for _, s := range streams {
		info.Blocks += len(s.blocks)
	}
	return info, nil
}

// Decompress returns the uncompressed content of the .xz data in r (size
// bytes). When the indexes declare more than limit bytes it fails with
// ErrTooLarge before decompressing or allocating anything.
func Decompress(r io.ReaderAt, size, limit int64) ([]byte, error) {
	streams, total, err := parseStreams(r, size, limit)
	if err != nil {
		return nil, err
	}
	out := make([]byte, total)
	pos := int64(0)
	for _, s := range streams {
		for _, b := range s.blocks {
			if err := decodeBlock(r, b, s.check, out[pos:pos+b.uncompressed]); err != nil {
				return nil, err
			}
			pos += b.uncompressed
		}
	}
	return out, nil
}

// DecompressBytes is Decompress for data in memory.
func DecompressBytes(data []byte, limit int64) ([]byte, error) {
	return Decompress(bytes.NewReader(data), int64(len(data)), limit)
}

func read(r io.ReaderAt, off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, corruptf("read %d bytes at offset %d: unexpected end of data", n, off)
		}
		return nil, err
	}
	return buf, nil
}

// parseStreams walks the streams from the end of the data to its start and
// returns them in file order with the declared total. limit < 0 is none.
func parseStreams(r io.ReaderAt, size, limit int64) ([]stream, int64, error) {
	var (
		rev   []stream
		total int64
	)
	pos := size
	for pos > 0 {
		// Stream padding: zero bytes in groups of four.
		for pos >= 4 {
			p, err := read(r, pos-4, 4)
			if err != nil {
				return nil, 0, err
			}
			if binary.LittleEndian.Uint32(p) != 0 {
				break
			}
			pos -= 4
		}
		if pos == 0 {
			if len(rev) == 0 {
				break
			}
			return nil, 0, corruptf("stream padding before the first stream")
		}
		s, start, sum, err := parseStream(r, pos)
		if err != nil {
			return nil, 0, err
		}
		if sum > maxInt64-total {
			return nil, 0, corruptf("declared uncompressed size overflows")
		}
		total += sum
		if limit >= 0 && total > limit {
			return nil, 0, fmt.Errorf("%w: the data declares at least %d bytes uncompressed, more than the limit of %d", ErrTooLarge, total, limit)
		}
		rev = append(rev, s)
		pos = start
	}
	if len(rev) == 0 {
		return nil, 0, corruptf("no stream in %d bytes", size)
	}
	streams := make([]stream, len(rev))
	for i, s := range rev {
		streams[len(rev)-1-i] = s
	}
	return streams, total, nil
}

const maxInt64 = 1<<63 - 1

// parseStream parses the stream whose footer ends at end: footer, index,
// header. It returns the stream, its start offset and its declared
// uncompressed size.
func parseStream(r io.ReaderAt, end int64) (stream, int64, int64, error) {
	if end < headerSize+footerSize {
		return stream{}, 0, 0, corruptf("%d bytes cannot hold a stream header and footer", end)
	}
	ft, err := read(r, end-footerSize, footerSize)
	if err != nil {
		return stream{}, 0, 0, err
	}
	if string(ft[10:12]) != footerMagic {
		return stream{}, 0, 0, corruptf("no stream footer magic at offset %d", end-2)
	}
	if crc32.ChecksumIEEE(ft[4:10]) != binary.LittleEndian.Uint32(ft[0:4]) {
		return stream{}, 0, 0, corruptf("stream footer CRC32 mismatch at offset %d", end-footerSize)
	}
	flags := ft[8:10]
	if flags[0] != 0 || flags[1]&0xF0 != 0 {
		return stream{}, 0, 0, corruptf("reserved stream flags set in the footer at offset %d", end-footerSize)
	}
	s := stream{check: flags[1] & 0x0F}
	indexSize := (int64(binary.LittleEndian.Uint32(ft[4:8])) + 1) * 4
	indexStart := end - footerSize - indexSize
	if indexStart < headerSize {
		return stream{}, 0, 0, corruptf("index of %d bytes does not fit before the footer at offset %d", indexSize, end-footerSize)
	}
	if indexSize > MaxIndexBytes {
		return stream{}, 0, 0, fmt.Errorf("%w: index of %d bytes, more than %d", ErrUnsupported, indexSize, MaxIndexBytes)
	}
	idx, err := read(r, indexStart, indexSize)
	if err != nil {
		return stream{}, 0, 0, err
	}
	recs, err := parseIndex(idx, indexStart)
	if err != nil {
		return stream{}, 0, 0, err
	}
	var blocksSize, sum int64
	for _, rec := range recs {
		if rec[0] > maxInt64-3 {
			return stream{}, 0, 0, corruptf("index at offset %d: unpadded size %d out of range", indexStart, rec[0])
		}
		padded := (rec[0] + 3) &^ 3
		if padded > indexStart || blocksSize > indexStart-padded {
			return stream{}, 0, 0, corruptf("index at offset %d declares more block bytes than precede it", indexStart)
		}
		blocksSize += padded
		if rec[1] > maxInt64-sum {
			return stream{}, 0, 0, corruptf("index at offset %d: uncompressed sizes overflow", indexStart)
		}
		sum += rec[1]
	}
	start := indexStart - blocksSize - headerSize
	if start < 0 {
		return stream{}, 0, 0, corruptf("index at offset %d declares %d block bytes, more than precede it", indexStart, blocksSize)
	}
	hd, err := read(r, start, headerSize)
	if err != nil {
		return stream{}, 0, 0, err
	}
	if string(hd[0:6]) != headerMagic {
		return stream{}, 0, 0, corruptf("no stream header magic at offset %d", start)
	}
	if crc32.ChecksumIEEE(hd[6:8]) != binary.LittleEndian.Uint32(hd[8:12]) {
		return stream{}, 0, 0, corruptf("stream header CRC32 mismatch at offset %d", start)
	}
	if !bytes.Equal(hd[6:8], flags) {
		return stream{}, 0, 0, corruptf("stream header at offset %d and footer disagree on the flags", start)
	}
	switch s.check {
	case checkNone, checkCRC32, checkCRC64, checkSHA256:
	default:
		return stream{}, 0, 0, fmt.Errorf("%w: check type %#x", ErrUnsupported, s.check)
	}
	pos := start + headerSize
	for _, rec := range recs {
		s.blocks = append(s.blocks, block{start: pos, unpadded: rec[0], uncompressed: rec[1]})
		pos += (rec[0] + 3) &^ 3
	}
	return s, start, sum, nil
}

// parseIndex returns the index's (unpadded, uncompressed) records.
func parseIndex(idx []byte, at int64) ([][2]int64, error) {
	body := idx[:len(idx)-4]
	if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(idx[len(idx)-4:]) {
		return nil, corruptf("index CRC32 mismatch at offset %d", at)
	}
	if body[0] != 0 {
		return nil, corruptf("no index indicator at offset %d", at)
	}
	p := 1
	n, k, err := vli(body[p:])
	if err != nil {
		return nil, corruptf("index record count at offset %d: %v", at+int64(p), err)
	}
	p += k
	// Each record takes at least two bytes: bound n before allocating.
	if n > uint64(len(body)-p)/2 {
		return nil, corruptf("index at offset %d declares %d records in %d bytes", at, n, len(body)-p)
	}
	recs := make([][2]int64, n)
	for i := range recs {
		for j := range 2 {
			v, k, err := vli(body[p:])
			if err != nil {
				return nil, corruptf("index record %d at offset %d: %v", i, at+int64(p), err)
			}
			recs[i][j] = int64(v)
			p += k
		}
		if recs[i][0] == 0 {
			return nil, corruptf("index record %d has unpadded size 0", i)
		}
	}
	if rest := body[p:]; len(rest) >= 4 || !allZero(rest) {
		return nil, corruptf("index at offset %d: bad padding after %d records", at, n)
	}
	return recs, nil
}

// vli decodes one variable-length integer: 7 bits a byte, least significant
// first, at most 9 bytes, without redundant trailing zero bytes.
func vli(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < maxVLIBytes; i++ {
		if i >= len(b) {
			return 0, 0, errors.New("truncated integer")
		}
		c := b[i]
		v |= uint64(c&0x7F) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, errors.New("integer with a redundant zero byte")
			}
			if v > maxInt64 {
				return 0, 0, errors.New("integer over 2^63-1")
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("integer longer than 9 bytes")
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeBlock checks block b's header against its index record and
// decompresses it into out, which has the declared uncompressed size.
func decodeBlock(r io.ReaderAt, b block, check byte, out []byte) error {
	first, err := read(r, b.start, 1)
	if err != nil {
		return err
	}
	hsize := (int64(first[0]) + 1) * 4
	if first[0] == 0 {
		return corruptf("block at offset %d: index indicator where a block header should be", b.start)
	}
	csize := b.unpadded - hsize - int64(checkSizes[check])
	if csize < 1 {
		return corruptf("block at offset %d: unpadded size %d leaves no room for data", b.start, b.unpadded)
	}
	h, err := read(r, b.start, hsize)
	if err != nil {
		return err
	}
	dictSize, err := parseBlockHeader(h, b, csize)
	if err != nil {
		return err
	}
	// A match can reach back at most to the block's first byte, so a
	// dictionary the size of the block is always enough.
	dictCap := int64(lzma.MinDictCap)
	if n := min(dictSize, b.uncompressed); n > dictCap {
		dictCap = n
	}
	cr := &countingReader{r: bufio.NewReaderSize(io.NewSectionReader(r, b.start+hsize, csize), int(min(csize+1, 64<<10)))}
	dec, err := lzma.Reader2Config{DictCap: int(dictCap)}.NewReader2(cr)
	if err != nil {
		return corruptf("block at offset %d: %v", b.start, err)
	}
	if _, err := io.ReadFull(dec, out); err != nil {
		return corruptf("block at offset %d: %v (after %d of %d declared bytes)", b.start, unexpected(err), cr.n, b.uncompressed)
	}
	var probe [1]byte
	if n, err := dec.Read(probe[:]); n != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return corruptf("block at offset %d: %v", b.start, err)
		}
		return corruptf("block at offset %d holds more than its declared %d bytes", b.start, b.uncompressed)
	}
	if cr.n != csize {
		return corruptf("block at offset %d: LZMA2 data ends after %d of %d compressed bytes", b.start, cr.n, csize)
	}
	return verifyCheck(r, b, hsize+csize, check, out)
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseBlockHeader checks the header's CRC, flags, sizes and filter chain
// and returns the LZMA2 dictionary size it declares.
func parseBlockHeader(h []byte, b block, csize int64) (int64, error) {
	at := b.start
	if crc32.ChecksumIEEE(h[:len(h)-4]) != binary.LittleEndian.Uint32(h[len(h)-4:]) {
		return 0, corruptf("block header CRC32 mismatch at offset %d", at)
	}
	flags := h[1]
	if flags&blockFlagsRsvd != 0 {
		return 0, corruptf("block header at offset %d: reserved flags %#x", at, flags)
	}
	body := h[2 : len(h)-4]
	p := 0
	next := func(what string) (int64, error) {
		v, k, err := vli(body[p:])
		if err != nil {
			return 0, corruptf("block header at offset %d: %s: %v", at, what, err)
		}
		p += k
		return int64(v), nil
	}
	if flags&blockFlagsCSize != 0 {
		v, err := next("compressed size")
		if err != nil {
			return 0, err
		}
		if v != csize {
			return 0, corruptf("block header at offset %d: compressed size %d, index says %d", at, v, csize)
		}
	}
	if flags&blockFlagsUSize != 0 {
		v, err := next("uncompressed size")
		if err != nil {
			return 0, err
		}
		if v != b.uncompressed {
			return 0, corruptf("block header at offset %d: uncompressed size %d, index says %d", at, v, b.uncompressed)
		}
	}
	filters := int(flags&0x03) + 1
	if filters != 1 {
		return 0, fmt.Errorf("%w: block at offset %d has %d filters, only LZMA2 alone is supported", ErrUnsupported, at, filters)
	}
	id, err := next("filter id")
	if err != nil {
		return 0, err
	}
	if id != filterLZMA2 {
		return 0, fmt.Errorf("%w: filter %#x in the block at offset %d, only LZMA2 (0x21)", ErrUnsupported, id, at)
	}
	psize, err := next("filter properties size")
	if err != nil {
		return 0, err
	}
	if psize != 1 || p >= len(body) {
		return 0, corruptf("block header at offset %d: LZMA2 properties of %d bytes, want 1", at, psize)
	}
	props := body[p]
	p++
	if props&0xC0 != 0 || props > lzma2DictMax {
		return 0, corruptf("block header at offset %d: LZMA2 dictionary property %#x", at, props)
	}
	if !allZero(body[p:]) {
		return 0, corruptf("block header at offset %d: non-zero header padding", at)
	}
	if props == lzma2DictMax {
		return 1<<32 - 1, nil
	}
	return int64(2|props&1) << (props/2 + 11), nil
}

// verifyCheck reads the block's padding and check field after its data.
func verifyCheck(r io.ReaderAt, b block, dataLen int64, check byte, out []byte) error {
	pad := (4 - dataLen%4) % 4
	n := int64(checkSizes[check])
	tail, err := read(r, b.start+dataLen, pad+n)
	if err != nil {
		return err
	}
	if !allZero(tail[:pad]) {
		return corruptf("block at offset %d: non-zero block padding", b.start)
	}
	var h hash.Hash
	switch check {
	case checkNone:
		return nil
	case checkCRC32:
		h = crc32.NewIEEE()
	case checkCRC64:
		h = crc64.New(crc64Table)
	case checkSHA256:
		h = sha256.New()
	}
	h.Write(out)
	sum := h.Sum(nil)
	if check != checkSHA256 {
		// CRC32 and CRC64 are stored little-endian; hash.Hash gives big-endian.
		for i, j := 0, len(sum)-1; i < j; i, j = i+1, j-1 {
			sum[i], sum[j] = sum[j], sum[i]
		}
	}
	if !bytes.Equal(sum, tail[pad:]) {
		return corruptf("block at offset %d: check mismatch (the uncompressed data is damaged)", b.start)
	}
	return nil
}

var crc64Table = crc64.MakeTable(crc64.ECMA)

// countingReader counts the bytes the LZMA2 decoder consumes; it is an
// io.ByteReader so the decoder does not wrap it in a reader of its own.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}
