//go:build !linux

package shard

import "os"

// adviseWillNeed does nothing where posix_fadvise is not used.
func adviseWillNeed(*os.File, int64, int64) {}
