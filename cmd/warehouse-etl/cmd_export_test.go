package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"warehouse-etl/outputroot"
	"warehouse-etl/pipeline"
	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

var parquetNames = []string{"samples.parquet", "runs.parquet", "build.parquet"}

func TestExportParquetReplacesTheFiles(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	dir, _ := mustBuild(t, cfgPath, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files.Parquet == nil || m.Files.Parquet.Samples != "samples.parquet" {
		t.Fatalf("the build's manifest lists no Parquet files: %+v", m.Files)
	}
	before := map[string]os.FileInfo{}
	samples, _ := os.ReadFile(filepath.Join(dir, "samples.parquet"))
	for _, name := range parquetNames {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("the build did not write %s: %v", name, err)
		}
		before[name] = st
	}
	manifestBefore, _ := os.ReadFile(filepath.Join(dir, warehouse.ManifestName))

	// The output root resolves through latest.
	res := runCLI(t, context.Background(), nil, "export", "parquet", "--tensor-warehouse", outRoot, "--quiet")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var want []string
	for _, name := range parquetNames {
		want = append(want, filepath.Join(dir, name))
	}
	if got := strings.Fields(res.stdout); !slices.Equal(got, want) {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	for _, name := range parquetNames {
		st, _ := os.Stat(filepath.Join(dir, name))
		if os.SameFile(st, before[name]) {
			t.Errorf("%s was not replaced", name)
		}
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "samples.parquet")); !bytes.Equal(now, samples) {
		t.Error("samples.parquet changed between the build's export and export parquet")
	}
	if now, _ := os.ReadFile(filepath.Join(dir, warehouse.ManifestName)); !bytes.Equal(now, manifestBefore) {
		t.Error("export parquet rewrote the manifest")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

func TestExportParquetErrors(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	dir, _ := mustBuild(t, cfgPath, nil)
	samplesBefore, _ := os.ReadFile(filepath.Join(dir, "samples.parquet"))

	// A copy of the version with its manifest damaged in several ways.
	damaged := func(manifest string) string {
		d := filepath.Join(t.TempDir(), filepath.Base(dir))
		if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		// Resealed (manifest.json.sha256 rewritten): the damage under test
		// is the content, not a mismatch with the digest.
		if err := warehouse.WriteManifest(d, []byte(manifest)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	raw, _ := os.ReadFile(filepath.Join(dir, warehouse.ManifestName))
	notADir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"no format", []string{"export"}, exitUsage, "warehouse-etl export: export needs a format"},
		{"unknown format", []string{"export", "hdf5"}, exitUsage, `unknown export format "hdf5" (known: parquet, zarr)`},
		{"help", []string{"export", "-h"}, exitOK, "parquet   samples.parquet, runs.parquet, build.parquet"},
		{"no path", []string{"export", "parquet"}, exitUsage, "--tensor-warehouse is required"},
		{"extra argument", []string{"export", "parquet", "--tensor-warehouse", dir, "more"}, exitUsage, `unexpected argument "more"`},
		{"not a warehouse", []string{"export", "parquet", "--tensor-warehouse", notADir}, exitFailure,
			notADir + `: neither a warehouse version (no manifest.json) nor a root with a "latest" pointer`},
		{"manifest not json", []string{"export", "parquet", "--tensor-warehouse", damaged("{")}, exitFailure,
			"manifest.json: manifest invalid: unexpected end of JSON input"},
		{"manifest from the future", []string{"export", "parquet", "--tensor-warehouse",
			damaged(strings.Replace(string(raw), `"format_version": 1`, `"format_version": 9`, 1))}, exitFailure,
			"manifest.json: manifest invalid: format_version 9, this build reads 1"},
		{"manifest escaping path", []string{"export", "parquet", "--tensor-warehouse",
			damaged(strings.Replace(string(raw), `"samples": "samples.parquet"`, `"samples": "../samples.parquet"`, 1))}, exitFailure,
			`manifest invalid: files: "../samples.parquet" is not a clean relative path inside the warehouse`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, context.Background(), nil, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr lacks %q:\n%s", res.code, tc.code, tc.want, res.stderr)
			}
		})
	}

	// A build of the same version holds its lock: exit 5, nothing written.
	lock, err := outputroot.LockVersion(outRoot, filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "export", "parquet", "--tensor-warehouse", dir)
	lock.Release()
	if res.code != exitLocked || !strings.Contains(res.stderr, "another build of this version is running") {
		t.Fatalf("locked: exit %d\n%s", res.code, res.stderr)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "samples.parquet")); !bytes.Equal(now, samplesBefore) {
		t.Fatal("a failed export touched samples.parquet")
	}
}

