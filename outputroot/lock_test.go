package outputroot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"warehouse-etl/warehouse"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPublishNewThenReplace(t *testing.T) {
	root := filepath.Join(t.TempDir(), "out")
	publish := func(content string) {
		b, err := LockVersion(root, "v1")
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		tmp, err := b.CreateTemp()
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(tmp, "shards", "a"), content)
		writeFile(t, filepath.Join(tmp, warehouse.ManifestName), content)
		if err := b.Publish(); err != nil {
			t.Fatal(err)
		}
	}
	publish("first")
	publish("second")
	if got := readFile(t, filepath.Join(root, "v1", "shards", "a")); got != "second" {
		t.Fatalf("after replace: %q", got)
	}
	dir, err := warehouse.ResolveDir(root)
	if err != nil || dir != filepath.Join(root, "v1") {
		t.Fatalf("warehouse.ResolveDir(root) = %q, %v", dir, err)
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != ".v1.lock,.v1.readers,latest,v1" {
		t.Fatalf("root holds %s: the replaced version or a tmp dir was left behind", got)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	root := t.TempDir()
	b, err := LockVersion(root, "v1")
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := b.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tmp, "x"), "partial")
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("tmp dir survived Release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "v1")); !os.IsNotExist(err) {
		t.Fatal("an aborted build published a version")
	}
}

func TestLockAndStaleTmp(t *testing.T) {
	root := t.TempDir()
	stale := filepath.Join(root, ".v1.tmp-crashed")
	writeFile(t, filepath.Join(stale, "x"), "left by a crash")
	other := filepath.Join(root, ".v2.tmp-running")
	writeFile(t, filepath.Join(other, "x"), "another version's build")

	b, err := LockVersion(root, "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if _, err := LockVersion(root, "v1"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second LockVersion: %v, want ErrLocked", err)
	}
	b2, err := LockVersion(root, "v2")
	if err != nil {
		t.Fatalf("another version's lock is independent: %v", err)
	}
	b2.Release()
	if _, err := b.CreateTemp(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("stale tmp dir of this version not removed")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("another version's tmp dir was removed")
	}
}

