package outputroot

import (
	"errors"
	"os"
	"testing"
)

// An s3:// location is refused by the local lifecycle, never taken for a
// directory named "s3:" (what a build did before s3:// roots existed).
func TestObjectStoreLocationRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	const loc = "s3://warehouses/demo"
	if _, err := LockVersion(loc, "v0123456789abcdef"); !errors.Is(err, ErrObjectStore) {
		t.Fatalf("LockVersion: %v", err)
	}
	if _, err := LockVersionShared(t.Context(), loc, "v0123456789abcdef", 0); !errors.Is(err, ErrObjectStore) {
		t.Fatalf("LockVersionShared: %v", err)
	}
	if _, err := GC(loc, GCOptions{Keep: 1}); !errors.Is(err, ErrObjectStore) {
		t.Fatalf("GC: %v", err)
	}
	if _, err := CleanTemporary(loc, "", true); !errors.Is(err, ErrObjectStore) {
		t.Fatalf("CleanTemporary: %v", err)
	}
	if _, err := os.Lstat("s3:"); err == nil {
		t.Fatal(`a directory "s3:" was created`)
	}
}
