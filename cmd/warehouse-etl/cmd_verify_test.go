package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/verify"
	"warehouse-etl/warehouse"
)

// smallDemo builds the demo dataset at a small target size (fast) and
// returns the version directory and its output root.
func smallDemo(t *testing.T, overrides map[string]any) (dir, outRoot string) {
	t.Helper()
	o := map[string]any{"target_size": []int{96, 64}, "shard_target_mb": 0.1}
	for k, v := range overrides {
		o[k] = v
	}
	cfgPath, outRoot := writeConfig(t, demoRoot(t), o)
	dir, _ = mustBuild(t, cfgPath, nil)
	return dir, outRoot
}

func TestVerifyCommand(t *testing.T) {
	dir, outRoot := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) < 3 {
		t.Fatalf("want several shards, got %d", len(m.Shards))
	}

	// A clean version: exit 0, and the next command to run.
	res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", outRoot, "--quiet")
	if res.code != exitOK || !strings.Contains(res.stdout, "ok: "+dir+" (quick") ||
		!strings.Contains(res.stdout, "next: warehouse-etl verify --tensor-warehouse "+dir+" --full") {
		t.Fatalf("quick verify: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--full", "--quiet")
	if res.code != exitOK || !strings.Contains(res.stdout, "next: warehouse-etl load --tensor-warehouse "+dir) {
		t.Fatalf("full verify: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// Flip one image byte of shard 1 (sample 0 of the shard): only --full
	// sees it, as the shard's sha256 and as that sample's CRC-32C; exit 7.
	shard1 := filepath.Join(dir, m.Shards[1].RelativePath)
	raw, err := os.ReadFile(shard1)
	if err != nil {
		t.Fatal(err)
	}
	raw[100] ^= 0x01
	if err := os.WriteFile(shard1, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--quiet"); res.code != exitOK {
		t.Fatalf("quick verify reads no data, yet exit %d:\n%s", res.code, res.stdout)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--full", "--quiet")
	row := regexp.MustCompile(`(?m)^checksum\s+shards/shard-00001\.twh\s+-\s+sha256 [0-9a-f]{64}, the manifest says ` + m.Shards[1].ChecksumSHA256 + `$`)
	sampleRow := regexp.MustCompile(`(?m)^sample_checksum\s+shards/shard-00001\.twh\s+` + strconv.FormatInt(m.Shards[1].FirstSample, 10) +
		`\s+shard: corrupt: sample 0: crc32c 0x[0-9a-f]{8}, the checksum table says 0x[0-9a-f]{8}$`)
	if res.code != exitFindings || !row.MatchString(res.stdout) || !sampleRow.MatchString(res.stdout) || !strings.Contains(res.stdout, "2 finding(s) in "+dir) ||
		!strings.Contains(res.stdout, "next: WAREHOUSE_CLEAR=1 warehouse-etl build --config CONFIG") ||
		!strings.Contains(res.stderr, "warehouse-etl verify: "+dir+": 2 verification finding(s), the first: checksum shards/shard-00001.twh") {
		t.Fatalf("flipped byte: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}

	// Remove shard 2: quick verify finds it; --json for machines.
	if err := os.Remove(filepath.Join(dir, m.Shards[2].RelativePath)); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--json", "--quiet")
	var out struct {
		Dir      string           `json:"dir"`
		Full     bool             `json:"full"`
		Count    int              `json:"count"`
		Findings []verify.Finding `json:"findings"`
		Next     string           `json:"next"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("--json output: %v\n%s", err, res.stdout)
	}
	want := verify.Finding{Kind: verify.FindingShardMissing, Shard: "shards/shard-00002.twh", Sample: -1,
		Detail: filepath.Join(dir, "shards/shard-00002.twh") + ": missing: the manifest lists shard shard-00002"}
	if res.code != exitFindings || out.Count != 1 || out.Findings[0] != want || out.Dir != dir || out.Full {
		t.Fatalf("missing shard: exit %d, %+v", res.code, out)
	}
}

func TestVerifyUsageAndNotAWarehouse(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify"}, exitUsage, "--tensor-warehouse is required"},
		{[]string{"verify", "--tensor-warehouse", empty}, exitFailure,
			fmt.Sprintf("warehouse-etl verify: %s: neither a warehouse version (no manifest.json) nor a root with a \"latest\" pointer", empty)},
		{[]string{"verify", "-h"}, exitOK, "--full also re-hashes every shard"},
	}
	for _, tt := range tests {
		res := runCLI(t, context.Background(), nil, tt.args...)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tt.args, res.code, res.stderr, tt.code, tt.want)
		}
	}
}

// Every file of a published version is covered (issue 12): a byte flipped
// anywhere, in a shard, the manifest, its digest, samples.jsonl,
// fingerprint.jsonl, build_report.json, the Parquet exports or the Zarr
// store, makes verify --full exit 7 naming that file; a byte flipped in any
// file but the shards and the Zarr chunk files makes the quick verify do
// the same. Positions: first, middle, last and a few random (fixed seed)
// per file, with a different flip mask each, restored after each run.
func TestVerifyCatchesAFlippedByteInEveryFile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides map[string]any
	}{
		{"plain", nil},
		{"zarr", map[string]any{"zarr": map[string]any{"enabled": true, "zstd_level": 1, "shard_samples": 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := smallDemo(t, tc.overrides)
			m, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			shards := map[string]bool{}
			for _, s := range m.Shards {
				shards[s.RelativePath] = true
			}
			// Coverage: every file of the version is a shard, the manifest,
			// its digest, or has a files.checksums entry.
			var files []string
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				files = append(files, filepath.ToSlash(rel))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, rel := range files {
				_, listed := m.Files.Checksums[rel]
				if !listed && !shards[rel] && rel != warehouse.ManifestName && rel != warehouse.ManifestDigestName {
					t.Errorf("%s is not covered by the manifest", rel)
				}
			}
			if len(m.Files.Checksums)+len(m.Shards)+2 != len(files) {
				t.Errorf("files.checksums lists %d files, the shards are %d, the version holds %d files", len(m.Files.Checksums), len(m.Shards), len(files))
			}
			for _, full := range []bool{false, true} {
				if f := verifyJSON(t, dir, full); f.code != exitOK || len(f.Notes) != 0 {
					t.Fatalf("clean version, full=%v: exit %d, notes %q\n%s", full, f.code, f.Notes, f.stderr)
				}
			}

			type tally struct{ flips, quick, quickCaught, full, fullCaught int }
			counts := map[string]*tally{}
			rng := rand.New(rand.NewPCG(12, 1))
			masks := []byte{0x01, 0x80, 0xff, 0x10, 0x04, 0x40}
			for _, rel := range files {
				path := filepath.Join(dir, filepath.FromSlash(rel))
				orig, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				n := len(orig)
				if n == 0 {
					t.Fatalf("%s is empty", rel)
				}
				positions := []int{0, n / 2, n - 1}
				for range 3 {
					positions = append(positions, rng.IntN(n))
				}
				kind, bulk := fileKind(rel, shards)
				c := counts[kind]
				if c == nil {
					c = &tally{}
					counts[kind] = c
				}
				for i, pos := range positions {
					flipped := bytes.Clone(orig)
					flipped[pos] ^= masks[i%len(masks)]
					writeKeepingMode(t, path, flipped)
					c.flips++
					for _, full := range []bool{false, true} {
						if !full && kind == "zarr chunk" {
							continue // quick verification reads their size only
						}
						res := verifyJSON(t, dir, full)
						caught := res.code == exitFindings && res.names(rel)
						if full {
							c.full++
							if caught {
								c.fullCaught++
							}
						} else {
							c.quick++
							if caught {
								c.quickCaught++
							}
						}
						// Quick verification reads a shard's or Zarr chunk
						// file's size and header only: it is counted, not
						// required, to see their flips.
						if !caught && (full || !bulk) {
							t.Errorf("%s byte %d ^ %#02x: verify full=%v exit %d, findings %+v", rel, pos, masks[i%len(masks)], full, res.code, res.Findings)
						}
					}
					writeKeepingMode(t, path, orig)
				}
			}
			for _, kind := range slices.Sorted(maps.Keys(counts)) {
				c := counts[kind]
				t.Logf("%-18s %3d flips: quick caught %3d of %3d, full caught %3d of %3d", kind, c.flips, c.quickCaught, c.quick, c.fullCaught, c.full)
			}
			if tc.name == "zarr" && counts["zarr chunk"] == nil {
				t.Fatal("the zarr build wrote no store")
			}
			if f := verifyJSON(t, dir, true); f.code != exitOK {
				t.Fatalf("restored version: exit %d %+v", f.code, f.Findings)
			}
		})
	}
}

// fileKind names a version file's kind for the flip tally, and whether it
// is bulk data only --full re-hashes.
func fileKind(rel string, shards map[string]bool) (kind string, bulk bool) {
	switch {
	case shards[rel]:
		return "shard", true
	case warehouse.IsBulkFile(rel):
		return "zarr chunk", true
	case strings.HasPrefix(rel, warehouse.ZarrStoreName+"/"):
		return "zarr metadata", false
	case rel == warehouse.ManifestName:
		return "manifest", false
	case rel == warehouse.ManifestDigestName:
		return "digest", false
	}
	return rel, false
}

type verifyOutput struct {
	code     int
	stderr   string
	Findings []verify.Finding `json:"findings"`
	Notes    []string         `json:"notes"`
}

// names reports whether a finding names the file rel: as its shard or
// file, or, for the manifest and its digest (a mismatch blames neither
// alone), in the detail of a manifest_digest finding.
func (o verifyOutput) names(rel string) bool {
	for _, f := range o.Findings {
		if f.Shard == rel || f.File == rel || f.Kind == verify.FindingManifestDigest && strings.Contains(f.Detail, rel) {
			return true
		}
	}
	return false
}

func verifyJSON(t *testing.T, dir string, full bool) verifyOutput {
	t.Helper()
	args := []string{"verify", "--tensor-warehouse", dir, "--json", "--quiet"}
	if full {
		args = append(args, "--full")
	}
	res := runCLI(t, context.Background(), nil, args...)
	out := verifyOutput{code: res.code, stderr: res.stderr}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("verify --json: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	return out
}

func writeKeepingMode(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// A version published before manifests recorded files.checksums (no
// digest either) stays readable and verifiable, with a note; a version
// whose digest went missing is refused.
func TestVerifyOlderAndUnsealedVersions(t *testing.T) {
	dir, _ := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	m.Files.Checksums = nil
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, warehouse.ManifestName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(old, warehouse.ManifestDigestName)); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", old, "--full", "--quiet")
	if res.code != exitOK || !strings.Contains(res.stdout, "note: side files not covered") || !strings.Contains(res.stdout, "ok: "+old+" (full") {
		t.Fatalf("older version: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if out := verifyJSON(t, old, false); out.code != exitOK || len(out.Notes) != 1 || out.Notes[0] != verify.NoteUncovered {
		t.Fatalf("older version --json: exit %d notes %q", out.code, out.Notes)
	}
	if res := runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", old, "--batch", "4", "--quiet"); res.code != exitOK {
		t.Fatalf("load of an older version: exit %d\n%s", res.code, res.stderr)
	}

	// The current version without its digest: verify names it, and the
	// readers refuse the manifest.
	if err := os.Remove(filepath.Join(dir, warehouse.ManifestDigestName)); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--quiet")
	row := regexp.MustCompile(`(?m)^manifest_digest\s+manifest\.json\.sha256\s+-\s+` + regexp.QuoteMeta(filepath.Join(dir, "manifest.json.sha256")) + `: manifest invalid: missing`)
	if res.code != exitFindings || !row.MatchString(res.stdout) || !strings.Contains(res.stdout, "1 finding(s) in "+dir) {
		t.Fatalf("missing digest: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", dir, "--batch", "4", "--quiet")
	if res.code != exitFailure || !strings.Contains(res.stderr, "manifest.json.sha256: manifest invalid: missing") {
		t.Fatalf("load without the digest: exit %d\n%s", res.code, res.stderr)
	}
}
