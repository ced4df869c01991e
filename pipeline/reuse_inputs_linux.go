package pipeline

import (
	"os"
	"syscall"
	"time"
)

// fileIdentityStat is the device, inode and status change time of fi.
func fileIdentityStat(fi os.FileInfo) (dev, ino uint64, ctime time.Time, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, time.Time{}, false
	}
	return uint64(st.Dev), st.Ino, time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec)), true
}
