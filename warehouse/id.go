// Package warehouse is the version format and the read API: the version
// key and its recipe, the manifest, the source fingerprint, and Open,
// Reader and Batches, which training reads a version with. What changes an
// output root (publishing a version, its locks, "latest", cleanup and GC)
// is package outputroot; checking a version is package verify.
//
// A warehouse root looks like this (outputroot's package comment lists the
// entries builds and GC add):
//
//	<output_root>/
//	  latest -> v<16 hex>           symlink, replaced atomically by each publish
//	  v<16 hex>/                    one directory per version, a pure function of the version;
//	                                readers flock it shared while open (pinnedDir)
//	    manifest.json               written last; its presence means the version is complete
//	    shards/shard-00000.twh      TWH1 shards (docs/format/shard.md)
//	    samples.jsonl               one line per input sample, kept or not
//	    fingerprint.jsonl           every input file's path, size and mtime
//	    build_report.json           timings and throughput (not deterministic)
//	  .v<16 hex>.readers            flock held shared by every reader of that version (LockForReading)
//	  .v<16 hex>.lock               flock held while a build of that version runs (outputroot)
//	  .v<16 hex>.tmp-*              a build in progress (or a crashed one, removed by the next build)
package warehouse

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// ID is a warehouse version: the sha256 of the canonical version recipe.
type ID [sha256.Size]byte

// String is the lowercase hex form stored in the manifest.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// DirName is the version directory's name: a pure function of the version,
// so a rerun of the same recipe finds the same directory.
func (id ID) DirName() string { return "v" + id.String()[:16] }

// ParseID parses the 64-hex-digit form.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("version %q: want %d hex digits, have %d", s, 2*len(id), len(s))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("version %q: %w", s, err)
	}
	return id, nil
}
