package analytics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/analytics"
	"warehouse-etl/analytics/records"
	"warehouse-etl/pipeline"
	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

var update = flag.Bool("update", false, "rewrite testdata/golden files from the current output")

func asInt(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func asFloat(t *testing.T, v any, bits int) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	f, err := strconv.ParseFloat(string(n), bits)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readReport(t *testing.T, dir string) pipeline.Report {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, warehouse.BuildReportName))
	if err != nil {
		t.Fatal(err)
	}
	var r pipeline.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// A build writes the three files into the version, lists them in the
// manifest, and every value agrees with samples.jsonl, the shards (read
// here with the shard package), the manifest summary and the build report.
func TestBuildWritesParquetMatchingItsSources(t *testing.T) {
	dir, m := buildDemo(t, t.TempDir(), nil)
	want := &warehouse.ParquetFiles{Samples: "samples.parquet", Runs: "runs.parquet", Build: "build.parquet"}
	if !reflect.DeepEqual(m.Files.Parquet, want) {
		t.Fatalf("manifest files.parquet = %+v, want %+v", m.Files.Parquet, want)
	}
	checkSamplesParquet(t, dir, m)
	checkRunsParquet(t, dir, m)

	// Rewritten inside the build from its final report, before the
	// manifest records its sha256: every phase, publish and total too.
	rows, _ := parquetRows(t, filepath.Join(dir, "build.parquet"))
	report := readReport(t, dir)
	checkBuildParquet(t, rows, m, report, []string{"scan", "validate", "read", "decode", "resize", "normalize", "write", "publish", "total"})
}

