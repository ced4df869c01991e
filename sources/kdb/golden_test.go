package kdb

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDemoScanGolden pins the whole scan of the demo file (samples with
// their locators, sizes, times and reasons, then the episode entries) so
// any change in what the source hands the pipeline shows up in review.
// The values in it are checked against the generator's formulas by
// TestDemoScan; extras are left out there because JSON cannot hold the
// planted NaN. Rewrite with go test -run TestDemoScanGolden -update.
func TestDemoScanGolden(t *testing.T) {
	s := demoSource(t, Options{})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, smp := range scanAll(t, s) {
		if err := enc.Encode(smp); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range s.Entries() {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join("testdata", "golden", "demo_scan.jsonl")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("scan differs from %s (rerun with -update and review the diff):\n%s", path, buf.String())
	}
}
