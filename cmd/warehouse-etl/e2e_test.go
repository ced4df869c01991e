package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/outputroot"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// demoRoot is the shipped demo dataset, as an absolute path.
func demoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../testdata/capture")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// writeConfig writes a config for dataset root into a temp dir, with the
// demo's settings plus overrides, and returns its path and output root.
func writeConfig(t *testing.T, root string, overrides map[string]any) (cfgPath, outRoot string) {
	t.Helper()
	dir := t.TempDir()
	outRoot = filepath.Join(dir, "out")
	cfg := map[string]any{
		"source":          map[string]any{"kind": "capture", "root": root},
		"target_size":     []int{384, 384},
		"dtype":           "f16",
		"max_boxes":       16,
		"shard_target_mb": 4,
		"thresholds": map[string]any{
			"invalid": map[string]any{"max_ratio": 0.5},
			"missing": map[string]any{"max_ratio": 0.25},
			"empty":   map[string]any{"max_ratio": 0.2, "action": "warn"},
		},
		"output_root": outRoot,
	}
	maps.Copy(cfg, overrides)
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath = filepath.Join(dir, "config.jsonc")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, outRoot
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI in-process with the given environment.
func runCLI(t *testing.T, ctx context.Context, env map[string]string, args ...string) cliResult {
	t.Helper()
	var out, errw bytes.Buffer
	e := &environment{streams: streams{stdout: &out, stderr: &errw}, getenv: func(k string) string { return env[k] }}
	code := run(ctx, e, args)
	return cliResult{code, out.String(), errw.String()}
}

func mustBuild(t *testing.T, cfgPath string, env map[string]string, extra ...string) (dir string, res cliResult) {
	t.Helper()
	res = runCLI(t, context.Background(), env, append([]string{"build", "--config", cfgPath}, extra...)...)
	if res.code != 0 {
		t.Fatalf("build exit %d\nstderr:\n%s", res.code, res.stderr)
	}
	return strings.TrimSpace(res.stdout), res
}

func readSamples(t *testing.T, dir string) []records.SampleLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, warehouse.SamplesName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []records.SampleLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r records.SampleLine
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("samples.jsonl line %d: %v", len(recs), err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// versionDirs lists what a build left under an output root, ignoring the
// lock files that are expected to stay.
func versionDirs(t *testing.T, outRoot string) []string {
	t.Helper()
	entries, err := os.ReadDir(outRoot)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		// Lock files, the staging directory an unfinished build keeps
		// for its rerun, the report a build that failed its thresholds
		// leaves and the input cache of a version's scans (whether a
		// scan keeps any file's identity depends on how old the files
		// are: docs/reuse.md): none is a version.
		if !strings.HasSuffix(e.Name(), ".lock") && !strings.HasSuffix(e.Name(), ".readers") && !strings.HasSuffix(e.Name(), ".staging") &&
			!strings.HasSuffix(e.Name(), ".failed") && !strings.HasSuffix(e.Name(), ".inputs") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestBuildDemoEndToEnd(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	dir, res := mustBuild(t, cfgPath, nil)
	if !strings.HasPrefix(dir, outRoot+string(filepath.Separator)+"v") {
		t.Fatalf("stdout %q is not a version dir under %s", dir, outRoot)
	}
	if !strings.Contains(res.stderr, "built: "+dir) {
		t.Fatalf("stderr lacks the summary:\n%s", res.stderr)
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if latest, err := warehouse.ResolveDir(outRoot); err != nil || latest != dir {
		t.Fatalf("latest -> %q, %v; want %s", latest, err, dir)
	}
	// Every shard's recorded checksum and size match the file.
	for _, s := range m.Shards {
		path := filepath.Join(dir, s.RelativePath)
		if got := fileSHA256(t, path); got != s.ChecksumSHA256 {
			t.Errorf("%s: sha256 %s, manifest says %s", s.ID, got, s.ChecksumSHA256)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != s.Bytes {
			t.Errorf("%s: size mismatch: %v", s.ID, err)
		}
	}
	if len(m.Shards) < 2 {
		t.Fatalf("demo with a 4 MiB shard target should give several shards, got %d", len(m.Shards))
	}
	// samples.jsonl lists every input sample once, in order, and agrees
	// with the summary.
	recs := readSamples(t, dir)
	if int64(len(recs)) != m.InputSamples || m.InputSamples != m.Summary.Total.Total {
		t.Fatalf("samples.jsonl has %d lines, manifest input_samples %d, summary total %d", len(recs), m.InputSamples, m.Summary.Total.Total)
	}
	var kept int64
	for i, r := range recs {
		if r.Seq != int64(i) {
			t.Fatalf("line %d has seq %d", i, r.Seq)
		}
		if r.Kept {
			if r.Index != kept {
				t.Fatalf("kept sample %d has index %d, want %d", i, r.Index, kept)
			}
			kept++
		}
	}
	if kept != m.Samples {
		t.Fatalf("%d kept lines, manifest samples %d", kept, m.Samples)
	}
	// No temporary or spill files remain: the version, its owner record,
	// latest and the config's own pointer (config.jsonc: "config").
	v := filepath.Base(dir)
	if got := versionDirs(t, outRoot); !slices.Equal(got, []string{"." + v + ".config", "latest", "latest-config", v}) {
		t.Fatalf("output root holds %v", got)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "build.parquet,build_report.json,fingerprint.jsonl,manifest.json,manifest.json.sha256,runs.parquet,samples.jsonl,samples.parquet,shard_sums.json,shards" {
		t.Fatalf("version dir holds %s", got)
	}
}

// The rerun, changed-source and WAREHOUSE_CLEAR paths, in order, on a
// private copy of the dataset.
func TestRerunChangedSourceAndClear(t *testing.T) {
	root := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(root, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := writeConfig(t, root, nil)
	dir, _ := mustBuild(t, cfgPath, nil)
	manifestPath := filepath.Join(dir, warehouse.ManifestName)
	before, _ := os.Stat(manifestPath)
	shardSums := map[string]string{}
	m, _ := warehouse.ReadManifest(dir)
	for _, s := range m.Shards {
		shardSums[s.RelativePath] = s.ChecksumSHA256
	}

	// Rerun: up to date, nothing rewritten.
	again, res := mustBuild(t, cfgPath, nil)
	if again != dir || !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("rerun: dir %s, stderr:\n%s", again, res.stderr)
	}
	after, _ := os.Stat(manifestPath)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("an up-to-date rerun rewrote the manifest")
	}

	// Touch one label: refused with exit 4 naming it.
	touched := filepath.Join(root, "run_2", "labels", "frame_00000.json")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(touched, future, future); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "build", "--config", cfgPath)
	rel, _ := filepath.Rel(root, touched)
	if res.code != exitStale || !strings.Contains(res.stderr, filepath.ToSlash(rel)) || !strings.Contains(res.stderr, "WAREHOUSE_CLEAR=1") {
		t.Fatalf("changed source: exit %d, stderr:\n%s", res.code, res.stderr)
	}

	// WAREHOUSE_CLEAR=1 rebuilds and replaces; the bytes are the same
	// because only an mtime changed.
	rebuilt, res := mustBuild(t, cfgPath, map[string]string{"WAREHOUSE_CLEAR": "1"})
	if rebuilt != dir || !strings.Contains(res.stderr, "rebuilt: ") {
		t.Fatalf("clear: dir %s, stderr:\n%s", rebuilt, res.stderr)
	}
	m2, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m2.Shards {
		if shardSums[s.RelativePath] != s.ChecksumSHA256 {
			t.Fatalf("%s changed across a rebuild of unchanged content", s.RelativePath)
		}
	}
	if m2.SourceFingerprint == m.SourceFingerprint {
		t.Fatal("the rebuilt manifest kept the old fingerprint")
	}
	// And now it is up to date again.
	if _, res := mustBuild(t, cfgPath, nil); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("after clear: %s", res.stderr)
	}
}

func TestThresholdFailurePublishesNothing(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	res := runCLI(t, context.Background(), map[string]string{"WAREHOUSE_MAX_INVALID": "0"}, "build", "--config", cfgPath)
	if res.code != exitThreshold {
		t.Fatalf("exit %d, want %d\n%s", res.code, exitThreshold, res.stderr)
	}
	if !regexp.MustCompile(`threshold invalid\.max_count exceeded: \d+ \(\d+ of \d+ samples\) > limit 0`).MatchString(res.stderr) {
		t.Fatalf("message does not name threshold, value and limit:\n%s", res.stderr)
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("a failed build left %v", got)
	}
	// The same limit as a ratio, from the config file.
	cfgPath, outRoot = writeConfig(t, demoRoot(t), map[string]any{"thresholds": map[string]any{
		"invalid": map[string]any{"max_ratio": 0.5},
		"missing": map[string]any{"max_ratio": 0.01},
	}})
	res = runCLI(t, context.Background(), nil, "build", "--config", cfgPath)
	if res.code != exitThreshold || !strings.Contains(res.stderr, "threshold missing.max_ratio exceeded") || !strings.Contains(res.stderr, "> limit 0.01") {
		t.Fatalf("exit %d:\n%s", res.code, res.stderr)
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("a failed build left %v", got)
	}
	// Warn instead of fail: the build goes on and reports it.
	res = runCLI(t, context.Background(), map[string]string{"WAREHOUSE_MISSING_ACTION": "warn"}, "build", "--config", cfgPath)
	if res.code != 0 || !strings.Contains(res.stderr, "warning   threshold missing.max_ratio exceeded") {
		t.Fatalf("warn: exit %d:\n%s", res.code, res.stderr)
	}
}

// Same config and inputs, 1 and 4 workers: byte-identical shards and
// samples.jsonl, and manifests that differ only in created_at_ms and the
// files.checksums entries of the files that carry it or the timings.
func TestDeterministicAcrossWorkerCounts(t *testing.T) {
	var dirs []string
	for _, workers := range []string{"1", "4"} {
		cfgPath, _ := writeConfig(t, demoRoot(t), nil)
		dir, _ := mustBuild(t, cfgPath, nil, "--workers", workers)
		dirs = append(dirs, dir)
	}
	if filepath.Base(dirs[0]) != filepath.Base(dirs[1]) {
		t.Fatalf("version dirs differ: %s vs %s", dirs[0], dirs[1])
	}
	m, _ := warehouse.ReadManifest(dirs[0])
	files := []string{warehouse.SamplesName, warehouse.FingerprintName, "samples.parquet"} // runs.parquet carries created_at_ms, like the manifest
	for _, s := range m.Shards {
		files = append(files, s.RelativePath)
	}
	for _, f := range files {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between 1 and 4 workers (%d vs %d bytes)", f, len(a), len(b))
		}
	}
	a, _ := os.ReadFile(filepath.Join(dirs[0], warehouse.ManifestName))
	b, _ := os.ReadFile(filepath.Join(dirs[1], warehouse.ManifestName))
	if !bytes.Equal(manifestSansTime(a), manifestSansTime(b)) {
		t.Errorf("manifests differ beyond created_at_ms and the checksums of the timed files:\n%s\n%s", manifestSansTime(a), manifestSansTime(b))
	}
}

// timedEntry matches the files.checksums entries of the files that are not
// a function of the config and inputs (docs/format/manifest.md):
// build_report.json and build.parquet (timings, host), runs.parquet (the
// manifest's created_at_ms).
var timedEntry = regexp.MustCompile(`\n\s*"(build_report\.json|build\.parquet|runs\.parquet)": \{\s*"bytes": \d+,\s*"sha256": "[0-9a-f]{64}"\s*\},?`)

// manifestSansTime is manifest bytes less created_at_ms and the timed
// files' checksums: what two builds of one version share byte for byte.
func manifestSansTime(raw []byte) []byte {
	raw = regexp.MustCompile(`"created_at_ms": \d+`).ReplaceAll(raw, nil)
	return timedEntry.ReplaceAll(raw, nil)
}

func TestInterruptedBuildPublishesNothing(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := runCLI(t, ctx, nil, "build", "--config", cfgPath)
	if res.code != exitInterrupted {
		t.Fatalf("exit %d, want %d:\n%s", res.code, exitInterrupted, res.stderr)
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("an interrupted build left %v", got)
	}
}

func TestLockedVersionExits5(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	dir, _ := mustBuild(t, cfgPath, nil)
	lock, err := outputroot.LockVersion(outRoot, filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath)
	if res.code != exitLocked || !strings.Contains(res.stderr, "another build of this version is running") {
		t.Fatalf("exit %d:\n%s", res.code, res.stderr)
	}
}

func TestUsageAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonc")
	os.WriteFile(bad, []byte("{\n  \"source\": {\"root\": \".\"},\n  \"target\": [1, 2]\n}\n"), 0o644)
	noRoot := filepath.Join(dir, "noroot.jsonc")
	os.WriteFile(noRoot, []byte(`{"source": {"root": "absent"}}`), 0o644)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "usage: warehouse-etl <command>"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"build"}, exitUsage, "--config is required"},
		{[]string{"build", "--config", bad}, exitUsage, `bad.jsonc: line 3: unknown key "target" at the top level`},
		{[]string{"build", "--config", filepath.Join(dir, "absent.jsonc")}, exitUsage, "no such file"},
		{[]string{"build", "--nope"}, exitUsage, "flag provided but not defined: -nope"},
		{[]string{"build", "--config", noRoot}, exitUsage, filepath.Join(dir, "absent") + ": not a readable directory"},
		{[]string{"--help"}, exitOK, "exit codes:"},
		{[]string{"build", "-h"}, exitOK, "WAREHOUSE_CLEAR=1"},
	}
	for _, tt := range tests {
		res := runCLI(t, context.Background(), nil, tt.args...)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tt.args, res.code, res.stderr, tt.code, tt.want)
		}
	}
}

