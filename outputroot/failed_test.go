package outputroot

import (
	"os"
	"path/filepath"
	"testing"
)

// gc removes a failed build's report unless a build of its version runs
// (it may be writing a new one); --dry-run only says.
func TestGCRemovesFailedReports(t *testing.T) {
	root := t.TempDir()
	const a, b = "v00000000000000aa", "v00000000000000bb"
	for _, v := range []string{a, b} {
		writeFile(t, filepath.Join(root, FailedDir(v), "samples.jsonl"), "{}\n")
	}
	running, err := LockVersion(root, b)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Release()

	rep, err := GC(root, GCOptions{Keep: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].Path != filepath.Join(root, FailedDir(a)) || rep.Removed[0].Bytes != 3 {
		t.Fatalf("dry run: removed %+v", rep.Removed)
	}
	if _, err := os.Stat(filepath.Join(root, FailedDir(a))); err != nil {
		t.Fatalf("a dry run removed it: %v", err)
	}
	if _, err := GC(root, GCOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, FailedDir(a))); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", FailedDir(a), err)
	}
	if _, err := os.Stat(filepath.Join(root, FailedDir(b))); err != nil {
		t.Errorf("the report of a running build was removed: %v", err)
	}
}
