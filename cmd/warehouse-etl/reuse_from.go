package main

import (
	"fmt"
	"os"

	"warehouse-etl/objstore"
)

// checkReuseFrom refuses a --reuse-from that names nothing reuse can read:
// a path that does not exist or is not a directory, or an s3:// location
// (reuse reads shards on this machine; a version in a store has none
// here). A directory is a version directory (it holds manifest.json) or
// an output root (its versions are read, if any).
func checkReuseFrom(paths []string) error {
	for _, p := range paths {
		if objstore.IsLocation(p) {
			return usageError{fmt.Errorf("--reuse-from %s: reuse reads shards on this machine, not in an object store: give a local output root or version directory (docs/reuse.md)", p)}
		}
		fi, err := os.Stat(p)
		if err != nil {
			return usageError{fmt.Errorf("--reuse-from %s: %v: give an output root or a version directory", p, err)}
		}
		if !fi.IsDir() {
			return usageError{fmt.Errorf("--reuse-from %s: not a directory: give an output root or a version directory", p)}
		}
	}
	return nil
}
