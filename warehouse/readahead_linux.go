//go:build linux

package warehouse

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed is posix_fadvise(POSIX_FADV_WILLNEED) on [off, off+n) of f:
// Linux starts reading those pages into the page cache and returns. Errors
// are ignored: the advice is only a hint.
func willNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
