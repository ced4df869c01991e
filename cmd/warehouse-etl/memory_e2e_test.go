package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// writeHostileRun writes a capture run of n hostile PNGs (8000x8000 RGBA
// of zeros, 249 KB each: testfiles.HostilePNG) with one box each.
func writeHostileRun(t *testing.T, runDir string, n int) {
	t.Helper()
	files := map[string][]byte{}
	for i := range n {
		name := fmt.Sprintf("frame_%05d", i)
		files["images/"+name+".png"] = testfiles.HostilePNG(t, 8000, 8000, name)
		label, _ := json.Marshal(map[string]any{
			"frame_id": i, "image": "images/" + name + ".png", "image_present": true,
			"labels": []any{map[string]any{"bbox_px": []float64{100, 200, 4000, 4000}}},
		})
		files["labels/"+name+".json"] = label
	}
	testfiles.WriteTree(t, runDir, files)
}

// buildPeak runs the CLI binary's build as a child process and returns its
// exit code, its peak resident set (getrusage's ru_maxrss of the child,
// the kernel's high-water mark of its RSS) and its stderr.
func buildPeak(t *testing.T, bin string, args ...string) (code int, peak int64, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"build"}, args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the child")
	}
	return cmd.ProcessState.ExitCode(), ru.Maxrss << 10, errb.String() // Linux: kilobytes
}

// The hostile set of issue 23: six 249 KB PNGs that each declare
// 8000x8000 (inside the pixel limit) and decode to 256 MB. Without a
// budget every worker holds one: 4 workers peaked at 1.1 GB. Under
// --memory-limit the build's peak RSS stays under the limit at 1, 2 and 4
// workers, every sample is decoded (the workers wait for each other), and
// the shards are the same for every worker count. A control run with a
// limit far above the machine shows the set does multiply without one, so
// the bound is not met by accident. A limit smaller than one decode fails
// those samples as decode_error, counted, and the build ends.
func TestHostileSetPeakUnderMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and decodes 1.5 GB of pixels")
	}
	bin := filepath.Join(t.TempDir(), "warehouse-etl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := filepath.Join(t.TempDir(), "data")
	writeHostileRun(t, filepath.Join(root, "run_1"), 6)

	const limit = 600 << 20
	var versions []string
	for _, workers := range []int{1, 2, 4} {
		cfg, outRoot := writeConfig(t, root, nil)
		code, peak, stderr := buildPeak(t, bin, "--config", cfg, "--workers", fmt.Sprint(workers), "--memory-limit", "600MiB", "--quiet")
		if code != 0 {
			t.Fatalf("%d workers: exit %d\n%s", workers, code, stderr)
		}
		t.Logf("%d workers: peak RSS %d MiB under --memory-limit 600MiB", workers, peak>>20)
		if peak > limit {
			t.Errorf("%d workers: peak RSS %d MiB above the limit of %d MiB", workers, peak>>20, limit>>20)
		}
		dirs := versionsOnly(versionDirs(t, outRoot))
		if len(dirs) != 1 {
			t.Fatalf("%d workers: versions %v", workers, dirs)
		}
		m, err := warehouse.ReadManifest(filepath.Join(outRoot, dirs[0]))
		if err != nil {
			t.Fatal(err)
		}
		if m.Summary.Total.Kept != 6 || len(m.Summary.Total.ByReason) != 0 {
			t.Errorf("%d workers: kept %d of 6, reasons %v", workers, m.Summary.Total.Kept, m.Summary.Total.ByReason)
		}
		versions = append(versions, shardDigests(m))
	}
	if versions[0] != versions[1] || versions[0] != versions[2] {
		t.Errorf("shards differ between 1, 2 and 4 workers:\n%s", strings.Join(versions, "\n"))
	}

	// Control: no effective limit, 4 workers hold four images at once.
	cfg, _ := writeConfig(t, root, nil)
	code, peak, stderr := buildPeak(t, bin, "--config", cfg, "--workers", "4", "--memory-limit", "64GiB", "--quiet")
	if code != 0 {
		t.Fatalf("control: exit %d\n%s", code, stderr)
	}
	t.Logf("control, 4 workers, no effective limit: peak RSS %d MiB", peak>>20)
	if peak <= limit {
		t.Errorf("control peak %d MiB is within %d MiB: the hostile set no longer shows what the limit prevents", peak>>20, limit>>20)
	}

	// A limit smaller than one decode: each sample fails alone, counted,
	// and the build does not wait forever.
	cfg, outRoot := writeConfig(t, root, map[string]any{"thresholds": map[string]any{"invalid": map[string]any{"action": "warn"}}})
	code, _, stderr = buildPeak(t, bin, "--config", cfg, "--workers", "2", "--memory-limit", "200MiB", "--quiet")
	if code != 0 {
		t.Fatalf("tiny limit: exit %d\n%s", code, stderr)
	}
	dirs := versionsOnly(versionDirs(t, outRoot))
	if len(dirs) != 1 {
		t.Fatalf("tiny limit: versions %v", dirs)
	}
	m, err := warehouse.ReadManifest(filepath.Join(outRoot, dirs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Summary.Total.ByReason[validate.ReasonDecodeError]; got != 6 {
		t.Errorf("tiny limit: decode_error %d, want 6 (reasons %v)", got, m.Summary.Total.ByReason)
	}
	samples, err := os.ReadFile(filepath.Join(outRoot, dirs[0], "samples.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(samples), "larger than the whole memory budget") {
		t.Errorf("samples.jsonl does not say why:\n%.2000s", samples)
	}
}

// shardDigests lists a manifest's shard checksums.
func shardDigests(m *warehouse.Manifest) string {
	var sums []string
	for _, s := range m.Shards {
		sums = append(sums, s.ChecksumSHA256)
	}
	return strings.Join(sums, ",")
}

// versionsOnly keeps the version directories of versionDirs' list (not
// the pointers or the owner records beside them).
func versionsOnly(names []string) []string {
	var out []string
	for _, n := range names {
		if crashVersionRE.MatchString(n) {
			out = append(out, n)
		}
	}
	return out
}

// A --memory-limit that is not a size, or too small for the worker count,
// is a usage error (exit 2) naming what to do, before anything is built.
func TestMemoryLimitUsageErrors(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // the build lowers the process's soft limit
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	for _, c := range []struct {
		limit string
		want  string
	}{
		{"2XB", `--memory-limit: size "2XB": want a number of bytes with an optional unit`},
		{"40MiB", "memory limit 40.0 MiB is too small for 4 workers"},
	} {
		res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--workers", "4", "--memory-limit", c.limit, "--quiet")
		if res.code != exitUsage || !strings.Contains(res.stderr, c.want) {
			t.Errorf("--memory-limit %s: exit %d, stderr %q; want %d and %q", c.limit, res.code, res.stderr, exitUsage, c.want)
		}
	}
	if got := versionsOnly(versionDirs(t, outRoot)); len(got) != 0 {
		t.Errorf("a refused build left %v", got)
	}
}