// engineRows is run_queries.js's output: per engine, per query, rows.
type engineRows struct {
	Queries map[string][]string                    `json:"queries"`
	Engines map[string]map[string][]map[string]any `json:"-"`
}

// runEngines runs the documented queries with DuckDB and Polars over the
// output root. Without node or the npm packages the test is skipped, except
// in CI (CI=true), where .ci/run installs them and their absence fails.
func runEngines(t *testing.T, outRoot string) engineRows {
	t.Helper()
	engines, err := filepath.Abs("../../analytics/engines")
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	}
	for _, pkg := range []string{"@duckdb/node-api", "nodejs-polars", "nodejs-polars-linux-x64-gnu"} {
		if _, err := os.Stat(filepath.Join(engines, "node_modules", pkg, "package.json")); err != nil && missing == "" {
			missing = pkg + " is not installed: run npm ci --prefix analytics/engines"
		}
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", missing)
		}
		t.Skip(missing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(engines, "run_queries.js"), "../../docs/format/parquet.md", outRoot)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run_queries.js: %v\n%s", err, stderr.String())
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("run_queries.js output: %v\n%s", err, out)
	}
	res := engineRows{Engines: map[string]map[string][]map[string]any{}}
	if err := json.Unmarshal(raw["queries"], &res.Queries); err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"duckdb", "polars"} {
		var rows map[string][]map[string]any
		if err := json.Unmarshal(raw[engine], &rows); err != nil {
			t.Fatal(err)
		}
		res.Engines[engine] = rows
	}
	return res
}