func checkSamplesParquet(t *testing.T, dir string, m *warehouse.Manifest) {
	t.Helper()
	rows, _ := parquetRows(t, filepath.Join(dir, "samples.parquet"))
	recs := readSamplesJSONL(t, dir)
	if len(rows) != len(recs) || int64(len(rows)) != m.InputSamples {
		t.Fatalf("samples.parquet has %d rows, samples.jsonl %d, manifest input_samples %d", len(rows), len(recs), m.InputSamples)
	}
	className := map[int32]string{}
	for _, c := range m.Classes {
		className[int32(c.Index)] = c.Name
	}
	shards := map[string]*shard.Reader{}
	defer func() {
		for _, r := range shards {
			r.Close()
		}
	}()
	for i, rec := range recs {
		row := rows[i]
		where := fmt.Sprintf("row %d (%s)", i, rec.LabelPath)
		for col, want := range map[string]int64{
			"seq": rec.Seq, "source_index": int64(rec.SourceIndex), "frame": int64(rec.Frame), "unix_time_ns": rec.UnixTimeNs,
			"width": int64(rec.Width), "height": int64(rec.Height), "box_count": int64(rec.BoxCount),
		} {
			if got := asInt(t, row[col]); got != want {
				t.Errorf("%s: %s = %d, want %d", where, col, got, want)
			}
		}
		for col, want := range map[string]string{"version": m.Version, "source": rec.Source, "label_path": rec.LabelPath, "image_path": rec.ImagePath} {
			if row[col] != want {
				t.Errorf("%s: %s = %v, want %q", where, col, row[col], want)
			}
		}
		if got := asFloat(t, row["sim_time"], 64); got != rec.SimTime {
			t.Errorf("%s: sim_time %v, want %v", where, got, rec.SimTime)
		}
		wantKept := int64(0)
		if rec.Kept {
			wantKept = 1
		}
		if asInt(t, row["kept"]) != wantKept {
			t.Errorf("%s: kept %v, want %d", where, row["kept"], wantKept)
		}
		var reasons []string
		for _, r := range row["reasons"].([]any) {
			reasons = append(reasons, r.(string))
		}
		var wantReasons []string
		for _, r := range rec.Reasons {
			wantReasons = append(wantReasons, string(r))
		}
		if !slices.Equal(reasons, wantReasons) {
			t.Errorf("%s: reasons %v, want %v", where, reasons, wantReasons)
		}
		if (rec.Error == "" && row["error"] != nil) || (rec.Error != "" && row["error"] != rec.Error) {
			t.Errorf("%s: error %v, want %q", where, row["error"], rec.Error)
		}
		var classes []int64
		for _, c := range row["class_index"].([]any) {
			classes = append(classes, asInt(t, c))
		}
		if len(classes) != len(rec.ClassIndex) {
			t.Errorf("%s: class_index %v, want %v", where, classes, rec.ClassIndex)
		}
		for j := range min(len(classes), len(rec.ClassIndex)) {
			if classes[j] != int64(rec.ClassIndex[j]) {
				t.Errorf("%s: class_index %v, want %v", where, classes, rec.ClassIndex)
			}
		}
		if !rec.Kept {
			for _, col := range []string{"index", "shard", "shard_index", "boxes_dropped", "letterbox"} {
				if row[col] != nil {
					t.Errorf("%s: skipped sample has %s = %v, want null", where, col, row[col])
				}
			}
			if n := len(row["boxes"].([]any)); n != 0 {
				t.Errorf("%s: skipped sample has %d boxes", where, n)
			}
			continue
		}
		if asInt(t, row["index"]) != rec.Index || row["shard"] != rec.Shard || asInt(t, row["shard_index"]) != rec.ShardIndex {
			t.Errorf("%s: position %v %v %v, want %d %s %d", where, row["index"], row["shard"], row["shard_index"], rec.Index, rec.Shard, rec.ShardIndex)
		}
		lb := row["letterbox"].(map[string]any)
		gotLB := records.Letterbox{
			ScaleX: asFloat(t, lb["scale_x"], 64), ScaleY: asFloat(t, lb["scale_y"], 64),
			ResizedWidth: asInt(t, lb["resized_width"]), ResizedHeight: asInt(t, lb["resized_height"]),
			PadX: asInt(t, lb["pad_x"]), PadY: asInt(t, lb["pad_y"]),
		}
		if rec.Letterbox == nil || gotLB != *rec.Letterbox {
			t.Errorf("%s: letterbox %+v, want %+v", where, gotLB, rec.Letterbox)
		}
		r := shards[rec.Shard]
		if r == nil {
			var err error
			if r, err = shard.Open(filepath.Join(dir, "shards", rec.Shard+".twh")); err != nil {
				t.Fatal(err)
			}
			shards[rec.Shard] = r
		}
		k := int(rec.ShardIndex)
		if got, want := asInt(t, row["boxes_dropped"]), int64(r.Meta(k).BoxesDropped); got != want {
			t.Errorf("%s: boxes_dropped %d, shard says %d", where, got, want)
		}
		wantBoxes, wantClasses := r.Boxes(k), r.ClassIndex(k)
		boxes := row["boxes"].([]any)
		if len(boxes) != len(wantBoxes) {
			t.Fatalf("%s: %d boxes, shard has %d", where, len(boxes), len(wantBoxes))
		}
		for j, b := range boxes {
			box := b.(map[string]any)
			got := [4]float32{}
			for c, name := range []string{"x_min", "y_min", "x_max", "y_max"} {
				got[c] = float32(asFloat(t, box[name], 32))
			}
			if got != wantBoxes[j] || asInt(t, box["class_index"]) != int64(wantClasses[j]) || box["class_name"] != className[wantClasses[j]] {
				t.Errorf("%s: box %d = %v, want %v class %d %s", where, j, box, wantBoxes[j], wantClasses[j], className[wantClasses[j]])
			}
		}
	}
}

