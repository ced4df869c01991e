package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// metricValue returns the value of the sample `name{labels}` in a text
// exposition, or fails the test.
func metricValue(t *testing.T, text, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return x
		}
	}
	t.Fatalf("no sample %s in\n%s", sample, text)
	return 0
}

// promtoolCheck runs Prometheus' own linter on a metrics file when
// promtool is installed (Debian's prometheus package; CI installs it).
func promtoolCheck(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; CI must install Debian's prometheus package")
		}
		t.Logf("promtool not found: the exposition format is not linted")
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// build --metrics-file writes the run's outcome for the textfile
// collector, on success and on every kind of failure, and a failed run
// keeps the time of the last success.
func TestBuildMetricsFile(t *testing.T) {
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{48, 32}, "shard_target_mb": 0.05})
	metrics := filepath.Join(t.TempDir(), "warehouse_etl.prom")
	read := func() string {
		raw, err := os.ReadFile(metrics)
		if err != nil {
			t.Fatal(err)
		}
		promtoolCheck(t, metrics)
		return string(raw)
	}
	label := `{config="` + cfgPath + `"}`
	dir, _ := mustBuild(t, cfgPath, nil, "--metrics-file", metrics, "--quiet")
	m := read()
	if metricValue(t, m, "warehouse_etl_build_last_exit_code"+label) != 0 ||
		metricValue(t, m, `warehouse_etl_build_outcome{config="`+cfgPath+`",outcome="built"}`) != 1 {
		t.Fatalf("first build:\n%s", m)
	}
	man, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, m, `warehouse_etl_build_samples{config="`+cfgPath+`",status="kept"}`); got != float64(man.Samples) {
		t.Errorf("kept %v, manifest %d", got, man.Samples)
	}
	if got := metricValue(t, m, `warehouse_etl_build_samples_by_reason{config="`+cfgPath+`",reason="missing_file"}`); got != float64(man.Summary.Total.ByReason["missing_file"]) {
		t.Errorf("missing_file %v, manifest %d", got, man.Summary.Total.ByReason["missing_file"])
	}
	if metricValue(t, m, `warehouse_etl_build_phase_seconds{config="`+cfgPath+`",phase="total"}`) <= 0 ||
		metricValue(t, m, "warehouse_etl_build_bytes_written"+label) <= 0 {
		t.Errorf("phases or bytes missing:\n%s", m)
	}
	success := metricValue(t, m, "warehouse_etl_build_last_success_timestamp_seconds"+label)

	// A threshold failure (exit 3) and a config error (exit 2) are written
	// too, and keep the last success.
	res := runCLI(t, context.Background(), map[string]string{"WAREHOUSE_MAX_INVALID": "0", "WAREHOUSE_CLEAR": "1"}, "build", "--config", cfgPath, "--metrics-file", metrics, "--quiet")
	if res.code != exitThreshold {
		t.Fatalf("threshold build: exit %d\n%s", res.code, res.stderr)
	}
	m = read()
	if metricValue(t, m, "warehouse_etl_build_last_exit_code"+label) != exitThreshold ||
		metricValue(t, m, `warehouse_etl_build_outcome{config="`+cfgPath+`",outcome="failed"}`) != 1 ||
		metricValue(t, m, "warehouse_etl_build_last_success_timestamp_seconds"+label) != success {
		t.Fatalf("after a threshold failure:\n%s", m)
	}
	// A threshold failure reports the samples of the plan it stopped,
	// by status and by reason (issue 27): what failed, without a version.
	if metricValue(t, m, `warehouse_etl_build_samples{config="`+cfgPath+`",status="invalid"}`) < 1 ||
		metricValue(t, m, `warehouse_etl_build_samples_by_reason{config="`+cfgPath+`",reason="invalid_bbox"}`) < 1 ||
		strings.Contains(m, "warehouse_etl_build_bytes_written{") {
		t.Errorf("a threshold failure's metrics:\n%s", m)
	}
	promtoolCheck(t, metrics)
	if err := os.WriteFile(cfgPath, []byte(`{"source": {"root": "x"}, "dtype": "f8"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--metrics-file", metrics)
	if res.code != exitUsage || metricValue(t, read(), "warehouse_etl_build_last_exit_code"+label) != exitUsage {
		t.Fatalf("config error: exit %d\n%s", res.code, read())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(metrics), ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// --lock-wait waits for another build of the same version instead of
// exiting 5, and still exits 5 when the lock outlasts the wait.
func TestBuildLockWait(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{40, 24}, "shard_target_mb": 0.05})
	dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
	name := filepath.Base(dir)
	held, err := outputroot.LockVersion(outRoot, name)
	if err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet"); res.code != exitLocked {
		t.Fatalf("no wait: exit %d, want %d", res.code, exitLocked)
	}
	start := time.Now()
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet", "--lock-wait", "300ms"); res.code != exitLocked || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("short wait: exit %d after %v, want %d after >= 300ms", res.code, time.Since(start), exitLocked)
	}
	go func() {
		time.Sleep(400 * time.Millisecond)
		held.Release()
	}()
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet", "--lock-wait", "1m")
	if res.code != exitOK || strings.TrimSpace(res.stdout) != dir {
		t.Fatalf("wait: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// A build removes the temporary directories that builds of other versions
// left behind when they died (their lock is free), and says so.
func TestBuildRemovesOtherVersionsTemporaries(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{40, 24}, "shard_target_mb": 0.05})
	stale := filepath.Join(outRoot, ".v0123456789abcdef.tmp-xyz")
	if err := os.MkdirAll(filepath.Join(stale, "shards"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, res := mustBuild(t, cfgPath, nil)
	if exists(stale) || !strings.Contains(res.stderr, "removed a temporary directory") {
		t.Fatalf("stale temporary exists %v\n%s", exists(stale), res.stderr)
	}
}

// Out of disk: the build exits 1 naming the problem, publishes nothing and
// leaves no temporary directory. Needs a small filesystem: a tmpfs this
// test mounts where it may (root in a namespace that allows it).
func TestBuildOutOfDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a 1 MiB tmpfs here (%v): the out-of-disk test needs one", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	outRoot := filepath.Join(mnt, "out")
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{256, 256}, "dtype": "f32", "shard_target_mb": 0.5, "output_root": outRoot})
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet")
	if res.code != exitFailure || !regexp.MustCompile(`no space left on device(.|\n)*is full: nothing was published`).MatchString(res.stderr) {
		t.Fatalf("exit %d, want %d naming the full disk\n%s", res.code, exitFailure, res.stderr)
	}
	entries, err := os.ReadDir(outRoot)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case strings.HasSuffix(e.Name(), ".lock"):
		case strings.HasSuffix(e.Name(), ".inputs"): // the scan's input cache (docs/reuse.md)
		case strings.HasSuffix(e.Name(), ".staging"):
			// Complete shards stay for the rerun; a shard without its
			// record (the one being written when the disk filled) does not.
			shards, _ := filepath.Glob(filepath.Join(outRoot, e.Name(), "shards", "*.twh"))
			for _, sh := range shards {
				if !exists(strings.TrimSuffix(sh, ".twh") + ".json") {
					t.Errorf("an incomplete shard was left in the staging directory: %s", sh)
				}
			}
		default:
			t.Errorf("left behind in the output root: %s", e.Name())
		}
	}
}