// The demo's planted defects, from testdata/capture/README.md: the
// reasons samples.jsonl must carry for each label file. Every label not
// listed is clean and kept.
var demoDefects = map[string][]string{
	"run_2/labels/frame_00003.json":             {"empty"},
	"run_2/labels/frame_00005.json":             {"missing_image"},
	"run_2/labels/frame_00007.json":             {"bad_schema"},
	"run_2/labels/frame_00009.json":             {"duplicate_frame"},
	"run_10/labels/frame_00002.json":            {"missing_file"},
	"run_10/labels/frame_00003.json":            {"invalid_bbox"},
	"run_10/labels/frame_00004.json":            {"invalid_bbox"},
	"run_10/labels/frame_00005.json":            {"bbox_out_of_bounds"},
	"run_10/labels/frame_00006.json":            {"bbox_out_of_bounds"},
	"run_10/labels/frame_00008.json":            {"bad_schema"},
	"run_10/labels/frame_00009.json":            {"path_escape"},
	"run_1700000000123/labels/frame_00002.json": {"bad_schema"},
	"run_1700000000123/labels/frame_00004.json": {"decode_error"}, // header fine, pixel data cut: found at transform time
	"run_1700000000123/labels/frame_00005.json": {"decode_error"},
	"run_1700000000123/labels/frame_00008.json": {"missing_image"},
}