func checkRunsParquet(t *testing.T, dir string, m *warehouse.Manifest) {
	t.Helper()
	rows, _ := parquetRows(t, filepath.Join(dir, "runs.parquet"))
	if len(rows) != len(m.Summary.Runs)+1 {
		t.Fatalf("runs.parquet has %d rows, want %d runs + total", len(rows), len(m.Summary.Runs))
	}
	for i, row := range rows {
		kind, c := "run", m.Summary.Total
		if i < len(m.Summary.Runs) {
			r := m.Summary.Runs[i]
			c = r.Counts
			if row["run"] != r.Name || asInt(t, row["run_index"]) != int64(r.Index) {
				t.Errorf("row %d: run %v/%v, want %s/%d", i, row["run"], row["run_index"], r.Name, r.Index)
			}
		} else {
			kind = "total"
			if row["run"] != nil || row["run_index"] != nil {
				t.Errorf("total row names run %v/%v", row["run"], row["run_index"])
			}
		}
		if row["kind"] != kind || row["version"] != m.Version || row["code_version"] != m.CodeVersion || asInt(t, row["created_at_ms"]) != m.CreatedAtMs {
			t.Errorf("row %d: kind %v version %v code %v created %v", i, row["kind"], row["version"], row["code_version"], row["created_at_ms"])
		}
		for col, want := range map[string]int64{
			"total": c.Total, "non_empty": c.NonEmpty, "empty": c.Empty, "missing_image": c.MissingImage,
			"missing_file": c.MissingFile, "invalid": c.Invalid, "kept": c.Kept, "skipped": c.Skipped,
		} {
			if got := asInt(t, row[col]); got != want {
				t.Errorf("row %d (%s): %s = %d, want %d", i, kind, col, got, want)
			}
		}
		byReason := map[validate.Reason]int64{}
		var order []validate.Reason
		for _, e := range row["by_reason"].([]any) {
			entry := e.(map[string]any)
			r := validate.Reason(entry["reason"].(string))
			byReason[r] = asInt(t, entry["samples"])
			order = append(order, r)
		}
		if !maps.Equal(byReason, c.ByReason) && !(len(byReason) == 0 && len(c.ByReason) == 0) {
			t.Errorf("row %d: by_reason %v, want %v", i, byReason, c.ByReason)
		}
		if !slices.Equal(order, validate.Normalize(order)) {
			t.Errorf("row %d: by_reason order %v is not the reasons' stable order", i, order)
		}
	}
}

