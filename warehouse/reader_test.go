package warehouse

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
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
)

// checkSample compares every accessor of s with the fixture's closed-form
// values for sample i.
func checkSample(t *testing.T, fx *fixture, s Sample, i int) {
	t.Helper()
	l := fx.layout
	if s.Index != i {
		t.Fatalf("sample %d: Index %d", i, s.Index)
	}
	if got, want := s.Image(), wantImageBytes(l, i); !bytes.Equal(got, want) {
		t.Fatalf("sample %d: image bytes differ", i)
	}
	switch l.DType {
	case shard.F16:
		for k, h := range s.ImageF16() {
			if v := float16.Frombits(h).Float32(); v != wantImageValue(i, k) {
				t.Fatalf("sample %d: ImageF16[%d] = %v, want %v", i, k, v, wantImageValue(i, k))
			}
		}
	case shard.F32:
		for k, v := range s.ImageF32() {
			if v != wantImageValue(i, k) {
				t.Fatalf("sample %d: ImageF32[%d] = %v, want %v", i, k, v, wantImageValue(i, k))
			}
		}
	}
	boxes := wantBoxes(i, l.MaxBoxes)
	if got := s.Boxes(); !reflect.DeepEqual(got, boxes) {
		t.Fatalf("sample %d: boxes %v, want %v", i, got, boxes)
	}
	if s.BoxCount() != len(boxes) {
		t.Fatalf("sample %d: BoxCount %d, want %d", i, s.BoxCount(), len(boxes))
	}
	mask := make([]float32, l.MaxBoxes)
	for j := range boxes {
		mask[j] = 1
	}
	if got := s.Mask(); !slices.Equal(got, mask) {
		t.Fatalf("sample %d: mask %v, want %v", i, got, mask)
	}
	if got, want := s.ClassIndex(), wantClasses(i, l.MaxBoxes); !slices.Equal(got, want) {
		t.Fatalf("sample %d: class index %v, want %v", i, got, want)
	}
	if got, want := s.Meta(), wantMeta(i); got != want {
		t.Fatalf("sample %d: meta %+v, want %+v", i, got, want)
	}
	if got, want := s.Extras(), wantExtras(i, l.ExtraF32); !slices.Equal(got, want) && len(want) > 0 {
		t.Fatalf("sample %d: extras %v, want %v", i, got, want)
	}
	if s.DType() != l.DType {
		t.Fatalf("sample %d: dtype %v", i, s.DType())
	}
}

