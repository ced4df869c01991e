//go:build linux

package shard

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// WillNeed is posix_fadvise(POSIX_FADV_WILLNEED) on [off, off+n) of f:
// Linux starts reading those pages into the page cache and returns. It is
// only a hint, so errors are ignored. The warehouse reader's read-ahead
// uses it too.
func WillNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}

// askable is cleared the first time the kernel refuses RWF_NOWAIT (older
// than 4.14, or a file system without it): ReadCached then asks no more, in
// this process, whatever the file (a warehouse on NFS mixed with one on a
// local disk gets the advice for every batch of both).
var askable atomic.Bool

func init() { askable.Store(true) }

// ReadCached reads into p, from offset off of f, only what the page cache
// holds, without waiting for the disk (preadv2 with RWF_NOWAIT): it returns
// how many bytes it read, a prefix of p, fewer than len(p) where a page was
// not cached (or at the end of the file), and asked false where the kernel
// cannot be asked, in which case it read nothing. A warm read is one read
// either way; a cold one is a refused call and then the caller's ReadAt of
// the rest. The warehouse reader counts its cold samples so, the cue for
// its read-ahead advice.
func ReadCached(f *os.File, p []byte, off int64) (n int, asked bool) {
	if !askable.Load() || len(p) == 0 {
		return 0, false
	}
	n, err := unix.Preadv2(int(f.Fd()), [][]byte{p}, off, unix.RWF_NOWAIT)
	switch {
	case err == nil:
		return n, true
	case errors.Is(err, unix.EAGAIN):
		return 0, true
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		askable.Store(false)
		return 0, false
	}
	return 0, true // the caller's ReadAt meets the error again and reports it
}
