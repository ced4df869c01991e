//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoadColdSamples: load --json counts the samples it read from disk,
// their pages not in the page cache (shards.cold_samples), plain and
// compact: none on a warm cache, some after the shards were dropped from
// it. The read-ahead advice follows that count (warehouse/readahead.go).
func TestLoadColdSamples(t *testing.T) {
	for _, compact := range []bool{false, true} {
		// Images of 576 KB in shards of a few: a shard's first page fault (its
		// tables) reads ahead a small shard whole, before any pread of it.
		dir, _ := compactDemo(t, compact, map[string]any{"target_size": []int{512, 384}, "shard_target_mb": 2})
		load := func() int64 {
			rep, res := loadJSON(t, nil, "--tensor-warehouse", dir, "--batch", "2", "--workers", "1")
			if res.code != exitOK || rep.Shards == nil {
				t.Fatalf("compact %v: load: exit %d\n%s", compact, res.code, res.stderr)
			}
			return rep.Shards.ColdSamples
		}
		load() // every page cached after it
		if cold := load(); cold != 0 {
			t.Errorf("compact %v: a warm load read %d samples from disk", compact, cold)
		}
		shards, err := filepath.Glob(filepath.Join(dir, "shards", "*"))
		if err != nil || len(shards) == 0 {
			t.Fatalf("no shards in %s: %v", dir, err)
		}
		dropFromPageCache(t, shards)
		if cold := load(); cold == 0 {
			t.Skipf("compact %v: no sample read from disk after DONTNEED (tmpfs, or a kernel without RWF_NOWAIT)", compact)
		} else {
			t.Logf("compact %v: %d samples read from disk after DONTNEED", compact, cold)
		}
	}
}

// dropFromPageCache drops the files at paths from the page cache
// (POSIX_FADV_DONTNEED after an fsync: DONTNEED keeps dirty pages). On
// tmpfs it drops nothing.
func dropFromPageCache(t *testing.T, paths []string) {
	t.Helper()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Sync()
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}
