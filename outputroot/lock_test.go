package outputroot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
