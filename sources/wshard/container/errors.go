package container

import (
	"errors"
	"fmt"
	"strconv"
)

// The kinds of failure a container can report. Every error a Reader
// returns for bad bytes is an *Error wrapping exactly one of them, so a
// caller maps failures to its own codes with errors.Is. Operating-system
// read failures are returned as *Error wrapping the I/O error instead.
var (
	// ErrCorrupt: the header, index or string table is not valid, or the
	// file changed size under the reader.
	ErrCorrupt = errors.New("corrupt")
	// ErrChecksum: a block's CRC32C or a name's xxHash64 does not match.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrDecompress: a block's compression is unknown, its original size is
	// beyond the limit, or its bytes do not decompress to that size.
	ErrDecompress = errors.New("decompression failed")
)

// Error is a container failure, naming the file and, when one is at fault,
// the block.
type Error struct {
	File   string // the name given to Open or NewReader
	Block  string // the block's name; "" for the header and index, "#<i>" for an entry whose name is unreadable
	Err    error  // ErrCorrupt, ErrChecksum, ErrDecompress or an I/O error
	Detail string // what exactly is wrong
}

func (e *Error) Error() string {
	msg := "container: " + e.File
	if e.Block != "" {
		msg += ": block " + strconv.Quote(e.Block)
	}
	msg += ": " + e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// fail builds an *Error for file and block.
func fail(file, block string, kind error, format string, args ...any) *Error {
	return &Error{File: file, Block: block, Err: kind, Detail: fmt.Sprintf(format, args...)}
}

// entryLabel names an entry whose name could not be resolved.
func entryLabel(i int) string { return "#" + strconv.Itoa(i) }
