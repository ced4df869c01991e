//go:build !linux

package shard

import "os"

// WillNeed does nothing where posix_fadvise is not used.
func WillNeed(*os.File, int64, int64) {}

// ReadCached cannot ask the page cache here: it reads nothing and returns
// asked false (the Linux version says what it does).
func ReadCached(*os.File, []byte, int64) (n int, asked bool) { return 0, false }
