package roverd

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/scan.jsonl from the current scan")

// The demo scan, byte for byte: every sample (with its extras) and every
// dataset entry as JSON lines. TestScanDemo checks the same samples
// against the generator's formulas; this file pins everything else the
// pipeline records (paths, locators, attributes) against accidental change.
func TestGoldenScan(t *testing.T) {
	s := mustNew(t, demoRoot, demoOptions())
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
	path := filepath.Join("testdata", "golden", "scan.jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sources/roverd -run TestGoldenScan -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("scan differs from %s (rerun with -update if the change is intended):\n%s", path, buf.String())
	}
}
