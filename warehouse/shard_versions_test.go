package warehouse

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"warehouse-etl/shard"
)

// legacyVersions are the warehouse versions in testdata/legacy, built by
// warehouse-etl/3 before shard versions named features: every shard carries
// shard_version 1 and signals its meta and checksum sections by their
// offsets, and U8 by dtype 2 (docs/format/shard.md, "Versions").
var legacyVersions = []struct {
	dir    string
	dtype  shard.DType
	shards int
}{
	{"etl3-f16/v479317a0303ab2f5", shard.F16, 4},
	{"etl3-u8/v4b86d7ed432eb1da", shard.U8, 2},
}

// copyLegacy copies the version testdata/legacy/<rel> into a temp root and
// returns the copy's version directory: a reader creates its readers lock
// beside the version, which must not land in the repository.
func copyLegacy(t *testing.T, rel string) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "legacy", filepath.FromSlash(rel))
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestLegacyWarehouse reads the checked-in warehouses of warehouse-etl/3:
// shard.Parse detects their sections by the legacy rule, the reader opens
// them with every shard's per-sample checksums and hands out every sample
// as stored (verify's TestLegacyWarehouseVerify: a full verify finds
// nothing).
func TestLegacyWarehouse(t *testing.T) {
	for _, lv := range legacyVersions {
		t.Run(lv.dir, func(t *testing.T) {
			dir := copyLegacy(t, lv.dir)
			m, err := ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.CodeVersion != "warehouse-etl/3" || m.DefaultShardVersion != 1 || len(m.Shards) != lv.shards {
				t.Fatalf("code_version %s, default_shard_version %d, %d shards; want warehouse-etl/3, 1, %d",
					m.CodeVersion, m.DefaultShardVersion, len(m.Shards), lv.shards)
			}
			files := map[string][]byte{}
			for _, e := range m.Shards {
				raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.RelativePath)))
				if err != nil {
					t.Fatal(err)
				}
				files[e.ID] = raw
				sr, err := shard.Parse(raw)
				if err != nil {
					t.Fatalf("%s: %v", e.ID, err)
				}
				h := sr.Header()
				if e.ShardVersion != 1 || h.Version != shard.Version1 || h.DType != lv.dtype || !sr.HasMeta() || !sr.HasSampleChecksums() {
					t.Fatalf("%s: manifest shard_version %d, header %d, dtype %v, meta %v, checksums %v; want 1, 1, %v, true, true",
						e.ID, e.ShardVersion, h.Version, h.DType, sr.HasMeta(), sr.HasSampleChecksums(), lv.dtype)
				}
				for i := range sr.Len() {
					if err := sr.VerifySample(i, nil); err != nil {
						t.Fatalf("%s: %v", e.ID, err)
					}
				}
				if err := sr.Check(); err != nil {
					t.Fatalf("%s: %v", e.ID, err)
				}
			}

			r, err := Open(dir, OpenOptions{RecheckSamples: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if checked, shards := r.SampleChecksums(); checked != lv.shards || shards != lv.shards {
				t.Fatalf("SampleChecksums = %d of %d, want %d of %d", checked, shards, lv.shards, lv.shards)
			}
			imageBytes := int(r.Layout().ImageBytes())
			for i := range r.Len() {
				s, err := r.Sample(i)
				if err != nil {
					t.Fatal(err)
				}
				off := shard.HeaderSize + s.ShardIndex*imageBytes
				if !bytes.Equal(s.Image(), files[s.Shard][off:off+imageBytes]) || s.DType() != lv.dtype {
					t.Fatalf("sample %d (%s %d): image differs from the file's bytes at %d", i, s.Shard, s.ShardIndex, off)
				}
			}
			if r.SamplesVerified() != int64(r.Len()) {
				t.Errorf("SamplesVerified %d, want %d", r.SamplesVerified(), r.Len())
			}

		})
	}
}

// TestShardVersionProblem checks the manifest's side of the versions: from
// shard_version 2 on an entry's size must agree with whether its version has
// the checksum section, and U8 needs shard_version 4; shard_version 1
// entries are judged by their size alone (the legacy rule).
func TestShardVersionProblem(t *testing.T) {
	f16 := shard.Layout{DType: shard.F16, Width: 4, Height: 2, Channels: 3, MaxBoxes: 2}
	u8 := f16
	u8.DType = shard.U8
	// 80 + 3*48 image bytes + 3*16 box bytes + 3*4 mask bytes = 284, the
	// meta section at 288, 24 + 3*88 bytes of it end at 576; the checksum
	// section adds 16 + 3*4 + 4: 608.
	with, without := f16.FileSize(3), f16.FileSizeWithoutChecksums(3)
	u8With := u8.FileSize(3)
	tests := []struct {
		version uint32
		l       shard.Layout
		bytes   int64
		want    string
	}{
		{1, f16, with, ""},
		{1, f16, without, ""},
		{1, u8, u8With, ""},
		{2, f16, without, ""},
		{2, f16, with, "shard_version 2 has no per-sample checksums, but bytes 608 is the size with them"},
		{3, f16, with, ""},
		{3, f16, without, "shard_version 3 has per-sample checksums, but bytes 576 is the size without them"},
		{4, f16, with, ""},
		{4, u8, u8With, ""},
		{3, u8, u8With, "shard_version 3 has no dtype U8, shard_version 4 adds it"},
		{2, u8, u8.FileSizeWithoutChecksums(3), "shard_version 2 has no dtype U8, shard_version 4 adds it"},
	}
	for _, tc := range tests {
		e := &Shard{ShardVersion: tc.version, Samples: 3, Bytes: tc.bytes}
		if got := shardVersionProblem(e, tc.l); got != tc.want {
			t.Errorf("shard_version %d, %v, %d bytes: %q, want %q", tc.version, tc.l.DType, tc.bytes, got, tc.want)
		}
		if tc.want == "" && hasSampleChecksums(e, tc.l) != (tc.bytes == tc.l.FileSize(3)) {
			t.Errorf("shard_version %d, %d bytes: hasSampleChecksums %v", tc.version, tc.bytes, hasSampleChecksums(e, tc.l))
		}
	}
}