// TestBuildLockWaitsOutProbes: gc's and CleanTemporary's momentary
// tryLock of a version's build lock does not make a build of that version
// fail; a holder that keeps the lock still does, after probeGrace.
func TestBuildLockWaitsOutProbes(t *testing.T) {
	root := t.TempDir()
	s := storageFor(root)
	probe, ok, err := tryLock(s, ".v1"+buildLockSuffix)
	if err != nil || !ok {
		t.Fatalf("tryLock: %v %v", ok, err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		probe.Release()
		close(released)
	}()
	v, err := LockVersion(root, "v1")
	if err != nil {
		t.Fatalf("LockVersion during a probe: %v", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("LockVersion took the lock while the probe held it")
	}
	start := time.Now()
	if _, err := LockVersion(root, "v1"); !errors.Is(err, ErrLocked) {
		t.Fatalf("LockVersion while a build holds it: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited < probeGrace {
		t.Fatalf("gave up after %v, before probeGrace %v", waited, probeGrace)
	}
	v.Release()
}

func TestSharedAndExclusiveVersionLocks(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	p0, err := LockVersionShared(ctx, root, "v1", 0)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := LockVersionShared(ctx, root, "v1", 0)
	if err != nil {
		t.Fatalf("two partitions hold the lock together: %v", err)
	}
	_, err = LockVersion(root, "v1")
	if want := filepath.Join(root, ".v1.lock") + ": " + ErrLocked.Error(); !errors.Is(err, ErrLocked) || err.Error() != want {
		t.Fatalf("LockVersion under partitions: %v, want %q", err, want)
	}
	p0.Release()
	p1.Release()
	p1.Release() // twice is fine
	b, err := LockVersion(root, "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	_, err = LockVersionShared(ctx, root, "v1", 0)
	if want := filepath.Join(root, ".v1.lock") + ": " + ErrLocked.Error() + " (a single-machine build or a commit holds it)"; err == nil || err.Error() != want {
		t.Fatalf("LockVersionShared under a build: %v, want %q", err, want)
	}
}

// CleanTemporary removes what crashed builds left, but never what a
// running build (its version's lock is held) is writing.
func TestCleanTemporaryLeavesRunningBuilds(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{".v1.tmp-crashed", ".v2.tmp-running", ".v3.tmp-gc", "v1"} {
		writeFile(t, filepath.Join(root, dir, "x"), "1234")
	}
	running, err := LockVersion(root, "v2")
	if err != nil {
		t.Fatal(err)
	}
	defer running.Release()
	for _, dryRun := range []bool{true, false} {
		removed, err := CleanTemporary(root, "", dryRun)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range removed {
			got = append(got, filepath.Base(r.Path))
			if r.Bytes != 4 {
				t.Errorf("%s: %d bytes, want 4", r.Path, r.Bytes)
			}
		}
		if strings.Join(got, ",") != ".v1.tmp-crashed,.v3.tmp-gc" {
			t.Fatalf("dry run %v: removed %v", dryRun, got)
		}
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != ".v1.lock,.v2.lock,.v2.tmp-running,.v3.lock,v1" {
		t.Fatalf("root holds %s", got)
	}
}

// GC removes the lock files of versions that have nothing else under the
// root (left by a gc from before it removed them), and keeps those of a
// version, a staging directory or a held lock.
func TestGCRemovesOrphanLockFiles(t *testing.T) {
	root := t.TempDir()
	const gone, staged, held = "v0000000000000001", "v0000000000000002", "v0000000000000003"
	for _, v := range []string{gone, staged, held} {
		writeFile(t, filepath.Join(root, "."+v+".lock"), "")
		writeFile(t, filepath.Join(root, "."+v+".readers"), "")
	}
	if err := os.Mkdir(filepath.Join(root, "."+staged+StagingSuffix), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := LockVersion(root, held)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := GC(root, GCOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    string
		kept bool
	}{{gone, false}, {staged, true}, {held, true}} {
		for _, f := range []string{"." + c.v + ".lock", "." + c.v + ".readers"} {
			if _, err := os.Lstat(filepath.Join(root, f)); (err == nil) != c.kept {
				t.Errorf("%s: kept %v, want %v", f, err == nil, c.kept)
			}
		}
	}
}

// The temporaries of a version's owner record and input cache
// (atomicfile.Write beside ".<version>.config" and ".<version>.inputs")
// belong to that version: cleaned only while its lock is free, never
// taken for a version of their own.
func TestVersionOfTemporary(t *testing.T) {
	for name, want := range map[string]string{
		".v0123456789abcdef.tmp-1a2b":        "v0123456789abcdef",
		"..v0123456789abcdef.config.tmp-123": "v0123456789abcdef",
		"..v0123456789abcdef.inputs.tmp-9":   "v0123456789abcdef",
		".latest.tmp-v0123456789abcdef":      "v0123456789abcdef",
		"..v0123456789abcdef.unknown.tmp-9":  "",
		"..hidden.tmp-1":                     "",
		"v0123456789abcdef":                  "",
		".v0123456789abcdef.config":          "",
	} {
		if got := versionOfTemporary(name); got != want {
			t.Errorf("versionOfTemporary(%q) = %q, want %q", name, got, want)
		}
	}
}

// Usage counts what removing an entry frees: a file also linked from
// another version (a shard a rebuild took whole) frees nothing.
func TestUsageSkipsSharedFiles(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "v1", "shards", "a"), "1234")
	writeFile(t, filepath.Join(root, "v1", "b"), "123")
	if err := os.MkdirAll(filepath.Join(root, "v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := Dir(root)
	if got, _ := d.Usage("v1"); got != 7 {
		t.Fatalf("Usage before the link: %d, want 7", got)
	}
	if err := os.Link(filepath.Join(root, "v1", "shards", "a"), filepath.Join(root, "v2", "a")); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Usage("v1"); got != 3 {
		t.Fatalf("Usage with shards/a linked from v2: %d, want 3", got)
	}
}

// CreateTemp removes the temporary files a killed build of the version
// left beside its owner record and input cache.
func TestCreateTempRemovesRecordTemporaries(t *testing.T) {
	root := t.TempDir()
	name := "v0123456789abcdef"
	other := "v1111111111111111"
	for _, f := range []string{"." + "." + name + ".config.tmp-1", "." + "." + name + ".inputs.tmp-2", "." + "." + other + ".config.tmp-3"} {
		writeFile(t, filepath.Join(root, f), "x")
	}
	l, err := LockVersion(root, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := l.CreateTemp(); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{".." + name + ".config.tmp-1": false, ".." + name + ".inputs.tmp-2": false, ".." + other + ".config.tmp-3": true} {
		if _, err := os.Stat(filepath.Join(root, f)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", f, err == nil, want)
		}
	}
}
