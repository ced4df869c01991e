package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"warehouse-etl/internal/progress"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// badInputCase is one broken warehouse: what Open says, what the first
// sample of the broken shard says when Open succeeds (with and without
// VerifyChecksums), and what Verify finds, quick and full. Messages are
// templates over the fixture (%[1]s = version dir, %[2]s = shard path,
// %[3]s = the shard's actual sha256, %[4]s = its recorded sha256).
type badInputCase struct {
	name   string
	shard  int // the shard the case breaks
	break_ func(t *testing.T, fx *warehousetest.Fixture)

	open       string // error of Open; "" when Open succeeds
	sample     string // error of Sample without checksums; "" = silently returns the bytes
	sampleSums string // error of Sample with VerifyChecksums
	quick      []Finding
	full       []Finding
}

func badInputCases() []badInputCase {
	const checksum = "sha256 %[3]s, the manifest says %[4]s"
	corrupt := func(shard, detail string) []Finding {
		return []Finding{{Kind: FindingShardCorrupt, Shard: shard, Sample: -1, Detail: "%[2]s: shard: corrupt: " + detail}}
	}
	withChecksum := func(shard string, fs []Finding) []Finding {
		return append([]Finding{{Kind: FindingChecksum, Shard: shard, Sample: -1, Detail: checksum}}, fs...)
	}
	s1, s2 := "shards/shard-00001.twh", "shards/shard-00002.twh"
	return []badInputCase{
		{
			name: "truncated shard", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				if err := os.Truncate(fx.ShardPath(1), fx.M.Shards[1].Bytes-10); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[2]s: 1210 bytes, the manifest says 1220",
			quick: []Finding{{Kind: FindingShardSize, Shard: s1, Sample: -1, Detail: "%[2]s: 1210 bytes, the manifest says 1220"}},
			full:  []Finding{{Kind: FindingShardSize, Shard: s1, Sample: -1, Detail: "%[2]s: 1210 bytes, the manifest says 1220"}},
		},
		{
			name: "truncated shard, manifest bytes edited to match", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				if err := os.Truncate(fx.ShardPath(1), 1174); err != nil {
					t.Fatal(err)
				}
				fx.M.Shards[1].Bytes = 1174
				fx.WriteManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)"}},
		},
		{
			// From shard_version 2 on the version decides whether a shard
			// has per-sample checksums, and the manifest's size must agree.
			name: "checksum section cut off, manifest bytes edited to match", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				if err := os.Truncate(fx.ShardPath(1), 1184); err != nil {
					t.Fatal(err)
				}
				fx.M.Shards[1].Bytes = 1184
				fx.WriteManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them"}},
		},
		{
			name: "manifest says shard_version 2 for a shard with checksums", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				fx.M.Shards[1].ShardVersion = 2
				fx.WriteManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them"}},
		},
		{
			name: "flipped magic byte", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.FlipByte(t, 1, 0) },
			sample:     `%[2]s: shard: corrupt: bad magic "\xabWH1", want "TWH1"`,
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, `bad magic "\xabWH1", want "TWH1"`),
			full:       withChecksum(s1, corrupt(s1, `bad magic "\xabWH1", want "TWH1"`)),
		},
		{
			// The low byte of an f16 image element: still finite, so only
			// the checksums can tell: the sample's CRC-32C when it is read
			// (both values computed outside Go, with Python's crc32c
			// package, over the file's bytes), the shard's sha256 when
			// checksums are verified or the warehouse is.
			name: "flipped image byte", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.FlipByte(t, 1, 80+4) },
			sample:     "%[2]s: warehouse sample 4: shard: corrupt: sample 0: crc32c 0xeea18658, the checksum table says 0x79484004",
			sampleSums: "%[2]s: " + checksum,
			full: []Finding{{Kind: FindingChecksum, Shard: s1, Sample: -1, Detail: checksum},
				{Kind: FindingSampleChecksum, Shard: s1, Sample: 4, Detail: "shard: corrupt: sample 0: crc32c 0xeea18658, the checksum table says 0x79484004"}},
		},
		{
			// Sample 0's CRC in the checksum table (shard 1: 4 samples,
			// the section at 1184, CRCs from 1200): the table's own CRC
			// refuses the shard when it is opened.
			name: "flipped checksum table byte", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.FlipByte(t, 1, 1200) },
			sample:     "%[2]s: shard: corrupt: checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775"),
			full:       withChecksum(s1, corrupt(s1, "checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775")),
		},
		{
			name: "wrong dtype tag", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.PatchShard(t, 1, 8, []byte{7}) },
			sample:     "%[2]s: shard: corrupt: unknown dtype 7",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "unknown dtype 7"),
			full:       withChecksum(s1, corrupt(s1, "unknown dtype 7")),
		},
		{
			name: "dtype tag of the other dtype", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.PatchShard(t, 1, 8, []byte{byte(shard.F32)}) },
			sample:     "%[2]s: shard: corrupt: boxes_offset 656, want 1232",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "boxes_offset 656, want 1232"),
			full:       withChecksum(s1, corrupt(s1, "boxes_offset 656, want 1232")),
		},
		{
			name: "future shard_version", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.PatchShard(t, 1, 4, []byte{6}) },
			sample:     "%[2]s: shard: corrupt: unsupported shard_version 6, want 1..5",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "unsupported shard_version 6, want 1..5"),
			full:       withChecksum(s1, corrupt(s1, "unsupported shard_version 6, want 1..5")),
		},
		{
			// shard_version 2 has no checksum section: the header contradicts itself.
			name: "shard_version without the checksum section the shard has", shard: 1,
			break_:     func(t *testing.T, fx *warehousetest.Fixture) { fx.PatchShard(t, 1, 4, []byte{2}) },
			sample:     "%[2]s: shard: corrupt: shard_version 2 has no checksum section, checksum_offset is 1184",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "shard_version 2 has no checksum section, checksum_offset is 1184"),
			full:       withChecksum(s1, corrupt(s1, "shard_version 2 has no checksum section, checksum_offset is 1184")),
		},
		{
			name: "manifest lies about the total", shard: -1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				fx.M.Samples++
				fx.M.Summary.Total.Kept++
				fx.WriteManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11"}},
		},
		{
			name: "manifest lies about a shard's samples", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				fx.M.Shards[1].Samples = 3
				fx.M.Shards[2].FirstSample = 7
				fx.M.Samples--
				fx.M.Summary.Total.Kept--
				fx.WriteManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)"}},
		},
		{
			name: "relative_path with ..", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				fx.M.Shards[1].RelativePath = "../shard-00001.twh"
				fx.WriteManifest(t)
			},
			open:  `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`,
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`}},
		},
		{
			name: "shard symlinked outside the version", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				outside := filepath.Join(fx.Root, "elsewhere.twh")
				if err := os.Rename(fx.ShardPath(1), outside); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, fx.ShardPath(1)); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[2]s: statat shards/shard-00001.twh: path escapes from parent",
			quick: []Finding{{Kind: FindingShardMissing, Shard: s1, Sample: -1, Detail: "%[2]s: statat shards/shard-00001.twh: path escapes from parent"}},
			full:  []Finding{{Kind: FindingShardMissing, Shard: s1, Sample: -1, Detail: "%[2]s: statat shards/shard-00001.twh: path escapes from parent"}},
		},
		{
			name: "missing shard", shard: 2,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				if err := os.Remove(fx.ShardPath(2)); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[2]s: missing: the manifest lists shard shard-00002",
			quick: []Finding{{Kind: FindingShardMissing, Shard: s2, Sample: -1, Detail: "%[2]s: missing: the manifest lists shard shard-00002"}},
			full:  []Finding{{Kind: FindingShardMissing, Shard: s2, Sample: -1, Detail: "%[2]s: missing: the manifest lists shard shard-00002"}},
		},
		{
			// A valid shard of another build with the same size: width and
			// height swapped.
			name: "shard of another layout", shard: 1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				other := warehousetest.Write(t, warehousetest.Spec{DType: shard.F16, Width: 4, Height: 6, MaxBoxes: 3, ShardSizes: []int{4}})
				raw, err := os.ReadFile(other.ShardPath(0))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(fx.ShardPath(1), raw, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			sample:     "%[2]s: header layout {DType:F16 Width:4 Height:6 Channels:3 MaxBoxes:3 ExtraF32:0}, manifest implies {DType:F16 Width:6 Height:4 Channels:3 MaxBoxes:3 ExtraF32:0}",
			sampleSums: "%[2]s: " + checksum,
			quick:      []Finding{{Kind: FindingShardMismatch, Shard: s1, Sample: -1, Detail: "%[2]s: header layout {DType:F16 Width:4 Height:6 Channels:3 MaxBoxes:3 ExtraF32:0}, manifest implies {DType:F16 Width:6 Height:4 Channels:3 MaxBoxes:3 ExtraF32:0}"}},
			full: []Finding{
				{Kind: FindingChecksum, Shard: s1, Sample: -1, Detail: checksum},
				{Kind: FindingShardMismatch, Shard: s1, Sample: -1, Detail: "%[2]s: header layout {DType:F16 Width:4 Height:6 Channels:3 MaxBoxes:3 ExtraF32:0}, manifest implies {DType:F16 Width:6 Height:4 Channels:3 MaxBoxes:3 ExtraF32:0}"},
			},
		},
		{
			// Two shards of the same size swapped: structurally perfect,
			// only the checksums (or the content) tell.
			name: "shards swapped", shard: 0,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				tmp := fx.ShardPath(0) + ".tmp"
				for _, mv := range [][2]string{{fx.ShardPath(0), tmp}, {fx.ShardPath(1), fx.ShardPath(0)}, {tmp, fx.ShardPath(1)}} {
					if err := os.Rename(mv[0], mv[1]); err != nil {
						t.Fatal(err)
					}
				}
			},
			sampleSums: "%[2]s: " + checksum,
			full: []Finding{
				{Kind: FindingChecksum, Shard: "shards/shard-00000.twh", Sample: -1, Detail: checksum},
				{Kind: FindingChecksum, Shard: s1, Sample: -1, Detail: "sha256 %[5]s, the manifest says %[6]s"},
			},
		},
		{
			name: "manifest of a future format", shard: -1,
			break_: func(t *testing.T, fx *warehousetest.Fixture) {
				raw, _ := fx.M.Encode()
				raw = bytes.Replace(raw, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1)
				if err := os.WriteFile(filepath.Join(fx.Dir, warehouse.ManifestName), raw, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[1]s/manifest.json: manifest invalid: format_version 2, this build reads 1",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: format_version 2, this build reads 1"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: format_version 2, this build reads 1"}},
		},
	}
}

// expand fills a case's templates for fx.
func expand(fx *warehousetest.Fixture, k int, tmpl string, t *testing.T) string {
	if tmpl == "" {
		return ""
	}
	kk := max(k, 0)
	other := (kk + 1) % len(fx.M.Shards)
	return fmt.Sprintf(tmpl, fx.Dir, fx.ShardPath(kk), fileSHAIfExists(t, fx.ShardPath(kk)), fx.M.Shards[kk].ChecksumSHA256,
		fileSHAIfExists(t, fx.ShardPath(other)), fx.M.Shards[other].ChecksumSHA256)
}

func fileSHAIfExists(t *testing.T, path string) string {
	if _, err := os.Stat(path); err != nil {
		return "(absent)"
	}
	return fileSHA(t, path)
}

func expandFindings(fx *warehousetest.Fixture, k int, fs []Finding, t *testing.T) []Finding {
	out := make([]Finding, len(fs))
	for i, f := range fs {
		if strings.Contains(f.Detail, "%") { // a template of expand; else literal
			f.Detail = expand(fx, k, f.Detail, t)
		}
		out[i] = f
	}
	return out
}

func TestBadInput(t *testing.T) {
	for _, tt := range badInputCases() {
		t.Run(tt.name, func(t *testing.T) {
			fx := warehousetest.Write(t, warehousetest.DefaultSpec())
			tt.break_(t, fx)
			for _, sums := range []bool{false, true} {
				r, err := warehouse.Open(fx.Root, warehouse.OpenOptions{VerifyChecksums: sums})
				if want := expand(fx, tt.shard, tt.open, t); want != "" {
					if err == nil || err.Error() != want {
						t.Fatalf("Open: %v\nwant %q", err, want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				want := expand(fx, tt.shard, tt.sample, t)
				if sums {
					want = expand(fx, tt.shard, tt.sampleSums, t)
				}
				_, err = r.Sample(int(fx.M.Shards[tt.shard].FirstSample))
				if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
					t.Fatalf("Sample (checksums %v): %v\nwant %q", sums, err, want)
				}
				// A refused shard stays refused, and the others still read.
				if want != "" {
					if _, again := r.Sample(int(fx.M.Shards[tt.shard].FirstSample)); again == nil || again.Error() != want {
						t.Fatalf("second Sample: %v", again)
					}
				}
				r.Close()
			}
			for _, full := range []bool{false, true} {
				got, err := Check(context.Background(), fx.Root, Options{Full: full})
				if err != nil {
					t.Fatal(err)
				}
				want := expandFindings(fx, tt.shard, tt.quick, t)
				if full {
					want = expandFindings(fx, tt.shard, tt.full, t)
				}
				if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("Check(full=%v):\n got %v\nwant %v", full, got, want)
				}
			}
		})
	}
}

func TestVerifyCleanAndContent(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 4, Height: 2, MaxBoxes: 2, Extras: [][]int{{2}}, ShardSizes: []int{3, 3}})
	for _, full := range []bool{false, true} {
		if got, err := Check(context.Background(), fx.Dir, Options{Full: full, Workers: 1}); err != nil || len(got) != 0 {
			t.Fatalf("clean warehouse (full %v): %v, %v", full, got, err)
		}
	}
	// NaN in sample 4's image (shard 1, local 1), +Inf in sample 5's
	// extras, and a class table too short for sample 2's class 2. The
	// shards' sha256 are updated, their per-sample CRC-32Cs are not: the
	// two patched samples are also sample_checksum findings.
	imageBytes := int64(fx.Layout.ImageBytes())
	nan := make([]byte, 4)
	putF32(nan, float32(math.NaN()))
	fx.PatchShard(t, 1, 80+imageBytes+3*4, nan)
	l := fx.Layout
	recordsStart := l.FileSizeWithoutChecksums(3) - 3*int64(l.RecordSize()) - 3*int64(l.ExtraF32*4)
	inf := make([]byte, 4)
	putF32(inf, float32(math.Inf(1)))
	fx.PatchShard(t, 1, recordsStart+3*int64(l.RecordSize())+2*8+4, inf)
	fx.M.Classes = fx.M.Classes[:2]
	for k := range fx.M.Shards {
		fx.M.Shards[k].ChecksumSHA256 = fileSHA(t, fx.ShardPath(k))
	}
	fx.WriteManifest(t)
	got, err := Check(context.Background(), fx.Dir, Options{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	s0, s1 := "shards/shard-00000.twh", "shards/shard-00001.twh"
	want := []Finding{
		{Kind: FindingContent, Shard: s0, Sample: 2, Detail: "class_index[0] is 2, the class table has 2 classes"},
		{Kind: FindingSampleChecksum, Shard: s1, Sample: 4, Detail: "shard: corrupt: sample 1: crc32c 0xcc798a53, the checksum table says 0xb0c61bab"},
		{Kind: FindingNonFinite, Shard: s1, Sample: 4, Detail: "image element 3 is not finite"},
		{Kind: FindingSampleChecksum, Shard: s1, Sample: 5, Detail: "shard: corrupt: sample 2: crc32c 0xed901653, the checksum table says 0x61ff437c"},
		{Kind: FindingNonFinite, Shard: s1, Sample: 5, Detail: "extras element 1 is +Inf"},
		{Kind: FindingContent, Shard: s1, Sample: 5, Detail: "class_index[0] is 2, the class table has 2 classes"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Verify:\n got %v\nwant %v", got, want)
	}
	if quick, _ := Check(context.Background(), fx.Dir, Options{}); len(quick) != 0 {
		t.Fatalf("quick verify reads no values, found %v", quick)
	}
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func TestVerifyNotAWarehouse(t *testing.T) {
	dir := t.TempDir()
	if _, err := Check(context.Background(), dir, Options{}); err == nil || !strings.Contains(err.Error(), "neither a warehouse version") {
		t.Fatalf("Verify of an empty dir: %v", err)
	}
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, fx.Dir, Options{Full: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with a cancelled context: %v", err)
	}
}

func TestFindingString(t *testing.T) {
	tests := []struct {
		f    Finding
		want string
	}{
		{Finding{Kind: FindingManifest, Sample: -1, Detail: "x"}, "manifest: x"},
		{Finding{Kind: FindingChecksum, Shard: "shards/a.twh", Sample: -1, Detail: "y"}, "checksum shards/a.twh: y"},
		{Finding{Kind: FindingNonFinite, Shard: "shards/a.twh", Sample: 0, Detail: "z"}, "nonfinite shards/a.twh sample 0: z"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.f, got, tt.want)
		}
	}
	e := &FindingsError{Dir: "/w/v1", Findings: []Finding{tests[1].f, tests[2].f}}
	if got := e.Error(); got != "/w/v1: 2 verification finding(s), the first: checksum shards/a.twh: y" {
		t.Fatalf("FindingsError: %q", got)
	}
}

// sealFixture gives a fixture the side files a build writes and a manifest
// that records their checksums, sealed by its digest.
func sealFixture(t *testing.T, fx *warehousetest.Fixture) {
	t.Helper()
	files := map[string]string{
		warehouse.SamplesName: "{\"seq\":0}\n", warehouse.FingerprintName: "{\"path\":\"a\"}\n", warehouse.BuildReportName: "{}\n",
		warehouse.ZarrStoreName + "/zarr.json": "{\"zarr_format\":3}", warehouse.ZarrStoreName + "/images/c/0/0/0/0": "chunk bytes",
	}
	fx.M.Files.Checksums = map[string]warehouse.FileChecksum{}
	for name, content := range files {
		p := filepath.Join(fx.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		sum, err := warehouse.FileSHA256(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		fx.M.Files.Checksums[name] = sum
	}
	raw, err := fx.M.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := warehouse.WriteManifest(fx.Dir, raw); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCoversEveryFile(t *testing.T) {
	ctx := context.Background()
	verify := func(t *testing.T, dir string, full bool) *Result {
		t.Helper()
		r, err := Run(ctx, dir, Options{Full: full})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// A version from before checksums: readable, verified, with a note.
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	if _, err := warehouse.ReadManifest(fx.Dir); err != nil {
		t.Fatal(err)
	}
	if r := verify(t, fx.Dir, true); len(r.Findings) != 0 || len(r.Notes) != 1 || r.Notes[0] != NoteUncovered {
		t.Fatalf("uncovered version: %+v", r)
	}

	sealFixture(t, fx)
	for _, full := range []bool{false, true} {
		if r := verify(t, fx.Dir, full); len(r.Findings) != 0 || len(r.Notes) != 0 {
			t.Fatalf("sealed version, full=%v: %+v", full, r)
		}
	}
	if _, err := warehouse.ReadManifest(fx.Dir); err != nil {
		t.Fatal(err)
	}

	// Each case damages a copy and expects the one finding.
	copyDir := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), filepath.Base(fx.Dir))
		if err := os.CopyFS(d, os.DirFS(fx.Dir)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rewrite := func(t *testing.T, d, name string, edit func([]byte) []byte) {
		p := filepath.Join(d, filepath.FromSlash(name))
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, edit(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 1; return b }
	}
	chunk := warehouse.ZarrStoreName + "/images/c/0/0/0/0"
	for _, tc := range []struct {
		name        string
		damage      func(t *testing.T, d string)
		quick, full FindingKind // "" = no finding
		file        string
		readErr     string // warehouse.ReadManifest's error, "" when it reads
	}{
		{"manifest byte", func(t *testing.T, d string) { rewrite(t, d, warehouse.ManifestName, flip(10)) },
			FindingManifestDigest, FindingManifestDigest, warehouse.ManifestName, "the manifest or its digest is damaged"},
		{"digest hex digit", func(t *testing.T, d string) { rewrite(t, d, warehouse.ManifestDigestName, flip(3)) },
			FindingManifestDigest, FindingManifestDigest, warehouse.ManifestName, "the manifest or its digest is damaged"},
		{"digest file name", func(t *testing.T, d string) { rewrite(t, d, warehouse.ManifestDigestName, flip(70)) },
			FindingManifestDigest, FindingManifestDigest, warehouse.ManifestDigestName, `is not "<64 lowercase hex digits>  manifest.json\n"`},
		{"digest missing", func(t *testing.T, d string) { os.Remove(filepath.Join(d, warehouse.ManifestDigestName)) },
			FindingManifestDigest, FindingManifestDigest, warehouse.ManifestDigestName, "manifest.json.sha256: manifest invalid: missing"},
		{"side file byte", func(t *testing.T, d string) { rewrite(t, d, warehouse.SamplesName, flip(2)) },
			FindingFileChecksum, FindingFileChecksum, warehouse.SamplesName, ""},
		{"side file truncated", func(t *testing.T, d string) {
			rewrite(t, d, warehouse.BuildReportName, func(b []byte) []byte { return b[:1] })
		},
			FindingFileSize, FindingFileSize, warehouse.BuildReportName, ""},
		{"side file missing", func(t *testing.T, d string) { os.Remove(filepath.Join(d, warehouse.FingerprintName)) },
			FindingFileMissing, FindingFileMissing, warehouse.FingerprintName, ""},
		{"side file a directory", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, warehouse.FingerprintName))
			os.Mkdir(filepath.Join(d, warehouse.FingerprintName), 0o755)
		}, FindingFileSize, FindingFileSize, warehouse.FingerprintName, ""},
		{"zarr metadata byte", func(t *testing.T, d string) { rewrite(t, d, warehouse.ZarrStoreName+"/zarr.json", flip(0)) },
			FindingFileChecksum, FindingFileChecksum, warehouse.ZarrStoreName + "/zarr.json", ""},
		{"zarr chunk byte", func(t *testing.T, d string) { rewrite(t, d, chunk, flip(4)) },
			"", FindingFileChecksum, chunk, ""},
		{"zarr chunk truncated", func(t *testing.T, d string) { rewrite(t, d, chunk, func(b []byte) []byte { return b[:3] }) },
			FindingFileSize, FindingFileSize, chunk, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t)
			tc.damage(t, d)
			for _, full := range []bool{false, true} {
				want := tc.quick
				if full {
					want = tc.full
				}
				r := verify(t, d, full)
				if want == "" {
					if len(r.Findings) != 0 {
						t.Errorf("full=%v: findings %+v, want none", full, r.Findings)
					}
					continue
				}
				if len(r.Findings) != 1 || r.Findings[0].Kind != want || r.Findings[0].File != tc.file || r.Findings[0].Shard != "" || r.Findings[0].Sample != -1 {
					t.Errorf("full=%v: findings %+v, want one %s naming %s", full, r.Findings, want, tc.file)
				}
			}
			_, err := warehouse.ReadManifest(d)
			switch {
			case tc.readErr == "" && err != nil:
				t.Errorf("ReadManifest: %v", err)
			case tc.readErr != "" && (!errors.Is(err, warehouse.ErrManifest) || !strings.Contains(err.Error(), tc.readErr)):
				t.Errorf("ReadManifest: %v, want warehouse.ErrManifest containing %q", err, tc.readErr)
			}
		})
	}
}

// TestLegacyWarehouseVerify checks the warehouses of warehouse-etl/3 in
// testdata/legacy (every shard shard_version 1, sections by the legacy
// rule): a full verify finds nothing.
func TestLegacyWarehouseVerify(t *testing.T) {
	for _, rel := range []string{"etl3-f16/v479317a0303ab2f5", "etl3-u8/v4b86d7ed432eb1da"} {
		t.Run(rel, func(t *testing.T) {
			// A copy: verify takes the readers lock beside the version,
			// which must not land in the repository.
			src := filepath.Join("..", "testdata", "legacy", filepath.FromSlash(rel))
			dir := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			findings, err := Check(context.Background(), dir, Options{Full: true})
			if err != nil || len(findings) != 0 {
				t.Fatalf("verify --full: %v, findings %v", err, findings)
			}
		})
	}
}

// Run reports the bytes it reads through Options.Progress: planned up
// front, done when it returns, and the same number: the files it hashes
// (quick: the small ones; full: every file and every shard).
func TestRunReportsProgress(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	sealFixture(t, fx)
	m, err := warehouse.ReadManifest(fx.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var small, all int64
	for name, c := range m.Files.Checksums {
		all += c.Bytes
		if !warehouse.IsBulkFile(name) {
			small += c.Bytes
		}
	}
	for _, sh := range m.Shards {
		all += sh.Bytes
	}
	if small == 0 || small == all {
		t.Fatalf("fixture: %d small bytes of %d", small, all)
	}
	for _, tc := range []struct {
		full bool
		want int64
	}{{false, small}, {true, all}} {
		var p progress.Bytes
		r, err := Run(context.Background(), fx.Dir, Options{Full: tc.full, Progress: &p})
		if err != nil || len(r.Findings) != 0 {
			t.Fatalf("full=%v: %v %+v", tc.full, err, r)
		}
		if total, done := p.Load(); total != tc.want || done != tc.want {
			t.Errorf("full=%v: progress %d of %d bytes, want %d of %d", tc.full, done, total, tc.want, tc.want)
		}
	}
}

// removeIfUnread is how a forced rebuild or gc removes a version directory
// it swapped aside (package outputroot): only when it can lock the
// directory itself exclusively, without waiting.
func removeIfUnread(t *testing.T, dir string) (removed bool) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	return true
}

// swapWhileRunning is a progress counter that, on Run's first report
// (everything planned, nothing read yet), does what a forced rebuild does
// to the version: another directory takes its name, and the old one is
// removed unless a reader holds it.
type swapWhileRunning struct {
	t                 *testing.T
	dir, other, aside string
	once              sync.Once
	removed           bool
}

func (s *swapWhileRunning) Add(total, done int64) {
	s.once.Do(func() {
		if err := os.Rename(s.dir, s.aside); err != nil {
			s.t.Error(err)
		}
		if err := os.Rename(s.other, s.dir); err != nil {
			s.t.Error(err)
		}
		s.removed = removeIfUnread(s.t, s.aside)
	})
}

// TestRunPinsTheVersion: verify reads the version it started on, whole,
// while a forced rebuild swaps another directory in under its name and
// tries to remove the old one: the old one is kept until Run returns
// (then it can go), and a full verify finds nothing.
func TestRunPinsTheVersion(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	other := fx.Dir + ".other"
	if err := os.CopyFS(other, os.DirFS(fx.Dir)); err != nil {
		t.Fatal(err)
	}
	// The other build's shards differ in every image: read by mistake,
	// they fail their sha256 and CRC-32C.
	for _, e := range fx.M.Shards {
		p := filepath.Join(other, filepath.FromSlash(e.RelativePath))
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		raw[shard.HeaderSize] ^= 0xff
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	swap := &swapWhileRunning{t: t, dir: fx.Dir, other: other, aside: fx.Dir + ".aside"}
	res, err := Run(context.Background(), fx.Dir, Options{Full: true, Progress: swap})
	if err != nil {
		t.Fatal(err)
	}
	if swap.removed {
		t.Error("the version verify was reading was removed under it")
	}
	if len(res.Findings) != 0 {
		t.Errorf("findings on the pinned version: %v", res.Findings)
	}
	if !removeIfUnread(t, swap.aside) {
		t.Error("the old version is still held after Run returned")
	}
}
