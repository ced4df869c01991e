package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/outputroot"
)

// nanDataset writes a capture run of six frames: four good, frame 4 with a
// box whose x_max < x_min, and frame 5 written by Python's json.dumps with
// a NaN (not JSON).
func nanDataset(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string][]byte{}
	for i := range 6 {
		files[fmt.Sprintf("run_1/images/f%d.png", i)] = testfiles.Image(t, "png", 64, 48)
		label := fmt.Sprintf(`{"frame_id": %d, "image": "images/f%d.png", "labels": [{"bbox_px": [10, 20, 30, 40], "class_name": "car"}]}`, i, i)
		switch i {
		case 4:
			label = `{"frame_id": 4, "image": "images/f4.png", "labels": [{"bbox_px": [10, 20, 5, 40], "class_name": "car"}]}`
		case 5:
			label = `{"frame_id": 5, "image": "images/f5.png", "sim_time": NaN, "labels": []}`
		}
		files[fmt.Sprintf("run_1/labels/f%d.json", i)] = []byte(label)
	}
	testfiles.WriteTree(t, root, files)
	return root
}

// A build that fails its thresholds says why: the counts by reason, the
// first offending samples with their files and causes, and where the full
// report is; the report holds every sample; the metrics carry the counts
// by reason; gc removes the report; validate prints the same without
// writing anything under the output root.
func TestFailedBuildExplainsItself(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, nanDataset(t), map[string]any{
		"thresholds": map[string]any{"invalid": map[string]any{"max_ratio": 0.1}},
	})
	metrics := filepath.Join(t.TempDir(), "build.prom")
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet", "--metrics-file", metrics)
	if res.code != exitThreshold {
		t.Fatalf("exit %d, want 3\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"failed    threshold invalid.max_ratio exceeded: 0.3333333333333333 (2 of 6 samples) > limit 0.1 (action fail)",
		"samples   6 input: 4 kept, 2 skipped (invalid 2, missing 0)",
		"    bad_schema                        1  invalid\n",
		"    invalid_bbox                      1  invalid\n",
		"first offending samples (2 of 2):",
		"run_1 frame 4  label run_1/labels/f4.json  image run_1/images/f4.png\n      invalid_bbox: bbox_px [10, 20, 5, 40]: x_max is not greater than x_min\n",
		"run_1 frame 5  label run_1/labels/f5.json  image run_1/images/f5.png\n      bad_schema: invalid JSON: NaN at byte 54\n",
		"nothing was published",
		"warehouse-etl build: validation failed: threshold invalid.max_ratio exceeded",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("a failed build published %v", got)
	}
	entries, err := os.ReadDir(outRoot)
	if err != nil {
		t.Fatal(err)
	}
	var report string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), outputroot.FailedSuffix) {
			report = filepath.Join(outRoot, e.Name())
		}
	}
	if report == "" || !strings.Contains(res.stderr, "report    "+report+"/samples.jsonl") {
		t.Fatalf("no report directory named in stderr (%v):\n%s", entries, res.stderr)
	}
	lines := readSamples(t, report)
	if len(lines) != 6 {
		t.Fatalf("the report lists %d samples, want 6", len(lines))
	}
	nan := lines[5]
	if nan.Frame != 5 || nan.ImagePath != "run_1/images/f5.png" || nan.Kept || nan.Detail != "bad_schema: invalid JSON: NaN at byte 54" {
		t.Errorf("the NaN label's line: %+v", nan)
	}
	if !lines[0].Kept || lines[0].Index != 0 || lines[0].Shard != "" || lines[0].Detail != "" {
		t.Errorf("a clean sample's line: %+v", lines[0])
	}
	if _, err := os.Stat(filepath.Join(report, "samples.parquet")); err != nil {
		t.Error(err)
	}
	m, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	label := `{config="` + cfgPath + `",reason="bad_schema"}`
	if metricValue(t, string(m), "warehouse_etl_build_samples_by_reason"+label) != 1 ||
		metricValue(t, string(m), `warehouse_etl_build_samples{config="`+cfgPath+`",status="invalid"}`) != 2 {
		t.Errorf("metrics lack the counts by reason:\n%s", m)
	}

	// validate prints the same report on stdout and writes nothing under
	// the output root; --report writes the files where it is told.
	reportDir := filepath.Join(t.TempDir(), "report")
	v := runCLI(t, context.Background(), nil, "validate", "--config", cfgPath, "--quiet", "--decode", "--report", reportDir)
	if v.code != exitThreshold || !strings.Contains(v.stdout, "first offending samples (2 of 2):") ||
		!strings.Contains(v.stdout, "bad_schema: invalid JSON: NaN at byte 54") || !strings.Contains(v.stdout, "nothing was built") {
		t.Fatalf("validate: exit %d\nstdout:\n%s\nstderr:\n%s", v.code, v.stdout, v.stderr)
	}
	if got := len(readSamples(t, reportDir)); got != 6 {
		t.Errorf("validate --report wrote %d lines", got)
	}
	after, err := os.ReadDir(outRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(entries) {
		t.Errorf("validate changed the output root: %v, before %v", after, entries)
	}

	// gc removes the report like other leftovers of failed builds.
	g := runCLI(t, context.Background(), nil, "gc", "--output-root", outRoot, "--keep", "1")
	if g.code != 0 {
		t.Fatalf("gc: exit %d\n%s", g.code, g.stderr)
	}
	if _, err := os.Stat(report); !os.IsNotExist(err) {
		t.Fatalf("gc left the report %s (%v):\n%s%s", report, err, g.stdout, g.stderr)
	}

	// With the thresholds relaxed validate passes (exit 0) and names the
	// skipped samples; the build then publishes.
	v = runCLI(t, context.Background(), map[string]string{"WAREHOUSE_MAX_INVALID_RATIO": "0.5"}, "validate", "--config", cfgPath, "--decode")
	if v.code != 0 || !strings.Contains(v.stdout, "thresholds pass: version ") || !strings.Contains(v.stdout, "decoded   4 images") ||
		!strings.Contains(v.stdout, "first skipped samples (2 of 2):") {
		t.Fatalf("validate: exit %d\nstdout:\n%s\nstderr:\n%s", v.code, v.stdout, v.stderr)
	}

	// A successful build removes the report a failed one left; a rerun
	// against stricter thresholds explains itself from the version.
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet"); res.code != exitThreshold {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	dir, _ := mustBuild(t, cfgPath, map[string]string{"WAREHOUSE_MAX_INVALID_RATIO": "0.5"}, "--quiet")
	if _, err := os.Stat(report); !os.IsNotExist(err) {
		t.Errorf("the published build left the report %s (%v)", report, err)
	}
	res = runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet")
	if res.code != exitThreshold || !strings.Contains(res.stderr, "first offending samples (2 of 2):") ||
		!strings.Contains(res.stderr, "report    "+dir+"/samples.jsonl") ||
		!strings.Contains(res.stderr, "the version was published earlier and stays") ||
		!strings.Contains(res.stderr, "bad_schema: invalid JSON: NaN at byte 54") {
		t.Fatalf("rerun against stricter thresholds: exit %d\n%s", res.code, res.stderr)
	}
}

// A late decode failure (a header that decodes, pixels that do not) is
// what validate --decode finds and plain validate cannot.
func TestValidateDecode(t *testing.T) {
	root := nanDataset(t)
	png := testfiles.Image(t, "png", 64, 48)
	// Keep the header (signature + IHDR), cut the pixel data short.
	if err := os.WriteFile(filepath.Join(root, "run_1", "images", "f0.png"), png[:40], 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := writeConfig(t, root, map[string]any{
		"thresholds": map[string]any{"invalid": map[string]any{"max_count": 2}},
	})
	v := runCLI(t, context.Background(), nil, "validate", "--config", cfgPath, "--quiet")
	if v.code != 0 {
		t.Fatalf("validate without --decode: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
	v = runCLI(t, context.Background(), nil, "validate", "--config", cfgPath, "--quiet", "--decode")
	if v.code != exitThreshold || !strings.Contains(v.stdout, "decode_error") || !strings.Contains(v.stdout, "run_1 frame 0  label run_1/labels/f0.json  image run_1/images/f0.png\n      decode_error: ") {
		t.Fatalf("validate --decode: exit %d\nstdout:\n%s\nstderr:\n%s", v.code, v.stdout, v.stderr)
	}
}