func TestOpenReadsEverySample(t *testing.T) {
	tests := []struct {
		name string
		spec fixtureSpec
	}{
		{"f16 three shards", defaultSpec()},
		{"f32 with extras", fixtureSpec{dtype: shard.F32, width: 5, height: 3, maxBoxes: 2, extras: [][]int{{3}, {}, {2, 2}}, shardSizes: []int{2, 2, 2, 1}}},
		{"one shard of one sample", fixtureSpec{dtype: shard.F16, width: 1, height: 1, maxBoxes: 1, shardSizes: []int{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := writeFixture(t, tt.spec)
			for _, path := range []string{fx.dir, fx.root} {
				r, err := Open(path, OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Dir() != fx.dir {
					t.Fatalf("Open(%s).Dir() = %s, want %s", path, r.Dir(), fx.dir)
				}
				total := 0
				for _, n := range tt.spec.shardSizes {
					total += n
				}
				if r.Len() != total || r.Layout() != fx.layout {
					t.Fatalf("Len %d Layout %+v; want %d %+v", r.Len(), r.Layout(), total, fx.layout)
				}
				i := 0
				for k, n := range tt.spec.shardSizes {
					for local := range n {
						s, err := r.Sample(i)
						if err != nil {
							t.Fatal(err)
						}
						if s.Shard != fx.m.Shards[k].ID || s.ShardIndex != local {
							t.Fatalf("sample %d in %s[%d], want %s[%d]", i, s.Shard, s.ShardIndex, fx.m.Shards[k].ID, local)
						}
						checkSample(t, fx, s, i)
						i++
					}
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestLazyMappingAndStats(t *testing.T) {
	fx := writeFixture(t, defaultSpec())
	r, err := Open(fx.dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := r.Stats(); st.ShardsOpened != 0 || st.ShardsTotal != 3 || st.SamplesRead != 0 {
		t.Fatalf("after Open: %+v; nothing should be mapped yet", st)
	}
	for _, i := range []int{9, 10, 8, 0} { // shard 2 three times, then shard 0
		if _, err := r.Sample(i); err != nil {
			t.Fatal(err)
		}
	}
	st := r.Stats()
	wantBytes := fx.m.Shards[2].Bytes + fx.m.Shards[0].Bytes
	if st.ShardsOpened != 2 || st.SamplesRead != 4 || st.BytesMapped != wantBytes {
		t.Fatalf("stats %+v; want 2 shards, 4 samples, %d bytes", st, wantBytes)
	}
	var ids []string
	for _, l := range r.ShardLoads() {
		ids = append(ids, l.ID)
		if l.Open <= 0 || l.Total() < l.Open {
			t.Fatalf("load %+v has no open time", l)
		}
	}
	if got := strings.Join(ids, ","); got != "shard-00002,shard-00000" {
		t.Fatalf("loads in order %s", got)
	}
	if st.LoadMax < st.LoadP50 || st.LoadP99 > st.LoadMax {
		t.Fatalf("percentiles out of order: %+v", st)
	}
}

func TestConcurrentReaders(t *testing.T) {
	fx := writeFixture(t, fixtureSpec{dtype: shard.F32, width: 8, height: 8, maxBoxes: 4, extras: [][]int{{2}}, shardSizes: []int{5, 5, 5, 5, 2}})
	r, err := Open(fx.root, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := range 3 * r.Len() {
				i := (g*7 + step*5) % r.Len()
				s, err := r.Sample(i)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(s.Image(), wantImageBytes(fx.layout, i)) || s.Meta() != wantMeta(i) {
					errs <- fmt.Errorf("goroutine %d: sample %d differs", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := r.Stats(); st.ShardsOpened != 5 || st.SamplesRead != int64(8*3*r.Len()) {
		t.Fatalf("stats %+v: every shard must be mapped exactly once", st)
	}
}

func TestSampleRangeAndClose(t *testing.T) {
	fx := writeFixture(t, defaultSpec())
	r, err := Open(fx.dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 11, 1 << 40} {
		want := fmt.Sprintf("%s: sample %d out of range [0, 11)", fx.dir, i)
		if _, err := r.Sample(i); err == nil || err.Error() != want {
			t.Errorf("Sample(%d): %v, want %q", i, err, want)
		}
	}
	if _, err := r.Sample(0); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := fx.shardPath(0) + ": warehouse reader closed"
	if _, err := r.Sample(0); err == nil || err.Error() != want {
		t.Fatalf("Sample after Close: %v, want %q", err, want)
	}
}

func TestOpenThresholds(t *testing.T) {
	strict := validate.Thresholds{Invalid: validate.Limit{MaxCount: ptr(int64(0)), Action: validate.ActionFail}}
	warnOnly := validate.Thresholds{Invalid: validate.Limit{MaxCount: ptr(int64(0)), Action: validate.ActionWarn}}
	tests := []struct {
		name    string
		summary func(c *validate.Counts)
		opts    OpenOptions
		want    string // "" = opens
	}{
		{name: "within the recorded limits"},
		{name: "summary exceeds the recorded ratio", summary: func(c *validate.Counts) { c.Invalid = 7 },
			want: "%s: refusing a warehouse whose validation summary exceeds its thresholds: threshold invalid.max_ratio exceeded: 0.5833333333333334 (7 of 12 samples) > limit 0.5 (action fail)"},
		{name: "ignored on request", summary: func(c *validate.Counts) { c.Invalid = 7 }, opts: OpenOptions{IgnoreThresholds: true}},
		{name: "stricter caller thresholds", opts: OpenOptions{Thresholds: &strict},
			want: "%s: refusing a warehouse whose validation summary exceeds its thresholds: threshold invalid.max_count exceeded: 1 (1 of 12 samples) > limit 0 (action fail)"},
		{name: "warn action opens", opts: OpenOptions{Thresholds: &warnOnly}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := writeFixture(t, defaultSpec())
			if tt.summary != nil {
				tt.summary(&fx.m.Summary.Total)
				fx.writeManifest(t)
			}
			r, err := Open(fx.root, tt.opts)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				return
			}
			var te *ThresholdError
			if want := fmt.Sprintf(tt.want, fx.dir); err == nil || err.Error() != want || !errors.As(err, &te) {
				t.Fatalf("Open: %v\nwant *ThresholdError %q", err, want)
			}
		})
	}
}

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
	break_ func(t *testing.T, fx *fixture)

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
			break_: func(t *testing.T, fx *fixture) {
				if err := os.Truncate(fx.shardPath(1), fx.m.Shards[1].Bytes-10); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[2]s: 1210 bytes, the manifest says 1220",
			quick: []Finding{{Kind: FindingShardSize, Shard: s1, Sample: -1, Detail: "%[2]s: 1210 bytes, the manifest says 1220"}},
			full:  []Finding{{Kind: FindingShardSize, Shard: s1, Sample: -1, Detail: "%[2]s: 1210 bytes, the manifest says 1220"}},
		},
		{
			name: "truncated shard, manifest bytes edited to match", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				if err := os.Truncate(fx.shardPath(1), 1174); err != nil {
					t.Fatal(err)
				}
				fx.m.Shards[1].Bytes = 1174
				fx.writeManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1174, but 4 samples of this layout take 1220 (1184 without per-sample checksums)"}},
		},
		{
			// From shard_version 2 on the version decides whether a shard
			// has per-sample checksums, and the manifest's size must agree.
			name: "checksum section cut off, manifest bytes edited to match", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				if err := os.Truncate(fx.shardPath(1), 1184); err != nil {
					t.Fatal(err)
				}
				fx.m.Shards[1].Bytes = 1184
				fx.writeManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 3 has per-sample checksums, but bytes 1184 is the size without them"}},
		},
		{
			name: "manifest says shard_version 2 for a shard with checksums", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				fx.m.Shards[1].ShardVersion = 2
				fx.writeManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): shard_version 2 has no per-sample checksums, but bytes 1220 is the size with them"}},
		},
		{
			name: "flipped magic byte", shard: 1,
			break_:     func(t *testing.T, fx *fixture) { fx.flipByte(t, 1, 0) },
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
			break_:     func(t *testing.T, fx *fixture) { fx.flipByte(t, 1, 80+4) },
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
			break_:     func(t *testing.T, fx *fixture) { fx.flipByte(t, 1, 1200) },
			sample:     "%[2]s: shard: corrupt: checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775"),
			full:       withChecksum(s1, corrupt(s1, "checksum table crc32c 0x71162a8f, table_crc32c says 0xfecc5775")),
		},
		{
			name: "wrong dtype tag", shard: 1,
			break_:     func(t *testing.T, fx *fixture) { fx.patchShard(t, 1, 8, []byte{7}) },
			sample:     "%[2]s: shard: corrupt: unknown dtype 7",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "unknown dtype 7"),
			full:       withChecksum(s1, corrupt(s1, "unknown dtype 7")),
		},
		{
			name: "dtype tag of the other dtype", shard: 1,
			break_:     func(t *testing.T, fx *fixture) { fx.patchShard(t, 1, 8, []byte{byte(shard.F32)}) },
			sample:     "%[2]s: shard: corrupt: boxes_offset 656, want 1232",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "boxes_offset 656, want 1232"),
			full:       withChecksum(s1, corrupt(s1, "boxes_offset 656, want 1232")),
		},
		{
			name: "future shard_version", shard: 1,
			break_:     func(t *testing.T, fx *fixture) { fx.patchShard(t, 1, 4, []byte{5}) },
			sample:     "%[2]s: shard: corrupt: unsupported shard_version 5, want 1..4",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "unsupported shard_version 5, want 1..4"),
			full:       withChecksum(s1, corrupt(s1, "unsupported shard_version 5, want 1..4")),
		},
		{
			// shard_version 2 has no checksum section: the header contradicts itself.
			name: "shard_version without the checksum section the shard has", shard: 1,
			break_:     func(t *testing.T, fx *fixture) { fx.patchShard(t, 1, 4, []byte{2}) },
			sample:     "%[2]s: shard: corrupt: shard_version 2 has no checksum section, checksum_offset is 1184",
			sampleSums: "%[2]s: " + checksum,
			quick:      corrupt(s1, "shard_version 2 has no checksum section, checksum_offset is 1184"),
			full:       withChecksum(s1, corrupt(s1, "shard_version 2 has no checksum section, checksum_offset is 1184")),
		},
		{
			name: "manifest lies about the total", shard: -1,
			break_: func(t *testing.T, fx *fixture) {
				fx.m.Samples++
				fx.m.Summary.Total.Kept++
				fx.writeManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: samples 12 but shards hold 11"}},
		},
		{
			name: "manifest lies about a shard's samples", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				fx.m.Shards[1].Samples = 3
				fx.m.Shards[2].FirstSample = 7
				fx.m.Samples--
				fx.m.Summary.Total.Kept--
				fx.writeManifest(t)
			},
			open:  "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)",
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)"}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: "%[1]s/manifest.json: manifest invalid: shards[1] (shard-00001): bytes 1220, but 3 samples of this layout take 952 (920 without per-sample checksums)"}},
		},
		{
			name: "relative_path with ..", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				fx.m.Shards[1].RelativePath = "../shard-00001.twh"
				fx.writeManifest(t)
			},
			open:  `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`,
			quick: []Finding{{Kind: FindingManifest, Sample: -1, Detail: `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`}},
			full:  []Finding{{Kind: FindingManifest, Sample: -1, Detail: `%[1]s/manifest.json: manifest invalid: shards[1].relative_path: "../shard-00001.twh" is not a clean relative path inside the warehouse`}},
		},
		{
			name: "shard symlinked outside the version", shard: 1,
			break_: func(t *testing.T, fx *fixture) {
				outside := filepath.Join(fx.root, "elsewhere.twh")
				if err := os.Rename(fx.shardPath(1), outside); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, fx.shardPath(1)); err != nil {
					t.Fatal(err)
				}
			},
			open:  "%[2]s: statat shards/shard-00001.twh: path escapes from parent",
			quick: []Finding{{Kind: FindingShardMissing, Shard: s1, Sample: -1, Detail: "%[2]s: statat shards/shard-00001.twh: path escapes from parent"}},
			full:  []Finding{{Kind: FindingShardMissing, Shard: s1, Sample: -1, Detail: "%[2]s: statat shards/shard-00001.twh: path escapes from parent"}},
		},
		{
			name: "missing shard", shard: 2,
			break_: func(t *testing.T, fx *fixture) {
				if err := os.Remove(fx.shardPath(2)); err != nil {
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
			break_: func(t *testing.T, fx *fixture) {
				other := writeFixture(t, fixtureSpec{dtype: shard.F16, width: 4, height: 6, maxBoxes: 3, shardSizes: []int{4}})
				raw, err := os.ReadFile(other.shardPath(0))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(fx.shardPath(1), raw, 0o644); err != nil {
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
			break_: func(t *testing.T, fx *fixture) {
				tmp := fx.shardPath(0) + ".tmp"
				for _, mv := range [][2]string{{fx.shardPath(0), tmp}, {fx.shardPath(1), fx.shardPath(0)}, {tmp, fx.shardPath(1)}} {
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
			break_: func(t *testing.T, fx *fixture) {
				raw, _ := fx.m.Encode()
				raw = bytes.Replace(raw, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1)
				if err := os.WriteFile(filepath.Join(fx.dir, ManifestName), raw, 0o644); err != nil {
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
func expand(fx *fixture, k int, tmpl string, t *testing.T) string {
	if tmpl == "" {
		return ""
	}
	kk := max(k, 0)
	other := (kk + 1) % len(fx.m.Shards)
	return fmt.Sprintf(tmpl, fx.dir, fx.shardPath(kk), fileSHAIfExists(t, fx.shardPath(kk)), fx.m.Shards[kk].ChecksumSHA256,
		fileSHAIfExists(t, fx.shardPath(other)), fx.m.Shards[other].ChecksumSHA256)
}

func fileSHAIfExists(t *testing.T, path string) string {
	if _, err := os.Stat(path); err != nil {
		return "(absent)"
	}
	return fileSHA(t, path)
}

func expandFindings(fx *fixture, k int, fs []Finding, t *testing.T) []Finding {
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
			fx := writeFixture(t, defaultSpec())
			tt.break_(t, fx)
			for _, sums := range []bool{false, true} {
				r, err := Open(fx.root, OpenOptions{VerifyChecksums: sums})
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
				_, err = r.Sample(int(fx.m.Shards[tt.shard].FirstSample))
				if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
					t.Fatalf("Sample (checksums %v): %v\nwant %q", sums, err, want)
				}
				// A refused shard stays refused, and the others still read.
				if want != "" {
					if _, again := r.Sample(int(fx.m.Shards[tt.shard].FirstSample)); again == nil || again.Error() != want {
						t.Fatalf("second Sample: %v", again)
					}
				}
				r.Close()
			}
			for _, full := range []bool{false, true} {
				got, err := Verify(context.Background(), fx.root, VerifyOptions{Full: full})
				if err != nil {
					t.Fatal(err)
				}
				want := expandFindings(fx, tt.shard, tt.quick, t)
				if full {
					want = expandFindings(fx, tt.shard, tt.full, t)
				}
				if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("Verify(full=%v):\n got %v\nwant %v", full, got, want)
				}
			}
		})
	}
}

// The fixture is exactly what the docs say about sizes, so the hard-coded
// byte counts in badInputCases are not produced by the reader.
func TestFixtureSizesMatchTheFormatDoc(t *testing.T) {
	fx := writeFixture(t, defaultSpec())
	// 4 samples of 3x4x6 F16, max_boxes 3: images 4*144, boxes 4*24, mask
	// 4*6, padded to 776, meta header 24, records 4*96 end at 1184 (a
	// multiple of 8), checksum header 16, CRCs 4*4, table CRC 4.
	if got := fx.m.Shards[1].Bytes; got != 80+576+96+24+24+384+16+16+4 {
		t.Fatalf("shard-00001 is %d bytes", got)
	}
	// 3 samples: 80+432+72+18 = 602, padded to 608, +24 +3*96 = 920, +16
	// +3*4 +4.
	if got := fx.m.Shards[2].Bytes; got != 608+24+288+16+12+4 {
		t.Fatalf("shard-00002 is %d bytes", got)
	}
}

func TestVerifyCleanAndContent(t *testing.T) {
	fx := writeFixture(t, fixtureSpec{dtype: shard.F32, width: 4, height: 2, maxBoxes: 2, extras: [][]int{{2}}, shardSizes: []int{3, 3}})
	for _, full := range []bool{false, true} {
		if got, err := Verify(context.Background(), fx.dir, VerifyOptions{Full: full, Workers: 1}); err != nil || len(got) != 0 {
			t.Fatalf("clean warehouse (full %v): %v, %v", full, got, err)
		}
	}
	// NaN in sample 4's image (shard 1, local 1), +Inf in sample 5's
	// extras, and a class table too short for sample 2's class 2. The
	// shards' sha256 are updated, their per-sample CRC-32Cs are not: the
	// two patched samples are also sample_checksum findings.
	imageBytes := int64(fx.layout.ImageBytes())
	nan := make([]byte, 4)
	putF32(nan, float32(math.NaN()))
	fx.patchShard(t, 1, 80+imageBytes+3*4, nan)
	l := fx.layout
	recordsStart := l.FileSizeWithoutChecksums(3) - 3*int64(l.RecordSize()) - 3*int64(l.ExtraF32*4)
	inf := make([]byte, 4)
	putF32(inf, float32(math.Inf(1)))
	fx.patchShard(t, 1, recordsStart+3*int64(l.RecordSize())+2*8+4, inf)
	fx.m.Classes = fx.m.Classes[:2]
	for k := range fx.m.Shards {
		fx.m.Shards[k].ChecksumSHA256 = fileSHA(t, fx.shardPath(k))
	}
	fx.writeManifest(t)
	got, err := Verify(context.Background(), fx.dir, VerifyOptions{Full: true})
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
	if quick, _ := Verify(context.Background(), fx.dir, VerifyOptions{}); len(quick) != 0 {
		t.Fatalf("quick verify reads no values, found %v", quick)
	}
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func TestVerifyNotAWarehouse(t *testing.T) {
	dir := t.TempDir()
	if _, err := Verify(context.Background(), dir, VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "neither a warehouse version") {
		t.Fatalf("Verify of an empty dir: %v", err)
	}
	fx := writeFixture(t, defaultSpec())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, fx.dir, VerifyOptions{Full: true}); !errors.Is(err, context.Canceled) {
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
