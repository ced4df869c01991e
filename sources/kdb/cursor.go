package kdb

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// stepReadAhead is how much a cursor over a state/action section reads at
// once: every byte of that section is wanted. Cursors over image sections
// read exactly the header fields they are asked for, so image data is
// skipped, never read.
const stepReadAhead = 32 << 10

// errPastSection is what a cursor returns when a read or skip would cross
// the end of its section; callers wrap it with what they were reading.
var errPastSection = errors.New("runs past the end of its section")

// cursor reads little-endian fields from [pos, end) of an io.ReaderAt,
// through a read-ahead window of `ahead` bytes (0: exact reads). skip moves
// past bytes without reading them, which is how image data is passed over
// during a scan.
type cursor struct {
	r        io.ReaderAt
	pos, end int64
	ahead    int
	win      []byte // bytes of the file starting at winPos
	winPos   int64
	buf      []byte // storage behind win, reused
}

func newCursor(r io.ReaderAt, s Section, ahead int) *cursor {
	// Sections are bounds-checked against the file size in Open, so both
	// ends fit in an int64.
	return &cursor{r: r, pos: int64(s.Offset), end: int64(s.end()), ahead: ahead}
}

// remaining is the number of section bytes after the cursor.
func (c *cursor) remaining() int64 { return c.end - c.pos }

// next returns the next n bytes, valid until the next call.
func (c *cursor) next(n int) ([]byte, error) {
	if n < 0 || int64(n) > c.remaining() {
		return nil, errPastSection
	}
	if c.pos >= c.winPos && c.pos+int64(n) <= c.winPos+int64(len(c.win)) {
		out := c.win[c.pos-c.winPos:][:n]
		c.pos += int64(n)
		return out, nil
	}
	// n is at most the section's remaining bytes, which Open bounded by the
	// file size; callers ask for fixed fields, names (< 64 KiB) and one
	// frame's state/action record (< 512 KiB).
	want := int(min(int64(max(n, c.ahead)), c.remaining()))
	if cap(c.buf) < want {
		c.buf = make([]byte, want)
	}
	if err := readFull(c.r, c.buf[:want], c.pos); err != nil {
		return nil, err
	}
	c.win, c.winPos = c.buf[:want], c.pos
	c.pos += int64(n)
	return c.win[:n], nil
}

// skip moves n bytes forward without reading them.
func (c *cursor) skip(n uint64) error {
	if n > uint64(c.remaining()) {
		return errPastSection
	}
	c.pos += int64(n)
	return nil
}

func (c *cursor) u16() (uint16, error) {
	b, err := c.next(2)
	if err != nil {
		return 0, err
	}
	return le.Uint16(b), nil
}

// readFull reads exactly len(b) bytes at off. A short read means the file
// shrank after Open checked its size: an I/O error, not corruption.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("kdb: read %d bytes at offset %d: %w", len(b), off, err)
}

// float32s decodes little-endian float32 values from b into dst.
func float32s(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(le.Uint32(b[4*i:]))
	}
}
