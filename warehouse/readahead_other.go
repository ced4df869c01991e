//go:build !linux

package warehouse

import "os"

// willNeed does nothing where posix_fadvise is not used.
func willNeed(*os.File, int64, int64) {}
