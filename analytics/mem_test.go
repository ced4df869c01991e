package analytics

import (
	"context"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"warehouse-etl/warehouse"
)

// exportPeakHeap exports a synthetic version of n samples and returns the
// peak live heap during the export.
func exportPeakHeap(t *testing.T, n int) uint64 {
	t.Helper()
	dir := t.TempDir()
	m := synthWarehouse(t, dir, n, 50_000)
	runtime.GC()
	debug.FreeOSMemory()
	stop := peakHeap()
	res, err := Export(context.Background(), dir, m, ExportOptions{})
	peak := stop()
	if err != nil {
		t.Fatal(err)
	}
	checkRowGroups(t, filepath.Join(dir, warehouse.SamplesParquetName), int64(n))
	if res.SampleRows != int64(n) {
		t.Fatalf("%d sample rows, want %d", res.SampleRows, n)
	}
	return peak
}

// checkRowGroups checks a file holds rows rows in full row groups of
// batchRows, the last one possibly shorter.
func checkRowGroups(t *testing.T, path string, rows int64) {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	md := r.MetaData()
	if md.NumRows != rows || int64(md.NumRowGroups()) != (rows+batchRows-1)/batchRows {
		t.Fatalf("%s: %d rows in %d row groups, want %d rows in groups of %d", path, md.NumRows, md.NumRowGroups(), rows, batchRows)
	}
	for i := range md.NumRowGroups() {
		if n := md.RowGroup(i).NumRows(); n != batchRows && i != md.NumRowGroups()-1 {
			t.Fatalf("row group %d holds %d rows", i, n)
		}
	}
}

// A version without samples (every input skipped, or none scanned) exports
// files with the schema and no rows.
func TestExportEmptyVersion(t *testing.T) {
	dir := t.TempDir()
	m := synthWarehouse(t, dir, 0, 10)
	res, err := Export(context.Background(), dir, m, ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SampleRows != 0 || res.RunRows != 11 {
		t.Fatalf("%+v", res)
	}
	checkRowGroups(t, filepath.Join(dir, warehouse.SamplesParquetName), 0)
}

// Memory is bounded: exporting four times as many rows needs about the
// same peak live heap (one batch, one column chunk, the zstd encoder), not
// four times as much.
func TestExportMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("exports 500,000 rows")
	}
	small := exportPeakHeap(t, 125_000)
	large := exportPeakHeap(t, 500_000)
	t.Logf("peak live heap: %d MiB for 125k rows, %d MiB for 500k rows", small>>20, large>>20)
	if large > small+small/4+16<<20 {
		t.Fatalf("peak live heap grew from %d MiB (125k rows) to %d MiB (500k rows)", small>>20, large>>20)
	}
}
