package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// gcRoot builds n versions of the small demo (different target sizes)
// into one output root, oldest first, and returns their directory names.
func gcRoot(t *testing.T, n int) (root string, names []string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "out")
	for i := range n {
		cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{32 + 8*i, 24}, "shard_target_mb": 0.05, "output_root": root})
		dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
		names = append(names, filepath.Base(dir))
	}
	return root, names
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// gc keeps the newest N, latest's target, a version a reader holds and a
// version being built; removes the rest and the temporaries of builds that
// did not finish (never a running build's); --dry-run removes nothing.
func TestGCCommand(t *testing.T) {
	root, v := gcRoot(t, 5) // v[4] is the newest and latest's target
	// latest points at the oldest: it is kept although old.
	if err := os.Remove(filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(v[0], filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	// A training job has v[1] open (warehouse.Open holds its readers lock).
	reader, err := warehouse.Open(filepath.Join(root, v[1]), warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// A crashed build of v[2] left a temporary; a running build of another
	// version owns one that must stay.
	crashed := filepath.Join(root, "."+v[2]+".tmp-abc123")
	running := filepath.Join(root, ".v0123456789abcdef.tmp-def456")
	for _, d := range []string{crashed, running} {
		if err := os.MkdirAll(filepath.Join(d, "shards"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "shards", "x.twh"), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := outputroot.LockVersion(root, "v0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()

	dry := runCLI(t, context.Background(), nil, "gc", "--output-root", root, "--keep", "1", "--dry-run")
	if dry.code != exitOK || !strings.Contains(dry.stdout, "would remove") {
		t.Fatalf("dry run: exit %d\n%s%s", dry.code, dry.stdout, dry.stderr)
	}
	for _, name := range v {
		if !exists(filepath.Join(root, name)) {
			t.Fatalf("dry run removed %s", name)
		}
	}
	if !exists(crashed) {
		t.Fatal("dry run removed a temporary")
	}

	res := runCLI(t, context.Background(), nil, "gc", "--output-root", root, "--keep", "1")
	if res.code != exitOK {
		t.Fatalf("gc: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{
		"kept " + v[4] + ": among the newest 1",
		"kept " + v[0] + ": target of latest",
		"kept " + v[1] + ": open by a reader",
		"removed " + filepath.Join(root, v[2]),
		"removed " + filepath.Join(root, v[3]),
		"removed " + crashed + " (0.0 MB): left by a build of " + v[2] + " that did not finish",
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("gc output lacks %q:\n%s", want, res.stdout)
		}
	}
	for name, want := range map[string]bool{v[0]: true, v[1]: true, v[2]: false, v[3]: false, v[4]: true} {
		if exists(filepath.Join(root, name)) != want {
			t.Errorf("%s exists: %v, want %v", name, !want, want)
		}
	}
	if exists(crashed) || !exists(running) {
		t.Errorf("crashed temporary exists %v (want false), running build's exists %v (want true)", exists(crashed), exists(running))
	}
	// What is left still reads and verifies.
	for _, name := range []string{v[0], v[1], v[4]} {
		if r := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", filepath.Join(root, name)); r.code != exitOK {
			t.Errorf("verify %s after gc: exit %d\n%s", name, r.code, r.stdout)
		}
	}
	// Closed, the reader no longer protects it.
	if _, err := reader.Sample(0); err != nil {
		t.Fatalf("the reader lost its version: %v", err)
	}
	reader.Close()
	if res := runCLI(t, context.Background(), nil, "gc", "--output-root", root, "--keep", "1"); res.code != exitOK || exists(filepath.Join(root, v[1])) {
		t.Fatalf("gc after the reader closed: exit %d, %s still exists: %v\n%s", res.code, v[1], exists(filepath.Join(root, v[1])), res.stdout)
	}
	if res := runCLI(t, context.Background(), nil, "gc", "--output-root", root, "--keep", "0"); res.code != exitUsage {
		t.Errorf("--keep 0: exit %d, want %d", res.code, exitUsage)
	}
}

// A published version is readable by others as the umask allows: 0755
// directories and 0644 files under umask 022 (the temporary directory it
// starts as is not private).
func TestPublishedVersionIsReadableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir, _ := smallDemo(t, nil)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o644)
		if fi.IsDir() {
			want = 0o755 | os.ModeDir
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gc and staging directories: a published version's leftover staging is
// removed; an unfinished build's is kept (rerunning it resumes) until it
// is older than --keep-days; one whose partitions run is never touched.
func TestGCStagingDirectories(t *testing.T) {
	cfgPath, root := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{32, 24}, "shard_target_mb": 0.05})
	// An unfinished partitioned build: one partition of two.
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--partition", "0/2"); res.code != 0 {
		t.Fatalf("partition: exit %d\n%s", res.code, res.stderr)
	}
	staged, _ := filepath.Glob(filepath.Join(root, ".v*.staging"))
	if len(staged) != 1 {
		t.Fatalf("staging directories %v", staged)
	}
	name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(staged[0]), "."), ".staging")
	gc := func(extra ...string) cliResult {
		res := runCLI(t, context.Background(), nil, append([]string{"gc", "--output-root", root, "--keep", "1"}, extra...)...)
		if res.code != 0 {
			t.Fatalf("gc: exit %d\n%s", res.code, res.stderr)
		}
		return res
	}
	if res := gc("--keep-days", "1"); !exists(staged[0]) || !strings.Contains(res.stdout, "unfinished build of "+name+": rerun it") {
		t.Fatalf("a fresh unfinished build's staging was not kept:\n%s", res.stdout)
	}
	// While a partition runs (version lock held shared), even an old one stays.
	old := time.Now().Add(-72 * time.Hour)
	filepath.WalkDir(staged[0], func(p string, _ fs.DirEntry, _ error) error { return os.Chtimes(p, old, old) })
	lock, err := outputroot.LockVersionShared(context.Background(), root, name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res := gc("--keep-days", "1"); !exists(staged[0]) || !strings.Contains(res.stdout, "is running") {
		t.Fatalf("gc touched the staging of a running partition:\n%s", res.stdout)
	}
	lock.Release()
	if res := gc(); !exists(staged[0]) {
		t.Fatalf("without --keep-days gc removed an unfinished build's staging:\n%s", res.stdout)
	}
	if res := gc("--keep-days", "1"); exists(staged[0]) || !strings.Contains(res.stdout, "unfinished build of "+name+", untouched since") {
		t.Fatalf("an old unfinished build's staging was kept:\n%s", res.stdout)
	}
	// A published version's leftover staging (a commit killed after publishing).
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath); res.code != 0 {
		t.Fatalf("build: exit %d\n%s", res.code, res.stderr)
	}
	if err := os.MkdirAll(filepath.Join(staged[0], "shards"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := gc(); exists(staged[0]) || !strings.Contains(res.stdout, "which is published") {
		t.Fatalf("a published version's staging was kept:\n%s", res.stdout)
	}
}
