package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// compactDemo builds the small demo as u8 letterbox with pad 9, with
// compact_images when compact, and the overrides.
func compactDemo(t *testing.T, compact bool, overrides map[string]any) (dir, outRoot string) {
	t.Helper()
	o := map[string]any{"dtype": "u8", "pad_value": 9, "target_size": []int{96, 64}, "shard_target_mb": 0.05}
	if compact {
		o["compact_images"] = true
	}
	maps.Copy(o, overrides)
	return smallDemo(t, o)
}

// TestCompactImages builds the same config with and without
// compact_images through the CLI. The compact version stores fewer bytes
// (shard_version 5), and hands out the same tensors byte for byte: every
// Sample, every batch (checked once and rechecked on every read), the Zarr
// export's image chunks; verify --full passes, and a flipped region byte
// is found by verify and refused by the reader. Two builds with different
// worker counts give the same shards.
func TestCompactImages(t *testing.T) {
	plainDir, _ := compactDemo(t, false, nil)
	compactDir, compactRoot := compactDemo(t, true, nil)
	plainM, err := warehouse.ReadManifest(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := warehouse.ReadManifest(compactDir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version == plainM.Version || !strings.Contains(m.VersionRecipe, "compact_images") || strings.Contains(plainM.VersionRecipe, "compact_images") {
		t.Fatalf("versions %s and %s; recipes %q, %q", m.Version, plainM.Version, m.VersionRecipe, plainM.VersionRecipe)
	}
	if m.DefaultShardVersion != uint32(shard.Version5) || plainM.DefaultShardVersion != uint32(shard.Version4) || len(m.Shards) < 2 {
		t.Fatalf("default_shard_version %d (plain %d), %d shards", m.DefaultShardVersion, plainM.DefaultShardVersion, len(m.Shards))
	}
	sum := func(m *warehouse.Manifest) (n int64) {
		for _, s := range m.Shards {
			if s.ShardVersion != m.DefaultShardVersion {
				t.Fatalf("%s: shard_version %d", s.ID, s.ShardVersion)
			}
			n += s.Bytes
		}
		return n
	}
	plainBytes, compactBytes := sum(plainM), sum(m)
	if compactBytes >= plainBytes {
		t.Fatalf("compact shards take %d bytes, plain %d", compactBytes, plainBytes)
	}
	t.Logf("shards: plain %d bytes, compact %d (%.2fx)", plainBytes, compactBytes, float64(plainBytes)/float64(compactBytes))

	// Determinism: one worker gives the same shards as the default count.
	oneDir, _ := compactDemo(t, true, map[string]any{"workers": 1})
	one, err := warehouse.ReadManifest(oneDir)
	if err != nil {
		t.Fatal(err)
	}
	if one.Version != m.Version || !slices.Equal(one.Shards, m.Shards) {
		t.Fatalf("workers 1: version %s shards %+v, default workers %s %+v", one.Version, one.Shards, m.Version, m.Shards)
	}

	open := func(dir string, o warehouse.OpenOptions) *warehouse.Reader {
		r, err := warehouse.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	plain := open(plainDir, warehouse.OpenOptions{})
	for _, o := range []warehouse.OpenOptions{{}, {RecheckSamples: true}} {
		compact := open(compactDir, o)
		if compact.Len() != plain.Len() || compact.Len() == 0 || !compact.Layout().Compact {
			t.Fatalf("%d compact samples, %d plain, layout %v", compact.Len(), plain.Len(), compact.Layout())
		}
		for i := range plain.Len() {
			a, b := mustSample(t, compact, i), mustSample(t, plain, i)
			if !bytes.Equal(a.ImageU8(), b.ImageU8()) || !bytes.Equal(a.BoxesRaw(), b.BoxesRaw()) || !bytes.Equal(a.MaskRaw(), b.MaskRaw()) ||
				a.Meta() != b.Meta() || !slices.Equal(a.ClassIndex(), b.ClassIndex()) {
				t.Fatalf("sample %d differs", i)
			}
		}
		for _, opts := range []warehouse.BatchOptions{
			{BatchSize: 5, Seed: 3, Shuffle: warehouse.ShuffleGlobal},
			{BatchSize: 7, Shuffle: warehouse.ShuffleNone}, // long runs: one pread per chunk of regions
		} {
			got, want := readAllBatches(t, compact, opts), readAllBatches(t, plain, opts)
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%+v: %d batches, plain %d", opts, len(got), len(want))
			}
			for k := range got {
				g, w := got[k], want[k]
				if !slices.Equal(g.Indices, w.Indices) || !bytes.Equal(g.Images, w.Images) || !bytes.Equal(g.Boxes, w.Boxes) ||
					!bytes.Equal(g.Mask, w.Mask) || !slices.Equal(g.ClassIndex, w.ClassIndex) || !slices.Equal(g.BoxCount, w.BoxCount) ||
					!slices.Equal(g.Meta, w.Meta) || !slices.Equal(g.Extras, w.Extras) {
					t.Fatalf("%+v: batch %d differs", opts, k)
				}
			}
		}
	}

	// load and verify --full through the CLI.
	if res := runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", compactRoot, "--batch", "4"); res.code != exitOK {
		t.Fatalf("load: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", compactDir, "--full", "--quiet"); res.code != exitOK {
		t.Fatalf("verify --full: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// The Zarr export of both: the same image chunks, byte for byte.
	exportImages := func(dir string) map[string][]byte {
		store := filepath.Join(t.TempDir(), "export.zarr")
		res := runCLI(t, context.Background(), nil, "export", "zarr", "--tensor-warehouse", dir, "--out", store, "--shard-samples", "4", "--quiet")
		if res.code != 0 {
			t.Fatalf("export zarr %s: exit %d\n%s", dir, res.code, res.stderr)
		}
		files := map[string][]byte{}
		root := filepath.Join(store, "images", "c")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			files[strings.TrimPrefix(p, root)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	if got, want := exportImages(compactDir), exportImages(plainDir); len(got) == 0 || !maps.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("zarr image chunks: %d files compact, %d plain, or they differ", len(got), len(want))
	}

	// A flipped byte of a stored region: verify --full finds it, a reader
	// refuses the sample.
	compact := open(compactDir, warehouse.OpenOptions{})
	s, err := compact.Sample(compact.Len() - 1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(compactDir, m.Shards[len(m.Shards)-1].RelativePath)
	sr, err := shard.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	g := sr.Region(s.ShardIndex)
	sr.Close()
	if g.W == 0 {
		t.Fatal("the last sample is all pad")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[g.Offset] ^= 0x40
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", compactDir, "--full", "--quiet"); res.code != exitFindings || !strings.Contains(res.stdout+res.stderr, "crc32c") {
		t.Fatalf("verify --full of a flipped region byte: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	fresh := open(compactDir, warehouse.OpenOptions{})
	if _, err := fresh.Sample(compact.Len() - 1); err == nil || !strings.Contains(err.Error(), "crc32c") {
		t.Fatalf("reading the flipped sample: %v", err)
	}
	// The batch path checks the region bytes as read, before restoring them.
	want := fmt.Sprintf("%s: warehouse sample %d: shard: corrupt: sample %d: crc32c 0x", path, compact.Len()-1, s.ShardIndex)
	for _, shuffle := range []warehouse.Shuffle{warehouse.ShuffleNone, warehouse.ShuffleGlobal} {
		r := open(compactDir, warehouse.OpenOptions{})
		it, err := r.Batches(context.Background(), warehouse.BatchOptions{BatchSize: 3, Shuffle: shuffle, Remainder: warehouse.PadRemainder})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = it.Next()
		}
		if err == io.EOF || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("batches, shuffle %v: %v\nwant %q...", shuffle, err, want)
		}
		it.Close()
	}
}

// readAllBatches reads every batch of one epoch of r, copied.
func readAllBatches(t *testing.T, r *warehouse.Reader, opts warehouse.BatchOptions) []warehouse.Batch {
	t.Helper()
	it, err := r.Batches(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []warehouse.Batch
	for {
		b, err := it.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c := *b
		c.Indices, c.Images, c.Boxes, c.Mask = slices.Clone(b.Indices), slices.Clone(b.Images), slices.Clone(b.Boxes), slices.Clone(b.Mask)
		c.ClassIndex, c.BoxCount, c.Meta, c.Extras = slices.Clone(b.ClassIndex), slices.Clone(b.BoxCount), slices.Clone(b.Meta), slices.Clone(b.Extras)
		out = append(out, c)
	}
}
