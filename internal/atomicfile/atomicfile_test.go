package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "metrics.prom")
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := Write(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("after Write(%q): %q, %v", content, got, err)
		}
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644 whatever the umask", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d entries, want only the file: a temporary was left", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "x"), nil, 0o644); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestWriteSynced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "manifest.json")
	for _, content := range []string{"a longer first content", "short"} {
		if err := WriteSynced(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(p); string(got) != "short" {
		t.Fatalf("%q: WriteSynced must truncate", got)
	}
}
