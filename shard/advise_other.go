//go:build !linux

package shard

import "os"

// WillNeed does nothing where posix_fadvise is not used.
func WillNeed(*os.File, int64, int64) {}
