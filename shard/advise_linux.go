//go:build linux

package shard

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseWillNeed is posix_fadvise(POSIX_FADV_WILLNEED) on [off, off+n) of
// f: Linux starts reading those pages and returns. It is only a hint, so
// errors are ignored.
func adviseWillNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
