package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// stripSampleChecksums turns the version at dir (a copy) into what a build
// before per-sample checksums wrote: every shard ends after its extras,
// checksum_offset is 0, shard_version is 1 (the legacy rule), and the
// manifest records the shorter sizes, their sha256 and shard_version 1 (and
// is sealed again).
func stripSampleChecksums(t *testing.T, dir string) {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for k := range m.Shards {
		e := &m.Shards[k]
		path := filepath.Join(dir, filepath.FromSlash(e.RelativePath))
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := shard.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		raw = raw[:sr.Layout().FileSizeWithoutChecksums(sr.Len())]
		binary.LittleEndian.PutUint32(raw[4:], uint32(shard.Version1)) // shard_version: the legacy rule
		binary.LittleEndian.PutUint64(raw[72:], 0)                     // checksum_offset
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		e.ShardVersion = uint32(shard.Version1)
		e.Bytes, e.ChecksumSHA256 = int64(len(raw)), fmt.Sprintf("%x", sha256.Sum256(raw))
	}
	m.DefaultShardVersion = uint32(shard.Version1)
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := warehouse.WriteManifest(dir, enc); err != nil { // resealed: an older warehouse, not a damaged one
		t.Fatal(err)
	}
}

// flipShardByte inverts byte off of shard k of the version at dir.
func flipShardByte(t *testing.T, dir string, k int, off int64) {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.FromSlash(m.Shards[k].RelativePath))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[off] ^= 0xFF
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// uncheckedCase is an older warehouse (no checksum sections) for the Python
// tests: Path reads like the original at Original; Flipped is Path with a
// flipped image byte in sample Sample, read without complaint by both
// readers because nothing records what its bytes were.
type uncheckedCase struct {
	Original string `json:"original"`
	Path     string `json:"path"`
	Flipped  string `json:"flipped"`
	Sample   int    `json:"sample"`
}

// uncheckedFixture makes the uncheckedCase of the version at dir and checks
// the Go reader's side of it.
func uncheckedFixture(t *testing.T, dir string) uncheckedCase {
	t.Helper()
	c := uncheckedCase{Original: dir, Path: copyVersion(t, dir)}
	stripSampleChecksums(t, c.Path)
	c.Flipped = copyVersion(t, c.Path)
	flipShardByte(t, c.Flipped, 0, shard.HeaderSize+3) // sample 0's image
	for _, p := range []string{c.Path, c.Flipped} {
		r, err := warehouse.Open(p, warehouse.OpenOptions{RecheckSamples: true})
		if err != nil {
			t.Fatal(err)
		}
		if checked, shards := r.SampleChecksums(); checked != 0 || shards == 0 {
			t.Fatalf("%s: %d of %d shards with sample checksums, want none", p, checked, shards)
		}
		for i := range r.Len() {
			if _, err := r.Sample(i); err != nil {
				t.Fatalf("%s: sample %d of an older warehouse: %v", p, i, err)
			}
		}
		if r.SamplesVerified() != 0 {
			t.Fatalf("%s: %d samples verified without checksums", p, r.SamplesVerified())
		}
		r.Close()
	}
	return c
}

