package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// reuseCounts is build_report.json's reuse section.
type reuseCounts struct {
	Enabled     bool     `json:"enabled"`
	Sources     []string `json:"sources"`
	Reused      int64    `json:"reused"`
	Decoded     int64    `json:"decoded"`
	FellBack    int64    `json:"fell_back"`
	BytesCopied int64    `json:"bytes_copied"`
	// Shards taken whole, and this process's input files hashed and
	// taken from the input cache.
	ShardsLinked    int64 `json:"shards_linked"`
	InputsHashed    int64 `json:"inputs_hashed"`
	InputsFromCache int64 `json:"inputs_from_cache"`
}

func readReuse(t *testing.T, dir string) reuseCounts {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, warehouse.BuildReportName))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Reuse reuseCounts `json:"reuse"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r.Reuse
}

// sameVersion fails unless the version directories a (built with reuse)
// and b (a clean --no-reuse build) hold the same bytes: every shard,
// samples.jsonl, samples.parquet, fingerprint.jsonl, the Zarr store, and
// the manifest less created_at_ms and the checksums of the files that
// carry times (build_report.json, build.parquet, runs.parquet: it holds
// created_at_ms).
func sameVersion(t *testing.T, what, a, b string) {
	t.Helper()
	ma, err := os.ReadFile(filepath.Join(a, warehouse.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := os.ReadFile(filepath.Join(b, warehouse.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(manifestSansTime(ma), manifestSansTime(mb)) {
		t.Errorf("%s: manifests differ (less created_at_ms and the timed files)", what)
	}
	skip := regexp.MustCompile(`^(manifest\.json(\.sha256)?|build_report\.json|build\.parquet|runs\.parquet)$`)
	files := 0
	err = filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(b, p)
		if skip.MatchString(rel) {
			return nil
		}
		files++
		x, err1 := os.ReadFile(filepath.Join(a, rel))
		y, err2 := os.ReadFile(p)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: %s differs from the clean build's (%v, %v)", what, rel, err1, err2)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	_ = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != files+5 { // the five skipped above
		t.Errorf("%s: %d files with reuse, %d in the clean build", what, n, files+5)
	}
}

// TestReuseByteIdentical is issue 24 item 3: a build that copies unchanged
// samples from the published version is byte-identical to a clean
// --no-reuse build of the same config and inputs, through a night's worth
// of changes, each case rebuilt with WAREHOUSE_CLEAR=1 as nightly.sh does.
// U8 with a Zarr store, so that the images and the Zarr chunks are
// compared too.
func TestReuseByteIdentical(t *testing.T) {
	root := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(root, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	over := map[string]any{"dtype": "u8", "zarr": map[string]any{"enabled": true}}
	cfgPath, outRoot := writeConfig(t, root, over)
	clear := map[string]string{"WAREHOUSE_CLEAR": "1"}

	first, _ := mustBuild(t, cfgPath, nil, "--quiet")
	if r := readReuse(t, first); !r.Enabled || r.Reused != 0 || r.Decoded == 0 {
		t.Fatalf("first build: %+v", r)
	}
	clean := func(what string, overrides map[string]any) string {
		t.Helper()
		o := map[string]any{}
		for k, v := range over {
			o[k] = v
		}
		for k, v := range overrides {
			o[k] = v
		}
		c, _ := writeConfig(t, root, o)
		dir, _ := mustBuild(t, c, nil, "--no-reuse", "--quiet")
		if r := readReuse(t, dir); r.Enabled || r.Reused != 0 {
			t.Fatalf("%s: --no-reuse build reused: %+v", what, r)
		}
		return dir
	}
	// step rebuilds with reuse after change and compares with a clean
	// build; check sees the reuse counts.
	step := func(what string, change func(), check func(r reuseCounts)) {
		t.Helper()
		change()
		dir, res := mustBuild(t, cfgPath, clear, "--quiet")
		if !strings.Contains(res.stderr, "reuse ") {
			t.Errorf("%s: the build summary has no reuse line:\n%s", what, res.stderr)
		}
		sameVersion(t, what, dir, clean(what, nil))
		r := readReuse(t, dir)
		t.Logf("%s: %+v", what, r)
		check(r)
	}
	jpg := func(run string, frame int) string {
		return filepath.Join(root, run, "images", fmt.Sprintf("frame_%05d.jpg", frame))
	}

	step("one run added", func() {
		// A run of new images: run_2's frames, re-encoded differently
		// (a quantisation table entry changed), and one frame as is.
		if err := os.CopyFS(filepath.Join(root, "run_3"), os.DirFS(filepath.Join(root, "run_2"))); err != nil {
			t.Fatal(err)
		}
		for f := 1; f < 10; f++ {
			if _, err := os.Stat(jpg("run_3", f)); err == nil { // frame 5 has no image
				bumpQuantTable(t, jpg("run_3", f), false)
			}
		}
	}, func(r reuseCounts) {
		// run_3 frame 0 equals run_2 frame 0: reused; its other kept
		// frames are new images.
		if r.Reused < 20 || r.Decoded < 5 || r.FellBack != 0 {
			t.Errorf("one run added: %+v", r)
		}
	})
	step("one run removed", func() {
		if err := os.RemoveAll(filepath.Join(root, "run_10")); err != nil {
			t.Fatal(err)
		}
	}, func(r reuseCounts) {
		if r.Reused == 0 || r.Decoded > 2 || r.FellBack != 0 {
			t.Errorf("one run removed: %+v", r)
		}
	})
	step("runs reordered by name", func() {
		if err := os.Rename(filepath.Join(root, "run_1700000000123"), filepath.Join(root, "run_1")); err != nil {
			t.Fatal(err)
		}
	}, func(r reuseCounts) {
		if r.Reused == 0 || r.Decoded > 2 {
			t.Errorf("runs reordered: %+v", r)
		}
	})
	step("a label edited", func() {
		p := filepath.Join(root, "run_2", "labels", "frame_00000.json")
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		edited := bytes.Replace(raw, []byte(`"bbox_px": [38.5,83.5,70.5,126]`), []byte(`"bbox_px": [30.5,80.5,90.5,120]`), 1)
		if bytes.Equal(edited, raw) {
			t.Fatal("the label to edit changed")
		}
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			t.Fatal(err)
		}
	}, func(r reuseCounts) {
		if r.Reused == 0 || r.Decoded > 2 {
			t.Errorf("label edited: %+v", r)
		}
	})
	var before reuseCounts
	step("an image replaced by another of the same size and mtime", func() {
		before = readReuse(t, filepath.Join(outRoot, filepath.Base(first)))
		// Twice: once would make it run_3's frame 1, a sample of the
		// published version (and rightly reused).
		bumpQuantTable(t, jpg("run_2", 1), true)
		bumpQuantTable(t, jpg("run_2", 1), true)
	}, func(r reuseCounts) {
		if r.Decoded != before.Decoded+1 || r.FellBack != 0 {
			t.Errorf("image replaced: %+v, the build before %+v", r, before)
		}
	})
	step("an image touched", func() {
		future := time.Now().Add(time.Hour)
		if err := os.Chtimes(jpg("run_2", 2), future, future); err != nil {
			t.Fatal(err)
		}
	}, func(r reuseCounts) {
		if r.Decoded > 2 || r.Reused == 0 {
			t.Errorf("image touched: %+v", r)
		}
	})

	// A flipped byte in the image of a sample of the published version:
	// its CRC-32C fails, the sample is decoded instead and counted.
	cur := filepath.Join(outRoot, filepath.Base(first))
	m, err := warehouse.ReadManifest(cur)
	if err != nil {
		t.Fatal(err)
	}
	shardPath := filepath.Join(cur, m.Shards[1].RelativePath)
	sr, err := shard.Open(shardPath)
	if err != nil {
		t.Fatal(err)
	}
	off, _ := sr.ImageSpan(1, 1)
	sr.Close()
	step("a source version with a flipped sample byte", func() {
		f, err := os.OpenFile(shardPath, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off+100); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b, off+100); err != nil {
			t.Fatal(err)
		}
		f.Close()
		future := time.Now().Add(2 * time.Hour)
		if err := os.Chtimes(jpg("run_2", 2), future, future); err != nil {
			t.Fatal(err)
		}
	}, func(r reuseCounts) {
		if r.FellBack != 1 || r.Reused == 0 {
			t.Errorf("flipped byte: %+v", r)
		}
	})

	// A partitioned build, N=3, reusing the single-machine version.
	future := time.Now().Add(3 * time.Hour)
	if err := os.Chtimes(jpg("run_2", 4), future, future); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res := runCLI(t, context.Background(), clear, "build", "--config", cfgPath, "--quiet", "--partition", fmt.Sprintf("%d/3", i))
		if res.code != 0 {
			t.Fatalf("partition %d/3: exit %d\n%s", i, res.code, res.stderr)
		}
	}
	res := runCLI(t, context.Background(), clear, "commit", "--config", cfgPath, "--quiet")
	if res.code != 0 {
		t.Fatalf("commit: exit %d\n%s", res.code, res.stderr)
	}
	dir := strings.TrimSpace(res.stdout)
	sameVersion(t, "partitioned N=3", dir, clean("partitioned", nil))
	if r := readReuse(t, dir); r.Reused == 0 || r.Decoded > 2 || r.FellBack != 0 {
		t.Errorf("partitioned N=3: %+v", r)
	}

	// A changed target size is another version: nothing to reuse.
	c2, _ := writeConfig(t, root, map[string]any{"dtype": "u8", "zarr": map[string]any{"enabled": true}, "target_size": []int{256, 192}, "output_root": outRoot})
	dir2, _ := mustBuild(t, c2, nil, "--quiet")
	if r := readReuse(t, dir2); r.Reused != 0 || r.FellBack != 0 || len(r.Sources) != 0 {
		t.Errorf("changed target size: %+v", r)
	}
	sameVersion(t, "changed target size", dir2, clean("target size", map[string]any{"target_size": []int{256, 192}}))
}

// bumpQuantTable changes one entry of the first JPEG quantisation table of
// the file at p: a different image of the same size (bytes and
// dimensions) that still decodes. keepTime restores the file's mtime, so
// that the source fingerprint (path, size, mtime) cannot see the change.
func bumpQuantTable(t *testing.T, p string, keepTime bool) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte{0xFF, 0xDB})
	if i < 0 || i+4+10 >= len(raw) {
		t.Fatalf("%s: no quantisation table", p)
	}
	// FF DB, 2 length bytes, Pq/Tq, then 64 entries: change the 10th.
	q := i + 5 + 10
	if raw[q] < 200 {
		raw[q] += 7
	} else {
		raw[q] -= 7
	}
	if err := os.WriteFile(p, raw, st.Mode()); err != nil {
		t.Fatal(err)
	}
	if keepTime {
		if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReuseStaleAndMetrics is issue 24 items 4 and 5: an unchanged rerun
// is up to date; a changed source exits 4 saying how much of the rebuild
// it reuses; WAREHOUSE_CLEAR=changed rebuilds it (and only it), and the
// metrics file, the build report and build.parquet count what was reused.
func TestReuseStaleAndMetrics(t *testing.T) {
	root := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(root, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	cfgPath, outRoot := writeConfig(t, root, nil)
	dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
	if _, res := mustBuild(t, cfgPath, nil); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("unchanged rerun:\n%s", res.stderr)
	}
	bumpQuantTable(t, filepath.Join(root, "run_2", "images", "frame_00002.jpg"), false)
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet")
	m := regexp.MustCompile(`(\d+) of (\d+) samples changed; the rebuild reuses the rest`).FindStringSubmatch(res.stderr)
	if res.code != exitStale || m == nil || !strings.Contains(res.stderr, "WAREHOUSE_CLEAR=1") {
		t.Fatalf("changed source: exit %d\n%s", res.code, res.stderr)
	}
	// Partition 0 says the same; the others point at it instead of
	// scanning and hashing every input again.
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet", "--partition", "0/2"); res.code != exitStale || !strings.Contains(res.stderr, m[0]) {
		t.Fatalf("changed source, --partition 0/2: exit %d, want %d saying %q\n%s", res.code, exitStale, m[0], res.stderr)
	}
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet", "--partition", "1/2"); res.code != exitStale ||
		strings.Contains(res.stderr, m[0]) || !strings.Contains(res.stderr, "partition 0/2 says how much of it the rebuild reuses") {
		t.Fatalf("changed source, --partition 1/2: exit %d, want %d pointing at partition 0/2\n%s", res.code, exitStale, res.stderr)
	}
	// Without reuse there is no estimate, and no temporary left for one.
	for _, args := range [][]string{{"--no-reuse"}, {"--no-reuse", "--partition", "1/2"}} {
		res := runCLI(t, context.Background(), nil, append([]string{"build", "--config", cfgPath, "--quiet"}, args...)...)
		if res.code != exitStale || strings.Contains(res.stderr, "samples changed") {
			t.Fatalf("changed source, %v: exit %d, want %d without an estimate\n%s", args, res.code, exitStale, res.stderr)
		}
		entries, err := os.ReadDir(outRoot)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Fatalf("changed source, %v: %s left in the output root", args, e.Name())
			}
		}
	}
	metrics := filepath.Join(t.TempDir(), "build.prom")
	changed := map[string]string{"WAREHOUSE_CLEAR": "changed"}
	again, res := mustBuild(t, cfgPath, changed, "--quiet", "--metrics-file", metrics)
	if again != dir || !strings.Contains(res.stderr, "rebuilt: ") {
		t.Fatalf("WAREHOUSE_CLEAR=changed: %s\n%s", again, res.stderr)
	}
	r := readReuse(t, dir)
	man, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	// One image of run_2 changed: the shards before its shard are taken
	// whole.
	if fmt.Sprint(r.Decoded) != m[1] || fmt.Sprint(r.Reused+r.Decoded) != m[2] || r.Reused+r.Decoded < man.Samples || r.Reused == 0 || r.ShardsLinked == 0 {
		t.Errorf("the message said %s of %s changed; the rebuild: %+v of %d samples", m[1], m[2], r, man.Samples)
	}
	raw, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	label := fmt.Sprintf(`warehouse_etl_build_images{config=%q,how=`, cfgPath)
	if metricValue(t, string(raw), label+`"reused"}`) != float64(r.Reused) || metricValue(t, string(raw), label+`"decoded"}`) != float64(r.Decoded) ||
		metricValue(t, string(raw), fmt.Sprintf(`warehouse_etl_build_reuse_bytes_copied{config=%q}`, cfgPath)) != float64(r.BytesCopied) ||
		metricValue(t, string(raw), fmt.Sprintf(`warehouse_etl_build_reuse_shards_linked{config=%q}`, cfgPath)) != float64(r.ShardsLinked) {
		t.Errorf("metrics disagree with the report %+v:\n%s", r, raw)
	}
	for col, want := range map[string]int64{"reused": r.Reused, "decoded": r.Decoded, "reuse_fell_back": r.FellBack, "reuse_bytes_copied": r.BytesCopied} {
		if got := parquetInt64(t, filepath.Join(dir, warehouse.BuildParquetName), col); got != want {
			t.Errorf("build.parquet %s = %d, the report says %d", col, got, want)
		}
	}
	if _, res := mustBuild(t, cfgPath, changed); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("WAREHOUSE_CLEAR=changed on unchanged sources:\n%s", res.stderr)
	}
}

// parquetInt64 is the int64 column col of the one-row Parquet file at p.
func parquetInt64(t *testing.T, p, col string) int64 {
	t.Helper()
	rdr, err := file.OpenParquetFile(p, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices(col)
	if len(idx) != 1 || tbl.NumRows() != 1 {
		t.Fatalf("%s: column %s: %v, %d rows", p, col, idx, tbl.NumRows())
	}
	c := tbl.Column(idx[0]).Data().Chunk(0).(*array.Int64)
	if c.IsNull(0) {
		t.Fatalf("%s: %s is null", p, col)
	}
	return c.Value(0)
}

// TestNightlyReusesThePreviousDelivery: deploy/nightly.sh, as the
// schedulers run it, over two nights; the second night's config points at
// a new delivery (a new source.root: a new version), the first night's
// frames plus a new run. Its build reuses the first night's samples and
// decodes only the new run's, and is byte-identical to a clean build.
func TestNightlyReusesThePreviousDelivery(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := filepath.Join(t.TempDir(), "warehouse-etl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	night1 := filepath.Join(t.TempDir(), "2026-11-24")
	if err := os.CopyFS(night1, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	night2 := filepath.Join(t.TempDir(), "2026-11-25")
	if err := os.CopyFS(night2, os.DirFS(night1)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(night2, "run_3"), os.DirFS(filepath.Join(night1, "run_2"))); err != nil {
		t.Fatal(err)
	}
	for f := 0; f < 10; f++ {
		if p := filepath.Join(night2, "run_3", "images", fmt.Sprintf("frame_%05d.jpg", f)); fileExistsTest(p) {
			bumpQuantTable(t, p, false)
		}
	}
	cfgPath, outRoot := writeConfig(t, night1, nil)
	nightly := func(root string) string {
		t.Helper()
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["source"].(map[string]any)["root"] = root
		raw, _ = json.Marshal(cfg)
		if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "../../deploy/nightly.sh", cfgPath)
		cmd.Env = append(os.Environ(), "WAREHOUSE_ETL="+bin, "REPORTS=0", "VERIFY_FLAGS=", "LOCK_WAIT=1s")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nightly.sh: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`nightly: version (\S+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("nightly.sh printed no version:\n%s", out)
		}
		return string(m[1])
	}
	first := nightly(night1)
	second := nightly(night2)
	if first == second || filepath.Dir(second) != outRoot {
		t.Fatalf("the second night published %s (first %s)", second, first)
	}
	r := readReuse(t, second)
	if len(r.Sources) != 1 || r.Sources[0] != first || r.Reused < 15 || r.Decoded > 10 {
		t.Errorf("second night: %+v", r)
	}
	c, _ := writeConfig(t, night2, nil)
	clean, _ := mustBuild(t, c, nil, "--no-reuse", "--quiet")
	sameVersion(t, "second night", second, clean)
}

