//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// TestCheckedReadsWarmAndCold: checked batch reads (each sample's CRC-32C
// folded into its copy into the batch, or into the compact restore) on a
// warm and on a cold page cache, plain and compact: the same batches, the
// samples read from disk counted (none warm), and a flipped stored byte
// refused with the same error, whether its sample was cached or read from
// disk.
func TestCheckedReadsWarmAndCold(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "compact"}[compact], func(t *testing.T) {
			// Images of 576 KB in shards of a few: a shard's first page fault
			// (its tables) does not read ahead its images (TestLoadColdSamples).
			dir, _ := compactDemo(t, compact, map[string]any{"target_size": []int{512, 384}, "shard_target_mb": 2})
			m, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			shards := make([]string, len(m.Shards))
			for k, s := range m.Shards {
				shards[k] = filepath.Join(dir, s.RelativePath)
			}
			warm := func() {
				for _, p := range shards {
					if _, err := os.ReadFile(p); err != nil {
						t.Fatal(err)
					}
				}
			}
			cold := func() { dropFromPageCache(t, shards) }
			opts := warehouse.BatchOptions{BatchSize: 3, Shuffle: warehouse.ShuffleNone, Remainder: warehouse.PadRemainder, Workers: 1}
			// read reads one epoch with a fresh reader (every sample checked)
			// after prepare: its images, the samples counted cold, the error.
			read := func(prepare func()) (images []byte, coldSamples int64, err error) {
				prepare()
				r, err := warehouse.Open(dir, warehouse.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				it, err := r.Batches(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				defer it.Close()
				for {
					b, err := it.Next()
					if err != nil {
						if err == io.EOF {
							err = nil
						}
						return images, r.Stats().ColdSamples, err
					}
					images = append(images, b.Images...)
				}
			}
			warmImages, warmCold, err := read(warm)
			if err != nil || warmCold != 0 {
				t.Fatalf("warm: %v, %d samples counted cold", err, warmCold)
			}
			coldImages, coldCold, err := read(cold)
			if err != nil {
				t.Fatalf("cold: %v", err)
			}
			if coldCold == 0 {
				t.Skip("no sample read from disk after DONTNEED (tmpfs, or a kernel without RWF_NOWAIT): one path only")
			}
			if !bytes.Equal(warmImages, coldImages) || len(warmImages) == 0 {
				t.Fatalf("warm and cold epochs differ (%d and %d image bytes)", len(warmImages), len(coldImages))
			}

			// Flip a byte the first sample of the last shard stores: on a
			// cold cache the pread of a shard's first sample is what reads the
			// rest of it ahead (read_ahead_kb), so this is the sample read from
			// disk.
			last := len(m.Shards) - 1
			sr, err := shard.Open(shards[last])
			if err != nil {
				t.Fatal(err)
			}
			local := 0
			var at int64
			if compact {
				g := sr.Region(local)
				at = g.Offset + int64(g.Bytes(3))/3
			} else {
				off, n := sr.ImageSpan(local, 1)
				at = off + int64(n)/3
			}
			sr.Close()
			raw, err := os.ReadFile(shards[last])
			if err != nil {
				t.Fatal(err)
			}
			raw[at] ^= 0x20
			if err := os.WriteFile(shards[last], raw, 0o644); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%s: warehouse sample %d: shard: corrupt: sample %d: crc32c 0x", shards[last], m.Shards[last].FirstSample, local)
			for name, prepare := range map[string]func(){"warm": warm, "cold": cold} {
				if _, _, err := read(prepare); err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("%s, flipped byte: %v\nwant %q...", name, err, want)
				}
			}
		})
	}
}