func checkBuildParquet(t *testing.T, rows []map[string]any, m *warehouse.Manifest, r pipeline.Report, phases []string) {
	t.Helper()
	if len(rows) != 1 {
		t.Fatalf("build.parquet has %d rows, want 1", len(rows))
	}
	row := rows[0]
	for col, want := range map[string]string{
		"version": m.Version, "code_version": m.CodeVersion, "host": r.Host, "goos": r.GOOS, "goarch": r.GOARCH,
		"source_fingerprint_sha256": m.SourceFingerprint.SHA256,
	} {
		if row[col] != want {
			t.Errorf("build.parquet %s = %v, want %q", col, row[col], want)
		}
	}
	for col, want := range map[string]int64{
		"created_at_ms": m.CreatedAtMs, "started_at_ms": r.StartedAtMs, "workers": int64(r.Workers), "input_samples": r.InputSamples,
		"samples": r.Samples, "skipped": r.Skipped, "shards": int64(r.Shards), "bytes_written": r.BytesWritten,
		"jpeg_fallbacks": r.JPEGFallbacks,
	} {
		if got := asInt(t, row[col]); got != want {
			t.Errorf("build.parquet %s = %d, want %d", col, got, want)
		}
	}
	if asFloat(t, row["samples_per_second"], 64) != r.SamplesPerSecond || asFloat(t, row["mb_per_second"], 64) != r.MBPerSecond {
		t.Errorf("build.parquet rates %v %v, report %v %v", row["samples_per_second"], row["mb_per_second"], r.SamplesPerSecond, r.MBPerSecond)
	}
	seconds := map[string]float64{"scan": r.Phases.Scan, "validate": r.Phases.Validate, "read": r.Phases.Read,
		"decode": r.Phases.Decode, "resize": r.Phases.Resize, "normalize": r.Phases.Normalize,
		"write": r.Phases.Write, "publish": r.Phases.Publish, "total": r.Phases.Total}
	clock := map[string]string{"read": "worker_sum", "decode": "worker_sum", "resize": "worker_sum", "normalize": "worker_sum"}
	var names []string
	for _, p := range row["phases"].([]any) {
		ph := p.(map[string]any)
		name := ph["phase"].(string)
		names = append(names, name)
		wantClock := cmpOr(clock[name], "wall")
		if asFloat(t, ph["seconds"], 64) != seconds[name] || ph["clock"] != wantClock {
			t.Errorf("phase %s: %v s %v, report %v s %s", name, ph["seconds"], ph["clock"], seconds[name], wantClock)
		}
	}
	if !slices.Equal(names, phases) {
		t.Errorf("phases %v, want %v", names, phases)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Exporting a published version again (what `export parquet` does)
// replaces the files by rename, gives byte-identical samples and runs
// files, and now has the publish and total phases.
func TestExportAgainIsDeterministicAndReplaces(t *testing.T) {
	dir, m := buildDemo(t, t.TempDir(), nil)
	before := map[string][]byte{}
	stats := map[string]os.FileInfo{}
	for _, name := range []string{"samples.parquet", "runs.parquet", "build.parquet"} {
		before[name], _ = os.ReadFile(filepath.Join(dir, name))
		stats[name], _ = os.Stat(filepath.Join(dir, name))
	}
	res, err := analytics.Export(context.Background(), dir, m, analytics.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.SampleRows != m.InputSamples || res.RunRows != int64(len(m.Summary.Runs))+1 {
		t.Fatalf("result %+v", res)
	}
	for name, old := range before {
		after, _ := os.ReadFile(filepath.Join(dir, name))
		st, _ := os.Stat(filepath.Join(dir, name))
		if os.SameFile(st, stats[name]) {
			t.Errorf("%s was rewritten in place, not replaced by rename", name)
		}
		if st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", name, st.Mode().Perm())
		}
		if name != "build.parquet" && !bytes.Equal(old, after) {
			t.Errorf("%s differs between the build's export and a second export", name)
		}
	}
	rows, _ := parquetRows(t, filepath.Join(dir, "build.parquet"))
	checkBuildParquet(t, rows, m, readReport(t, dir), []string{"scan", "validate", "read", "decode", "resize", "normalize", "write", "publish", "total"})
	if hidden := hiddenFiles(t, dir); len(hidden) != 0 {
		t.Fatalf("temporary files left: %v", hidden)
	}
}

// Bad inputs fail with an error naming the file and the problem, replace
// no Parquet file and leave no temporary file.
func TestExportRejectsBadInputs(t *testing.T) {
	dir, m := buildDemo(t, t.TempDir(), nil)
	recs := readSamplesJSONL(t, dir)
	firstBoxed := slices.IndexFunc(recs, func(r records.SampleLine) bool { return r.Kept && len(r.ClassIndex) >= 2 })
	firstInShard1 := slices.IndexFunc(recs, func(r records.SampleLine) bool { return r.Shard == "shard-00001" })
	lastKept := recs[len(recs)-1].Kept
	keptWithoutLast := m.Samples
	if lastKept {
		keptWithoutLast--
	}
	// editLine rewrites line i (0-based) of samples.jsonl through a JSON map.
	editLine := func(i int, edit func(map[string]any)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, "samples.jsonl")
			raw, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			var obj map[string]any
			if err := json.Unmarshal([]byte(lines[i]), &obj); err != nil {
				t.Fatal(err)
			}
			edit(obj)
			b, _ := json.Marshal(obj)
			lines[i] = string(b)
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rewrite := func(name string, edit func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, name)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, edit(raw), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(name string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	boxed := recs[firstBoxed]
	swapped := []int64{boxed.ClassIndex[1], boxed.ClassIndex[0]}
	if swapped[0] == swapped[1] {
		swapped[0] = (swapped[0] + 1) % int64(len(m.Classes))
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		is     error  // errors.Is target
		want   string // the error's text after the directory prefix, or a regexp with want_re
		wantRE bool
	}{
		{"samples.jsonl missing", remove("samples.jsonl"), fs.ErrNotExist, `export samples.parquet: open .*/samples.jsonl: no such file or directory`, true},
		{"bad json line", rewrite("samples.jsonl", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{"seq":2,`), []byte(`{"seq":2,,`), 1)
		}), analytics.ErrCorrupt, "export samples.parquet: analytics: input corrupt: samples.jsonl line 3: invalid character ',' looking for beginning of object key string", false},
		{"seq out of order", editLine(4, func(o map[string]any) { o["seq"] = 40 }), analytics.ErrCorrupt,
			"export samples.parquet: analytics: input corrupt: samples.jsonl line 5: seq 40, want 4", false},
		{"truncated", rewrite("samples.jsonl", func(b []byte) []byte { return b[:len(b)-20] }), analytics.ErrCorrupt,
			fmt.Sprintf("export samples.parquet: analytics: input corrupt: samples.jsonl line %d: no final newline (truncated file?)", len(recs)), false},
		{"last line missing", rewrite("samples.jsonl", func(b []byte) []byte {
			return b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1]
		}), analytics.ErrCorrupt, fmt.Sprintf("export samples.parquet: analytics: input corrupt: samples.jsonl has %d samples (%d kept), the manifest says %d (%d kept)",
			len(recs)-1, keptWithoutLast, m.InputSamples, m.Samples), false},
		{"classes disagree with the shard", editLine(firstBoxed, func(o map[string]any) { o["class_index"] = swapped }), analytics.ErrCorrupt,
			fmt.Sprintf("export samples.parquet: samples.jsonl line %d: analytics: input corrupt: %s[%d] has classes %v, samples.jsonl says %v",
				firstBoxed+1, boxed.Shard, boxed.ShardIndex, boxed.ClassIndex, swapped), false},
		{"wrong shard position", editLine(firstBoxed, func(o map[string]any) { o["shard_index"] = boxed.ShardIndex + 1 }), analytics.ErrCorrupt,
			fmt.Sprintf("export samples.parquet: samples.jsonl line %d: analytics: input corrupt: sample %d is at %s[%d] by the manifest, samples.jsonl says %s[%d]",
				firstBoxed+1, boxed.Index, boxed.Shard, boxed.ShardIndex, boxed.Shard, boxed.ShardIndex+1), false},
		{"shard missing", remove("shards/shard-00001.twh"), fs.ErrNotExist,
			fmt.Sprintf(`export samples.parquet: samples.jsonl line %d: open .*/shards/shard-00001.twh: no such file or directory`, firstInShard1+1), true},
		{"shard truncated", rewrite("shards/shard-00001.twh", func(b []byte) []byte { return b[:100] }), shard.ErrCorrupt,
			fmt.Sprintf(`export samples.parquet: samples.jsonl line %d: .*/shards/shard-00001.twh: shard: corrupt: .*`, firstInShard1+1), true},
		{"build report missing", remove("build_report.json"), fs.ErrNotExist, `open .*/build_report.json: no such file or directory`, true},
		{"build report of another version", rewrite("build_report.json", func(b []byte) []byte {
			return bytes.Replace(b, []byte(m.Version), []byte(strings.Repeat("0", 64)), 1)
		}), analytics.ErrCorrupt, fmt.Sprintf(`analytics: input corrupt: .*/build_report.json describes version 0000000000000000 with %d samples \(%d kept\), the manifest version %.16s with %d \(%d kept\)`,
			m.InputSamples, m.Samples, m.Version, m.InputSamples, m.Samples), true},
		{"build report not json", rewrite("build_report.json", func([]byte) []byte { return []byte("{") }), analytics.ErrCorrupt,
			`analytics: input corrupt: .*/build_report.json: unexpected EOF`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := copyDir(t, dir)
			before := map[string][]byte{}
			for _, name := range []string{"samples.parquet", "runs.parquet", "build.parquet"} {
				before[name], _ = os.ReadFile(filepath.Join(work, name))
			}
			tc.damage(t, work)
			_, err := analytics.Export(context.Background(), work, m, analytics.ExportOptions{})
			if err == nil {
				t.Fatal("export of damaged input succeeded")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			if tc.wantRE {
				if !regexp.MustCompile("^" + tc.want + "$").MatchString(err.Error()) {
					t.Errorf("error\n%s\ndoes not match\n%s", err, tc.want)
				}
			} else if err.Error() != tc.want {
				t.Errorf("error\n%s\nwant\n%s", err, tc.want)
			}
			for name, old := range before {
				if now, _ := os.ReadFile(filepath.Join(work, name)); !bytes.Equal(now, old) {
					t.Errorf("%s was replaced by a failed export", name)
				}
			}
			if hidden := hiddenFiles(t, work); len(hidden) != 0 {
				t.Errorf("temporary files left: %v", hidden)
			}
		})
	}
}

// A cancelled export stops, replaces nothing and cleans up.
func TestExportCancelled(t *testing.T) {
	dir, m := buildDemo(t, t.TempDir(), nil)
	old, _ := os.ReadFile(filepath.Join(dir, "samples.parquet"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := analytics.Export(ctx, dir, m, analytics.ExportOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "samples.parquet")); !bytes.Equal(now, old) {
		t.Fatal("a cancelled export replaced samples.parquet")
	}
	if hidden := hiddenFiles(t, dir); len(hidden) != 0 {
		t.Fatalf("temporary files left: %v", hidden)
	}
}

// The physical schema of every file, as the parquet package prints it, is
// the contract docs/format/parquet.md describes: a golden file catches any
// change. Regenerate with go test ./analytics -run SchemaGolden -update.
func TestParquetSchemaGolden(t *testing.T) {
	dir, _ := buildDemo(t, t.TempDir(), nil)
	d, err := analytics.Compare(context.Background(), dir, dir, analytics.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	diffPath := filepath.Join(t.TempDir(), "diff.parquet")
	if err := d.WriteParquet(diffPath); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, p := range []string{filepath.Join(dir, "samples.parquet"), filepath.Join(dir, "runs.parquet"), filepath.Join(dir, "build.parquet"), diffPath} {
		_, text := parquetRows(t, p)
		fmt.Fprintf(&got, "# %s\n%s\n", filepath.Base(p), text)
	}
	golden := filepath.Join("testdata", "golden", "schema.txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Fatalf("schemas differ from %s (run with -update after changing the format and its doc):\n%s", golden, got.String())
	}
}

// docColumns reads the column tables of docs/format/parquet.md: section
// title -> "name type nullable" lines in order.
func docColumns(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/format/parquet.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	row := regexp.MustCompile("^\\| `([a-z0-9_\\[\\].]+)` \\| ([a-z0-9<>]+) \\| (yes|no) \\|")
	for line := range strings.SplitSeq(string(raw), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			section = title
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			out[section] = append(out[section], m[1]+" "+m[2]+" "+m[3])
		}
	}
	return out
}

// schemaColumns flattens a printed parquet schema the way the doc lists
// columns: struct fields as parent.field, list-of-struct fields as
// parent[].field, lists as list<element type>.
func schemaColumns(t *testing.T, printed string) []string {
	t.Helper()
	var out []string
	var stack []string // path prefixes of open groups ("" for the schema root)
	leaf := regexp.MustCompile(`^(required|optional|repeated) (\w+) field_id=-1 (\w+)(?: \((\w+).*\))?;$`)
	group := regexp.MustCompile(`^(required|optional|repeated) group field_id=-1 (\w+)(?: \((\w+)\))? \{$`)
	types := map[string]string{"byte_array": "string", "int64": "int64", "double": "float64", "float": "float32"}
	var pendingList []int // indices in out of list columns waiting for their element type
	for raw := range strings.SplitSeq(printed, "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || strings.HasPrefix(line, "required group field_id=-1 schema"):
			if line != "" {
				stack = append(stack, "")
			}
		case line == "}":
			stack = stack[:len(stack)-1]
		case group.MatchString(line):
			m := group.FindStringSubmatch(line)
			prefix := stack[len(stack)-1]
			nullable := map[string]string{"optional": "yes", "required": "no"}[m[1]]
			switch {
			case m[3] == "List":
				out = append(out, prefix+m[2]+" list<?> "+nullable)
				pendingList = append(pendingList, len(out)-1)
				stack = append(stack, prefix+m[2]+"[].")
			case m[2] == "list" && m[1] == "repeated":
				stack = append(stack, prefix)
			case m[2] == "element":
				// A list of structs: the list column becomes list<struct>.
				i := pendingList[len(pendingList)-1]
				pendingList = pendingList[:len(pendingList)-1]
				out[i] = strings.Replace(out[i], "list<?>", "list<struct>", 1)
				stack = append(stack, prefix)
			default:
				out = append(out, prefix+m[2]+" struct "+nullable)
				stack = append(stack, prefix+m[2]+".")
			}
		case leaf.MatchString(line):
			m := leaf.FindStringSubmatch(line)
			typ := types[m[2]]
			if m[3] == "element" {
				i := pendingList[len(pendingList)-1]
				pendingList = pendingList[:len(pendingList)-1]
				out[i] = strings.Replace(out[i], "list<?>", "list<"+typ+">", 1)
				continue
			}
			nullable := map[string]string{"optional": "yes", "required": "no"}[m[1]]
			out = append(out, stack[len(stack)-1]+m[3]+" "+typ+" "+nullable)
		default:
			t.Fatalf("unexpected schema line %q", line)
		}
	}
	return out
}

// docs/format/parquet.md lists every column of every file, with its type
// and nullability, in file order, and nothing else.
func TestFormatDocListsEveryColumn(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "schema.txt"))
	if err != nil {
		t.Fatal(err)
	}
	doc := docColumns(t)
	files := strings.Split(string(golden), "# ")[1:]
	if len(files) != 4 {
		t.Fatalf("golden schema holds %d files", len(files))
	}
	for _, f := range files {
		name, printed, _ := strings.Cut(f, "\n")
		got := schemaColumns(t, printed)
		if want := doc[name]; !slices.Equal(got, want) {
			t.Errorf("%s: the file has columns\n  %s\nthe doc lists\n  %s", name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// Every field the pipeline writes to samples.jsonl (records.SampleLine, the
// type both sides share) and build_report.json is one the export reads
// (skipped_by_reason aside: runs.parquet takes the per-reason counts from
// the manifest), so a new field cannot be dropped from the Parquet files
// unnoticed.
func TestExportReadsEveryPipelineField(t *testing.T) {
	rec := records.SampleLine{
		Seq: 1, Source: "s", SourceIndex: 1, Frame: 1, UnixTimeNs: 1, SimTime: 1, LabelPath: "l", ImagePath: "i",
		Width: 1, Height: 1, Kept: true, Reasons: []string{"empty"}, Error: "e", Index: 1, Shard: "x",
		ShardIndex: 1, BoxCount: 1, ClassIndex: []int64{1}, Letterbox: &records.Letterbox{ScaleX: 1},
	}
	checkJSONKeys(t, "samples.jsonl", rec, analytics.SampleLineKeys, nil)
	checkJSONKeys(t, "samples.jsonl letterbox", rec.Letterbox, analytics.LetterboxKeys, nil)
	rep := pipeline.Report{SkippedByReason: map[string]int64{"x": 1}}
	checkJSONKeys(t, "build_report.json", rep, analytics.BuildReportKeys, []string{"skipped_by_reason"})
	checkJSONKeys(t, "build_report.json phases_seconds", rep.Phases, analytics.PhaseKeys, nil)
}

func checkJSONKeys(t *testing.T, what string, v any, read []string, ignored []string) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	for key := range obj {
		if !slices.Contains(read, key) && !slices.Contains(ignored, key) {
			t.Errorf("%s: the pipeline writes %q, which the export does not read", what, key)
		}
	}
}