// TestLoadSampleChecksums: load and inspect say whether a warehouse has
// per-sample checksums and how load checks them; a flipped image byte is
// refused by load naming the shard and the sample (exit 1), read with
// --no-verify-samples, and read unchecked in an older warehouse.
func TestLoadSampleChecksums(t *testing.T) {
	dir, _ := smallDemo(t, nil)
	ctx := context.Background()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}

	// Two padded epochs of 20 rows: every sample of 19 read twice or more,
	// checked once.
	rep, res := loadJSON(t, nil, "--tensor-warehouse", dir, "--batch", "4", "--epochs", "2", "--remainder", "pad")
	if res.code != exitOK || rep.SampleChecksums != "yes" || rep.VerifySamples != "first read" || rep.SamplesVerified != 19 {
		t.Fatalf("load: exit %d, checksums %q verify %q verified %d\n%s", res.code, rep.SampleChecksums, rep.VerifySamples, rep.SamplesVerified, res.stderr)
	}
	rep, res = loadJSON(t, nil, "--tensor-warehouse", dir, "--batch", "4", "--epochs", "2", "--recheck-samples")
	if res.code != exitOK || rep.VerifySamples != "every read" || rep.SamplesVerified != rep.Samples {
		t.Fatalf("load --recheck-samples: exit %d, verify %q verified %d of %d", res.code, rep.VerifySamples, rep.SamplesVerified, rep.Samples)
	}
	res = runCLI(t, ctx, nil, "load", "--tensor-warehouse", dir, "--batch", "4", "--quiet")
	if !strings.Contains(res.stdout, "per-sample checksums: yes, checked on first read: 16 checks passed") {
		t.Fatalf("load report:\n%s", res.stdout)
	}
	res = runCLI(t, ctx, nil, "inspect", "--tensor-warehouse", dir)
	if !strings.Contains(res.stdout, "per-sample checksums: yes\n") {
		t.Fatalf("inspect:\n%s", res.stdout)
	}
	res = runCLI(t, ctx, nil, "load", "--tensor-warehouse", dir, "--no-verify-samples", "--recheck-samples")
	if res.code != exitUsage {
		t.Fatalf("contradicting flags: exit %d", res.code)
	}

	// Sample 1 of shard 1: its image's 5th byte.
	damaged := copyVersion(t, dir)
	imageBytes := int64(3 * 96 * 64 * 2)
	flipShardByte(t, damaged, 1, shard.HeaderSize+imageBytes+4)
	shardPath := filepath.Join(damaged, filepath.FromSlash(m.Shards[1].RelativePath))
	want := fmt.Sprintf("%s: warehouse sample %d: shard: corrupt: sample 1: crc32c 0x", shardPath, m.Shards[1].FirstSample+1)
	for _, shuffle := range []string{"none", "global"} {
		res = runCLI(t, ctx, nil, "load", "--tensor-warehouse", damaged, "--batch", "1", "--shuffle", shuffle, "--quiet")
		if res.code != exitFailure || !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, ", the checksum table says 0x") {
			t.Fatalf("load (%s) of a flipped image byte: exit %d\n%s\nwant %q", shuffle, res.code, res.stderr, want)
		}
	}
	rep, res = loadJSON(t, nil, "--tensor-warehouse", damaged, "--batch", "1", "--no-verify-samples")
	if res.code != exitOK || rep.VerifySamples != "off" || rep.SamplesVerified != 0 {
		t.Fatalf("load --no-verify-samples: exit %d, verify %q verified %d\n%s", res.code, rep.VerifySamples, rep.SamplesVerified, res.stderr)
	}
	res = runCLI(t, ctx, nil, "load", "--tensor-warehouse", damaged, "--batch", "1", "--no-verify-samples", "--quiet")
	if !strings.Contains(res.stdout, "per-sample checksums: yes, not checked (--no-verify-samples)") {
		t.Fatalf("load --no-verify-samples report:\n%s", res.stdout)
	}

	// An older warehouse reads, unchecked, and says so.
	older := copyVersion(t, dir)
	stripSampleChecksums(t, older)
	flipShardByte(t, older, 1, shard.HeaderSize+imageBytes+4)
	rep, res = loadJSON(t, nil, "--tensor-warehouse", older, "--batch", "1")
	if res.code != exitOK || rep.SampleChecksums != "none (older warehouse)" || rep.SamplesVerified != 0 {
		t.Fatalf("load of an older warehouse: exit %d, checksums %q verified %d\n%s", res.code, rep.SampleChecksums, rep.SamplesVerified, res.stderr)
	}
	res = runCLI(t, ctx, nil, "load", "--tensor-warehouse", older, "--batch", "1", "--quiet")
	if !strings.Contains(res.stdout, "per-sample checksums: none (older warehouse), samples read unchecked") {
		t.Fatalf("load report of an older warehouse:\n%s", res.stdout)
	}
	res = runCLI(t, ctx, nil, "inspect", "--tensor-warehouse", older)
	if !strings.Contains(res.stdout, "per-sample checksums: none (older warehouse)\n") {
		t.Fatalf("inspect of an older warehouse:\n%s", res.stdout)
	}
}
