//go:build unix

package outputroot

import (
	"io/fs"
	"syscall"
)

// linkedElsewhere reports whether the file fi describes has more than one
// name.
func linkedElsewhere(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}
