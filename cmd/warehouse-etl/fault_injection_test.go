package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// versionBytes is what must not depend on a crash or a fault: every
// shard's id and sha256, and samples.jsonl.
func versionBytes(t *testing.T, dir string) string {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range m.Shards {
		fmt.Fprintf(&b, "%s %s\n", s.ID, s.ChecksumSHA256)
	}
	raw, err := os.ReadFile(filepath.Join(dir, warehouse.SamplesName))
	if err != nil {
		t.Fatal(err)
	}
	b.Write(raw)
	return b.String()
}

// TestFaultAtEveryFilesystemCall fails, for every N, the Nth write, fsync,
// rename or link of a build and its publication (internal/fsfault: ENOSPC
// for a write, EIO for the others), once into an empty output root and
// once as a WAREHOUSE_CLEAR=1 rebuild over the published version (issue 23
// item 5). Each run either exits 1 and leaves the previous state (no
// version; or the previous version, byte for byte, and latest as it was),
// or exits 9 saying the version is published but latest was not moved (a
// complete version that verifies), or exits 0 with a complete version; the
// next run without faults ends with the reference bytes, latest on the
// version and no temporary left. After a failed build, gc keeps what the
// message says it keeps.
func TestFaultAtEveryFilesystemCall(t *testing.T) {
	data := t.TempDir()
	greyDataset(t, data, 6, 150)
	cfg, outRoot := greyConfig(t, data, nil)
	refDir, _ := mustBuild(t, cfg, nil)
	ref := versionBytes(t, refDir)
	name := filepath.Base(refDir)
	latest := filepath.Join(outRoot, warehouse.LatestName)
	clear := map[string]string{"WAREHOUSE_CLEAR": "1"}

	for _, sc := range []struct {
		name      string
		env       map[string]string
		published bool // a version is published before the faulty run
	}{
		{"fresh", nil, false},
		{"clear", clear, true},
	} {
		t.Run(sc.name, func(t *testing.T) {
			prepare := func() (manifest []byte) {
				if err := os.RemoveAll(outRoot); err != nil {
					t.Fatal(err)
				}
				if sc.published {
					mustBuild(t, cfg, nil)
					raw, err := os.ReadFile(filepath.Join(refDir, warehouse.ManifestName))
					if err != nil {
						t.Fatal(err)
					}
					return raw
				}
				return nil
			}
			prepare()
			var calls atomic.Int64
			restore := fsfault.Set(func(fsfault.Op, string) error { calls.Add(1); return nil })
			res := runCLI(t, context.Background(), sc.env, "build", "--config", cfg)
			restore()
			if res.code != 0 {
				t.Fatalf("counting run: exit %d\n%s", res.code, res.stderr)
			}
			total := calls.Load()
			codes := map[int]int{}
			for n := int64(1); n <= total; n++ {
				before := prepare()
				var seen atomic.Int64
				var hit atomic.Value
				restore := fsfault.Set(func(op fsfault.Op, path string) error {
					if seen.Add(1) != n {
						return nil
					}
					hit.Store(fmt.Sprintf("%s %s", op, path))
					if op == fsfault.Write {
						return syscall.ENOSPC
					}
					return syscall.EIO
				})
				res := runCLI(t, context.Background(), sc.env, "build", "--config", cfg)
				restore()
				codes[res.code]++
				what := fmt.Sprintf("fault %d of %d (%v): exit %d", n, total, hit.Load(), res.code)
				switch res.code {
				case exitFailure:
					// The previous state.
					if !sc.published && exists(refDir) {
						t.Fatalf("%s, but %s exists\n%s", what, refDir, res.stderr)
					}
					if sc.published {
						raw, _ := os.ReadFile(filepath.Join(refDir, warehouse.ManifestName))
						if string(raw) != string(before) {
							t.Fatalf("%s, but the published manifest changed\n%s", what, res.stderr)
						}
					}
					if target, _ := os.Readlink(latest); sc.published != (target == name) {
						t.Fatalf("%s, but latest -> %q\n%s", what, target, res.stderr)
					}
					checkFailedBuildAndGC(t, what, res.stderr, outRoot, name)
				case exitPublished:
					target, _ := os.Readlink(latest)
					switch {
					case strings.Contains(res.stderr, refDir+": published, but latest was not moved"):
						if !sc.published && target != "" {
							t.Fatalf("%s, but latest -> %q", what, target)
						}
					case strings.Contains(res.stderr, refDir+": published and latest moved, but not durably"):
						if target != name {
							t.Fatalf("%s, but latest -> %q", what, target)
						}
					default:
						t.Fatalf("%s without saying so:\n%s", what, res.stderr)
					}
					fallthrough
				case exitOK:
					if v := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", refDir, "--full"); v.code != 0 {
						t.Fatalf("%s, and verify --full: exit %d\n%s%s", what, v.code, v.stdout, v.stderr)
					}
				default:
					t.Fatalf("%s\n%s", what, res.stderr)
				}
				// The next run without faults recovers the same bytes.
				if r := runCLI(t, context.Background(), nil, "build", "--config", cfg); r.code != 0 {
					t.Fatalf("%s; the rerun: exit %d\n%s", what, r.code, r.stderr)
				}
				if got := versionBytes(t, refDir); got != ref {
					t.Fatalf("%s; the rerun's version differs from the reference", what)
				}
				if target, _ := os.Readlink(latest); target != name {
					t.Fatalf("%s; after the rerun latest -> %q", what, target)
				}
				ents, _ := os.ReadDir(outRoot)
				for _, e := range ents {
					if strings.Contains(e.Name(), ".tmp-") {
						t.Fatalf("%s; left after the rerun: %s", what, e.Name())
					}
				}
			}
			t.Logf("%s: %d filesystem calls, each failed once: exit codes %v", sc.name, total, codes)
			if codes[exitFailure] == 0 {
				t.Errorf("no fault failed the build: the seam is not on the build's path")
			}
		})
	}
}

// checkFailedBuildAndGC checks that what a failed build's message says
// gc does agrees with what gc does: a full disk's message says the staged
// shards are kept and gc leaves the staging directory to --keep-days; gc
// removes every temporary directory of the failed build.
func checkFailedBuildAndGC(t *testing.T, what, stderr, outRoot, name string) {
	t.Helper()
	res := runCLI(t, context.Background(), nil, "gc", "--output-root", outRoot, "--keep", "1", "--dry-run", "--json")
	if res.code != 0 {
		t.Fatalf("%s; gc --dry-run: exit %d\n%s", what, res.code, res.stderr)
	}
	var rep outputroot.GCReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("%s; gc --json: %v\n%s", what, err, res.stdout)
	}
	staging := filepath.Join(outRoot, "."+name+outputroot.StagingSuffix)
	published := exists(filepath.Join(outRoot, name, warehouse.ManifestName))
	removes := false
	for _, r := range rep.Removed {
		removes = removes || r.Path == staging
	}
	if exists(staging) && removes != published {
		t.Fatalf("%s; gc removes the staging directory: %v, its version is published: %v", what, removes, published)
	}
	if !strings.Contains(stderr, "is full") {
		return
	}
	want := "complete staged shards are kept for the rerun"
	switch {
	case exists(staging) && published:
		want = staging + ": gc removes it (its version is published"
	case exists(staging):
		want = staging + " (its complete shards make the rerun cheaper): gc removes it only once untouched for --keep-days"
	}
	if !strings.Contains(stderr, want) {
		t.Fatalf("%s; the full-disk message does not say what gc does with the staging directory (%q):\n%s", what, want, stderr)
	}
}
