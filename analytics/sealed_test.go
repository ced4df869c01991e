package analytics_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/analytics"
	"warehouse-etl/verify"
	"warehouse-etl/warehouse"
)

// A built version's manifest records the sha256 of its Parquet exports:
// re-exporting it writes the same bytes (and replaces the files), while an
// export that would change them is refused and replaces nothing.
func TestExportKeepsSealedFilesIdentical(t *testing.T) {
	ctx := context.Background()
	dir, m := buildDemo(t, t.TempDir(), nil)
	names := []string{warehouse.SamplesParquetName, warehouse.RunsParquetName, warehouse.BuildParquetName}
	for _, name := range names {
		if _, ok := m.Files.Checksums[name]; !ok {
			t.Fatalf("the manifest records no checksum of %s", name)
		}
	}
	if _, err := analytics.Export(ctx, dir, m, analytics.ExportOptions{}); err != nil {
		t.Fatalf("re-export of a sealed version: %v", err)
	}
	if findings, err := verify.Check(ctx, dir, verify.Options{}); err != nil || len(findings) != 0 {
		t.Fatalf("after re-export: %v %+v", err, findings)
	}

	before := map[string]os.FileInfo{}
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = st
	}
	other := *m
	other.Files.Checksums = maps.Clone(m.Files.Checksums)
	e := other.Files.Checksums[warehouse.RunsParquetName]
	e.SHA256 = strings.Repeat("0", 64)
	other.Files.Checksums[warehouse.RunsParquetName] = e
	_, err := analytics.Export(ctx, dir, &other, analytics.ExportOptions{})
	if !errors.Is(err, analytics.ErrSealed) || !strings.Contains(err.Error(), warehouse.RunsParquetName) ||
		!strings.Contains(err.Error(), "WAREHOUSE_CLEAR=1") {
		t.Fatalf("export over a differing sealed file: %v", err)
	}
	if err := analytics.ExportBuild(ctx, dir, &other); err != nil {
		t.Fatalf("build.parquet is unchanged, yet: %v", err)
	}
	for _, name := range names[:2] {
		st, _ := os.Stat(filepath.Join(dir, name))
		if !os.SameFile(st, before[name]) {
			t.Errorf("the refused export replaced %s", name)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left %s behind", e.Name())
		}
	}
	if findings, err := verify.Check(ctx, dir, verify.Options{}); err != nil || len(findings) != 0 {
		t.Fatalf("after the refused export: %v %+v", err, findings)
	}
}
