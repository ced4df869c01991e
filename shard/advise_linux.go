//go:build linux

package shard

import (
	"os"

	"golang.org/x/sys/unix"
)

// WillNeed is posix_fadvise(POSIX_FADV_WILLNEED) on [off, off+n) of f:
// Linux starts reading those pages into the page cache and returns. It is
// only a hint, so errors are ignored. The warehouse reader's read-ahead
// uses it too.
func WillNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
