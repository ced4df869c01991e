package analytics_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"warehouse-etl/analytics"
)

// The Parquet exports get the mode every other file of a version gets:
// 0666 as the umask allows, so a stricter umask (027: no access for
// others) is kept, not overridden by a fixed 0644.
func TestParquetModeFollowsUmask(t *testing.T) {
	dir, m := buildDemo(t, t.TempDir(), nil)
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	if _, err := analytics.Export(context.Background(), dir, m, analytics.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"samples.parquet", "runs.parquet", "build.parquet"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v under umask 027, want 0640", name, st.Mode().Perm())
		}
	}
}