// median is the median with the midpoint of the two middle values for an
// even count, as DuckDB's median and Polars' median define it.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// The queries of docs/format/parquet.md, run by DuckDB and by Polars over
// Parquet written by the CLI, answer what the manifests, samples.jsonl and
// the shards (read here with the Go packages) say.
func TestEnginesAnswerDocumentedQueries(t *testing.T) {
	cfgA, outRoot := writeConfig(t, demoRoot(t), nil)
	dirA, _ := mustBuild(t, cfgA, nil)
	time.Sleep(5 * time.Millisecond) // distinct created_at_ms: the trend query orders by it
	cfgB, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": outRoot, "target_size": []int{256, 192}, "skip_empty": true})
	dirB, _ := mustBuild(t, cfgB, nil)
	if res := runCLI(t, context.Background(), nil, "export", "parquet", "--tensor-warehouse", outRoot, "--quiet"); res.code != 0 {
		t.Fatalf("export: %s", res.stderr)
	}
	ma, _ := warehouse.ReadManifest(dirA)
	mb, _ := warehouse.ReadManifest(dirB) // latest
	report := func(dir string) pipeline.Report {
		raw, _ := os.ReadFile(filepath.Join(dir, warehouse.BuildReportName))
		var r pipeline.Report
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}(dirB)

	// Expected answers, computed from the sources of truth.
	type row = map[string]any
	var keptByRun []row
	for _, r := range mb.Summary.Runs {
		keptByRun = append(keptByRun, row{"run": r.Name, "total": r.Total, "kept": r.Kept, "skipped": r.Skipped, "empty": r.Empty,
			"kept_ratio": float64(r.Kept) / float64(r.Total)})
	}
	skippedWith := map[string]map[validate.Reason]int64{}
	for _, rec := range readSamples(t, dirB) {
		for _, reason := range rec.Reasons {
			if skippedWith[rec.Source] == nil {
				skippedWith[rec.Source] = map[validate.Reason]int64{}
			}
			if !rec.Kept {
				skippedWith[rec.Source][validate.Reason(reason)]++
			}
		}
	}
	var reasonsByRun []row
	for _, r := range mb.Summary.Runs {
		reasons := slices.Sorted(func(yield func(validate.Reason) bool) {
			for reason := range r.ByReason {
				if !yield(reason) {
					return
				}
			}
		})
		for _, reason := range reasons {
			reasonsByRun = append(reasonsByRun, row{"run": r.Name, "reason": string(reason), "samples": r.ByReason[reason], "skipped": skippedWith[r.Name][reason]})
		}
	}
	classNames := map[int32]string{}
	for _, c := range mb.Classes {
		classNames[int32(c.Index)] = c.Name
	}
	widths, heights := map[string][]float64{}, map[string][]float64{}
	var boxes int64
	for _, s := range mb.Shards {
		r, err := shard.Open(filepath.Join(dirB, s.RelativePath))
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Len() {
			classes := r.ClassIndex(i)
			for j, b := range r.Boxes(i) {
				name := classNames[classes[j]]
				widths[name] = append(widths[name], float64(b[2]-b[0])) // float32 arithmetic, as the engines do
				heights[name] = append(heights[name], float64(b[3]-b[1]))
				boxes++
			}
		}
		r.Close()
	}
	var classBalance, boxSize []row
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for name := range widths {
			if !yield(name) {
				return
			}
		}
	}) {
		n := int64(len(widths[name]))
		classBalance = append(classBalance, row{"class": name, "boxes": n, "share": float64(n) / float64(boxes)})
		boxSize = append(boxSize, row{"class": name, "boxes": n, "median_width": median(widths[name]), "median_height": median(heights[name])})
	}
	totals := []row{{"total": mb.InputSamples, "kept": mb.Samples, "boxes": boxes}}
	var trend []row
	for _, m := range []*warehouse.Manifest{ma, mb} {
		trend = append(trend, row{"version": m.Version, "created_at_ms": m.CreatedAtMs, "total": m.Summary.Total.Total,
			"empty": m.Summary.Total.Empty, "empty_ratio": float64(m.Summary.Total.Empty) / float64(m.Summary.Total.Total)})
	}
	if ma.CreatedAtMs >= mb.CreatedAtMs {
		t.Fatalf("created_at_ms %d, %d not increasing", ma.CreatedAtMs, mb.CreatedAtMs)
	}
	phases := map[string][2]any{
		"scan": {report.Phases.Scan, "wall"}, "validate": {report.Phases.Validate, "wall"}, "read": {report.Phases.Read, "worker_sum"},
		"decode": {report.Phases.Decode, "worker_sum"}, "resize": {report.Phases.Resize, "worker_sum"}, "normalize": {report.Phases.Normalize, "worker_sum"},
		"write": {report.Phases.Write, "wall"}, "publish": {report.Phases.Publish, "wall"}, "total": {report.Phases.Total, "wall"},
	}
	want := map[string][]row{
		"kept_by_run": keptByRun, "reasons_by_run": reasonsByRun, "class_balance": classBalance,
		"box_size_by_class": boxSize, "totals": totals, "empty_ratio_trend": trend,
	}

	got := runEngines(t, outRoot)
	queryNames := []string{"kept_by_run", "reasons_by_run", "class_balance", "box_size_by_class", "totals", "empty_ratio_trend", "build_phases"}
	for _, engine := range []string{"duckdb", "polars"} {
		if !slices.Equal(got.Queries[engine], queryNames) {
			t.Errorf("%s: the doc has queries %v, want %v", engine, got.Queries[engine], queryNames)
		}
		for name, wantRows := range want {
			checkRows(t, engine+" "+name, got.Engines[engine][name], wantRows)
		}
		// build_phases: every phase of the report, slowest first.
		rows := got.Engines[engine]["build_phases"]
		if len(rows) != len(phases) {
			t.Errorf("%s build_phases: %d rows, want %d", engine, len(rows), len(phases))
		}
		for i, r := range rows {
			p, ok := phases[r["phase"].(string)]
			if !ok || r["seconds"] != p[0] || r["clock"] != p[1] {
				t.Errorf("%s build_phases row %v, report says %v", engine, r, p)
			}
			if i > 0 && r["seconds"].(float64) > rows[i-1]["seconds"].(float64) {
				t.Errorf("%s build_phases not slowest first: %v", engine, rows)
			}
		}
	}
}

// checkRows compares query rows with expected rows: same order, same
// columns; numbers within 1e-6 (medians of float32 values may be averaged
// in float32 by one engine and in float64 by another).
func checkRows(t *testing.T, what string, got []map[string]any, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d\ngot  %v\nwant %v", what, len(got), len(want), got, want)
		return
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("%s row %d: columns %v, want %v", what, i, got[i], want[i])
			continue
		}
		for col, w := range want[i] {
			g := got[i][col]
			var wf float64
			switch v := w.(type) {
			case int64:
				wf = float64(v)
			case float64:
				wf = v
			default:
				if g != w {
					t.Errorf("%s row %d: %s = %v, want %v", what, i, col, g, w)
				}
				continue
			}
			gf, ok := g.(float64)
			if !ok || math.Abs(gf-wf) > 1e-6 {
				t.Errorf("%s row %d: %s = %v, want %v", what, i, col, g, wf)
			}
		}
	}
}