func fileExistsTest(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestReuseEverySourceKind: the episode containers (their identities are
// the decoded RGB rows) and the other recipes (f32, stretch) reuse every
// sample after an input is touched, and the rebuild is byte-identical to
// a clean --no-reuse build.
func TestReuseEverySourceKind(t *testing.T) {
	for _, tc := range []struct {
		name, config, data string // data: under testdata/, copied
		replace            map[string]string
	}{
		{"wshard", "wshard.jsonc", "wshard", nil},
		{"kdb", "kdb.jsonc", "kdb", map[string]string{`"../testdata/kdb/demo.kdb"`: `"DATA/demo.kdb"`}},
		{"roverd", "roverd.jsonc", "roverd", nil},
		{"capture f32 stretch", "demo.jsonc", "capture", map[string]string{`"dtype": "f16"`: `"dtype": "f32"`, `"resize_mode": "letterbox"`: `"resize_mode": "stretch"`}},
		// shard_version 5: the stored region is read, restored around the
		// pad value and checked (reuse.go, readImage).
		{"capture u8 compact", "demo.jsonc", "capture", map[string]string{`"dtype": "f16"`: `"dtype": "u8", "compact_images": true`, `"pad_value": 0`: `"pad_value": 114`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			data := filepath.Join(tmp, "data")
			if err := os.CopyFS(data, os.DirFS(filepath.Join("../../testdata", tc.data))); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join("../../configs", tc.config))
			if err != nil {
				t.Fatal(err)
			}
			text := string(raw)
			for old, repl := range tc.replace {
				if !strings.Contains(text, old) {
					t.Fatalf("%s has no %s", tc.config, old)
				}
				text = strings.ReplaceAll(text, old, strings.ReplaceAll(repl, "DATA", data))
			}
			text = regexp.MustCompile(`"root": "\.\./testdata/[^"]*"`).ReplaceAllString(text, `"root": "`+data+`"`)
			write := func(dir, out string) string {
				t.Helper()
				p := filepath.Join(dir, "config.jsonc")
				c := regexp.MustCompile(`"output_root": "[^"]*"`).ReplaceAllString(text, `"output_root": "`+out+`"`)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			cfg := write(filepath.Join(tmp, "a"), filepath.Join(tmp, "out"))
			mustBuild(t, cfg, nil, "--quiet")
			// Touch every input file: the sources changed, the bytes did not.
			future := time.Now().Add(time.Hour)
			_ = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					_ = os.Chtimes(p, future, future)
				}
				return nil
			})
			dir, _ := mustBuild(t, cfg, map[string]string{"WAREHOUSE_CLEAR": "1"}, "--quiet")
			r := readReuse(t, dir)
			m, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Reused == 0 || r.Reused != m.Samples || r.FellBack != 0 {
				t.Errorf("%+v of %d samples", r, m.Samples)
			}
			clean, _ := mustBuild(t, write(filepath.Join(tmp, "b"), filepath.Join(tmp, "clean")), nil, "--quiet", "--no-reuse")
			sameVersion(t, tc.name, dir, clean)
		})
	}
}

// TestReuseFrom: --reuse-from names another warehouse (an output root or
// one version directory) to copy from; --no-reuse ignores it.
func TestReuseFrom(t *testing.T) {
	cfgA, rootA := writeConfig(t, demoRoot(t), nil)
	dirA, _ := mustBuild(t, cfgA, nil, "--quiet")
	for _, from := range []string{rootA, dirA} {
		cfgB, _ := writeConfig(t, demoRoot(t), nil)
		dirB, _ := mustBuild(t, cfgB, nil, "--quiet", "--reuse-from", from)
		r := readReuse(t, dirB)
		if len(r.Sources) != 1 || r.Sources[0] != dirA || r.Reused == 0 || r.FellBack != 0 {
			t.Errorf("--reuse-from %s: %+v", from, r)
		}
		sameVersion(t, "--reuse-from "+from, dirB, dirA)
	}
	cfgC, _ := writeConfig(t, demoRoot(t), nil)
	dirC, _ := mustBuild(t, cfgC, nil, "--quiet", "--reuse-from", rootA, "--no-reuse")
	if r := readReuse(t, dirC); r.Reused != 0 || r.Enabled {
		t.Errorf("--no-reuse with --reuse-from: %+v", r)
	}
}
