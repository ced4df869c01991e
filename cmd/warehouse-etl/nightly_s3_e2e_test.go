package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNightlyS3OutputRoot: deploy/nightly.sh on an s3:// output root.
// build prints the version's URL (no local directory); the script
// verifies it from the store, runs gc on the root's URL and writes the
// report to a local REPORT_DIR, and exits 0.
func TestNightlyS3OutputRoot(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	s3Setup(t)
	bin := mustBinary(t)
	const url = "s3://" + s3Bucket + "/nightly"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	reports := t.TempDir()
	cmd := exec.Command("sh", "../../deploy/nightly.sh", cfgPath)
	cmd.Env = append(os.Environ(), "WAREHOUSE_ETL="+bin, "VERIFY_FLAGS=", "LOCK_WAIT=1s",
		"REPORT_DIR="+reports, "WAREHOUSE_ETL_S3_WORK="+t.TempDir(), "WAREHOUSE_ETL_S3_CACHE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nightly.sh on %s: %v\n%s", url, err, out)
	}
	p := s3Pointer(t, "nightly", "latest")
	v := strings.TrimSpace(p)
	if v == "" {
		t.Fatalf("no latest after nightly.sh:\n%s", out)
	}
	for _, want := range []string{"nightly: version " + url + "/" + v, "nightly: done: " + url + "/" + v + " verified"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("nightly.sh output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(reports, v, "index.html")); err != nil {
		t.Fatalf("no report in REPORT_DIR: %v\n%s", err, out)
	}
}