func TestDemoReasonsAndBoxes(t *testing.T) {
	cfgPath, _ := writeConfig(t, demoRoot(t), nil)
	dir, _ := mustBuild(t, cfgPath, nil)
	recs := readSamples(t, dir)
	seen := map[string]bool{}
	for _, r := range recs {
		want := demoDefects[r.LabelPath]
		got := make([]string, len(r.Reasons))
		for i, reason := range r.Reasons {
			got[i] = string(reason)
		}
		if !slices.Equal(got, want) && !(len(want) == 0 && len(got) == 0) {
			t.Errorf("%s: reasons %v, want %v", r.LabelPath, got, want)
		}
		wantKept := len(want) == 0 || (len(want) == 1 && want[0] == "empty")
		if r.Kept != wantKept {
			t.Errorf("%s: kept %v, want %v", r.LabelPath, r.Kept, wantKept)
		}
		seen[r.LabelPath] = true
	}
	for path := range demoDefects {
		if !seen[path] {
			t.Errorf("%s is missing from samples.jsonl", path)
		}
	}
	late := recs[slices.IndexFunc(recs, func(r records.SampleLine) bool {
		return r.LabelPath == "run_1700000000123/labels/frame_00004.json"
	})]
	if !strings.Contains(late.Error, "png") {
		t.Errorf("late decode failure has no error message: %+v", late)
	}

	// run_10 frame 0: 320x240 letterboxed into 384x384 is scale 1.2, 384x288
	// at y offset 48. Its first box, bbox_px [200, 79, 297.5, 138], lands at
	// x/384*1.2 and (y*1.2+48)/384, stored as f16.
	i := slices.IndexFunc(recs, func(r records.SampleLine) bool { return r.LabelPath == "run_10/labels/frame_00000.json" })
	r := recs[i]
	if r.Letterbox == nil || *r.Letterbox != (records.Letterbox{ScaleX: 1.2, ScaleY: 1.2, ResizedWidth: 384, ResizedHeight: 288, PadX: 0, PadY: 48}) {
		t.Fatalf("letterbox %+v", r.Letterbox)
	}
	sh, err := shard.Open(filepath.Join(dir, "shards", r.Shard+".twh"))
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	idx := int(r.ShardIndex)
	boxes := sh.Boxes(idx)
	if len(boxes) != 3 || sh.BoxCount(idx) != 3 {
		t.Fatalf("%d boxes, want 3", len(boxes))
	}
	want := [4]float64{200 * 1.2 / 384, (79*1.2 + 48) / 384, 297.5 * 1.2 / 384, (138*1.2 + 48) / 384}
	for k := range 4 {
		if d := math.Abs(float64(boxes[0][k]) - want[k]); d > 1.0/2048 {
			t.Errorf("box coordinate %d = %v, want %v (f16)", k, boxes[0][k], want[k])
		}
	}
	mask := sh.Mask(idx)
	if len(mask) != 16 || mask[2] != 1 || mask[3] != 0 {
		t.Errorf("mask %v, want 3 ones then zeros", mask)
	}
	m := sh.Meta(idx)
	if m.FrameID != 0 || m.InputSeq != uint64(r.Seq) || m.SrcWidth != 320 || m.SrcHeight != 240 || m.PadY != 48 {
		t.Errorf("meta %+v", m)
	}
	// The letterbox band above the image is exactly the pad value 0.
	img := sh.ImageF16(idx)
	for c := range 3 {
		for _, v := range img[c*384*384 : c*384*384+48*384] {
			if v != 0 {
				t.Fatalf("channel %d padding holds %#04x", c, v)
			}
		}
	}
}

// build --cpuprofile writes a gzipped pprof profile of the build; a path
// that cannot be created is a usage error and builds nothing.
func TestBuildCPUProfile(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	bad := filepath.Join(t.TempDir(), "absent", "cpu.prof")
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--cpuprofile", bad)
	if res.code != exitUsage || !strings.Contains(res.stderr, "--cpuprofile: open "+bad) {
		t.Fatalf("unwritable profile: exit %d, stderr %q", res.code, res.stderr)
	}
	if dirs := versionDirs(t, outRoot); len(dirs) != 0 {
		t.Fatalf("a refused build published %v", dirs)
	}
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	mustBuild(t, cfgPath, nil, "--cpuprofile", prof)
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("profile is not gzip (pprof's encoding): %v", err)
	}
	if n, err := io.Copy(io.Discard, zr); err != nil || n == 0 {
		t.Fatalf("profile: %d bytes, %v", n, err)
	}
}
