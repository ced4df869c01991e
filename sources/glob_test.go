package sources

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestGlobFiles(t *testing.T) {
	dir := t.TempDir()
	for _, rel := range []string{"a/run_10/ep.kdb", "a/run_2/ep.kdb", "a/run_2/notes.txt", "a/run_3.kdb/x"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base, rels, err := GlobFiles(filepath.Join(dir, "a", "run_*", "*.kdb"))
	if err != nil || base != filepath.Join(dir, "a") || !slices.Equal(rels, []string{"run_2/ep.kdb", "run_10/ep.kdb"}) {
		t.Fatalf("base %q rels %v err %v", base, rels, err)
	}
	// Directories that match are not files.
	if _, rels, err := GlobFiles(filepath.Join(dir, "a", "run_*.kdb")); err != nil || len(rels) != 0 {
		t.Fatalf("directory matched: %v %v", rels, err)
	}
	if _, _, err := GlobFiles(filepath.Join(dir, "[")); !errors.Is(err, filepath.ErrBadPattern) {
		t.Fatalf("bad pattern: %v", err)
	}
}
