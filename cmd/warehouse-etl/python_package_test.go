package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// debianPython is the interpreter CI installs python3-numpy and python3-torch for.
const debianPython = "/usr/bin/python3"

// requirePython skips the test when debianPython cannot import the modules,
// except in CI (CI=true), where the cross-language proof must run.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	code := "import " + strings.Join(modules, ", ")
	if out, err := exec.Command(debianPython, "-c", code).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s cannot %q (%v: %s); CI must install python3-numpy and python3-torch", debianPython, code, err, out)
		}
		t.Skipf("%s cannot %q: %v", debianPython, code, err)
	}
}

// refFixture is one warehouse built by the CLI with the Go reader's view of
// it, dumped for the Python tests: every tensor as raw bytes, the meta
// records and batch plans.
type refFixture struct {
	Name    string `json:"name"`
	Root    string `json:"root"` // output root (with latest)
	Dir     string `json:"dir"`  // version directory
	Ref     string `json:"ref"`  // directory of the dumps
	Samples int    `json:"samples"`
	DType   string `json:"dtype"`
}

// plannedCase is one row of the batch-plan table and Go's plan for it.
type plannedCase struct {
	Batch     int     `json:"batch"`
	Seed      uint64  `json:"seed"`
	Epoch     int     `json:"epoch"`
	Rank      int     `json:"rank"`
	World     int     `json:"world"`
	Shuffle   string  `json:"shuffle"`
	Remainder string  `json:"remainder"`
	Indices   [][]int `json:"indices"`
	Repeats   []int   `json:"repeats"`
}

// damagedCase is a broken copy of a warehouse and the Go reader's refusal.
type damagedCase struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Stage     string `json:"stage"`  // "open" or "sample"
	Sample    int    `json:"sample"` // the sample read at stage "sample"
	Threshold bool   `json:"threshold"`
	GoError   string `json:"go_error"`
}

// dumpReference writes the Go reader's values for every sample of dir into
// ref: images.bin, boxes.bin, mask.bin (raw bytes as stored), class_index.bin
// and box_count.bin (little-endian int32, -1 padding as in Go batches),
// extras.bin (f32), meta.jsonl, and plans.json for the table of options.
func dumpReference(t *testing.T, dir, ref string) (samples int, dtype string) {
	t.Helper()
	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.MkdirAll(ref, 0o755); err != nil {
		t.Fatal(err)
	}
	var images, boxes, mask, classes, counts, extras, meta []byte
	l := r.Layout()
	for i := range r.Len() {
		s, err := r.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, s.Image()...)
		boxes = append(boxes, s.BoxesRaw()...)
		mask = append(mask, s.MaskRaw()...)
		ci := s.ClassIndex()
		for j := range l.MaxBoxes {
			v := int32(-1)
			if j < len(ci) {
				v = ci[j]
			}
			classes = binary.LittleEndian.AppendUint32(classes, uint32(v))
		}
		counts = binary.LittleEndian.AppendUint32(counts, uint32(s.BoxCount()))
		for _, v := range s.Extras() {
			extras = binary.LittleEndian.AppendUint32(extras, math.Float32bits(v))
		}
		line, err := json.Marshal(goMeta(s))
		if err != nil {
			t.Fatal(err)
		}
		meta = append(append(meta, line...), '\n')
	}
	files := map[string][]byte{"images.bin": images, "boxes.bin": boxes, "mask.bin": mask,
		"class_index.bin": classes, "box_count.bin": counts, "extras.bin": extras, "meta.jsonl": meta}
	if l.DType == shard.U8 {
		// What the Go reader's normalization gives (float32, CHW per sample).
		table := r.NormalizeTable()
		plane := l.Width * l.Height
		var norm []byte
		for k, v := range images {
			norm = binary.LittleEndian.AppendUint32(norm, math.Float32bits(table[(k/plane)%l.Channels][v]))
		}
		files["normalized.bin"] = norm
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(ref, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var plans []plannedCase
	for _, p := range []plannedCase{
		{Batch: 4, World: 1, Shuffle: "none", Remainder: "drop"},
		{Batch: 3, World: 2, Rank: 1, Seed: 42, Epoch: 7, Shuffle: "global", Remainder: "drop"},
		{Batch: 4, World: 2, Rank: 1, Seed: 1 << 63, Epoch: 3, Shuffle: "shard", Remainder: "pad"},
		{Batch: 5, World: 3, Rank: 2, Seed: 12345, Shuffle: "global", Remainder: "pad"},
		{Batch: 2, World: 2, Rank: 0, Seed: math.MaxUint64, Epoch: 1000, Shuffle: "shard", Remainder: "drop"},
		{Batch: 1, World: 1, Seed: 7, Epoch: 1, Shuffle: "global", Remainder: "drop"},
		{Batch: 8, World: 4, Rank: 3, Seed: 99, Epoch: 2, Shuffle: "none", Remainder: "pad"},
		{Batch: 64, World: 1, Seed: 5, Epoch: 5, Shuffle: "global", Remainder: "pad"},
	} {
		shuffle, err := warehouse.ParseShuffle(p.Shuffle)
		if err != nil {
			t.Fatal(err)
		}
		remainder, err := warehouse.ParseRemainder(p.Remainder)
		if err != nil {
			t.Fatal(err)
		}
		got, err := warehouse.PlanBatches(r.Len(), r.ShardStarts(), warehouse.BatchOptions{BatchSize: p.Batch, Seed: p.Seed,
			Epoch: p.Epoch, Rank: p.Rank, WorldSize: p.World, Shuffle: shuffle, Remainder: remainder})
		if err != nil {
			t.Fatal(err)
		}
		p.Indices, p.Repeats = [][]int{}, []int{}
		for _, b := range got {
			p.Indices = append(p.Indices, b.Indices)
			p.Repeats = append(p.Repeats, b.Repeats)
		}
		plans = append(plans, p)
	}
	writeJSON(t, filepath.Join(ref, "plans.json"), plans)
	return r.Len(), r.Manifest().DefaultDType
}

// builtPythonPackage copies the package's sources (python/, without build
// outputs) into a temporary directory and builds its compiled part there
// (warehouse_etl._copycrc, `setup.py build_ext --inplace`), as pip does when
// it installs the package: the tests then run against what users get, and
// the checkout is left as it is. It returns the copy and whether the build
// succeeded. The part is optional for users, so a failed build only logs
// here, except under CI=true, where .ci/run installs gcc and python3-dev and
// a failure means the tests would silently run the two-pass fallback alone.
func builtPythonPackage(t *testing.T) (string, bool) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "python")
	copyTree(t, mustAbs(t, "../../python"), dst, func(d fs.DirEntry) bool {
		name := d.Name()
		if d.IsDir() {
			return name == "build" || name == "__pycache__" || strings.HasSuffix(name, ".egg-info")
		}
		return strings.HasSuffix(name, ".so") || strings.HasSuffix(name, ".pyd")
	})
	cmd := exec.Command(debianPython, "setup.py", "-q", "build_ext", "--inplace")
	cmd.Dir = dst
	if out, err := cmd.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("building warehouse_etl._copycrc: %v\n%s\nCI must install gcc and python3-dev", err, out)
		}
		t.Logf("warehouse_etl._copycrc not built (%v), the tests run without it:\n%s", err, out)
		return dst, false
	}
	if m, _ := filepath.Glob(filepath.Join(dst, "warehouse_etl", "_copycrc*.so")); len(m) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("setup.py build_ext left no warehouse_etl/_copycrc*.so (optional=True hid a failed compile?)")
		}
		t.Log("warehouse_etl._copycrc not built (no compiler?), the tests run without it")
		return dst, false
	}
	return dst, true
}

// readPythonSources reads every file under dirs. The Python tests run in a
// subprocess, whose reads go test cannot see: a file this process opens is
// an input of the cached test result, so an edit to the package reruns the
// test instead of replaying a stale pass.
func readPythonSources(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyVersion copies the version directory dir into a new root and returns
// the copy's version directory.
func copyVersion(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	copyTree(t, dir, dst, nil)
	return dst
}

// copyTree copies the files and directories under src to dst (mode 0644 and
// 0755), leaving out each entry skip returns true for (a directory with all
// it holds); skip may be nil.
func copyTree(t *testing.T, src, dst string, skip func(fs.DirEntry) bool) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && p != src && skip(d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// damagedCases breaks copies of dir in the ways the Go reader's
// badInputCases do and records the Go reader's refusal of each.
func damagedCases(t *testing.T, dir string) []damagedCase {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	editManifest := func(d string, edit func(*warehouse.Manifest)) {
		mm, err := warehouse.ReadManifest(d)
		if err != nil {
			t.Fatal(err)
		}
		edit(mm)
		raw, err := mm.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := warehouse.WriteManifest(d, raw); err != nil { // resealed: the damage under test is the content
			t.Fatal(err)
		}
	}
	patch := func(d string, k int, off int64, b []byte) {
		f, err := os.OpenFile(filepath.Join(d, m.Shards[k].RelativePath), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	first := func(k int) int { return int(m.Shards[k].FirstSample) }
	// headerU64 reads a u64 field of shard k's header in the pristine dir.
	headerU64 := func(k int, off int64) int64 {
		f, err := os.Open(filepath.Join(dir, m.Shards[k].RelativePath))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [8]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
	dtype, err := shard.ParseDType(m.DefaultDType)
	if err != nil {
		t.Fatal(err)
	}
	imageBytes := shard.Layout{DType: dtype, Width: m.Transform.TargetWidth, Height: m.Transform.TargetHeight,
		Channels: m.Transform.Channels}.ImageBytes()
	metaOffset := func(k int) int64 { return headerU64(k, 64) }
	checksumOffset := func(k int) int64 { return headerU64(k, 72) }
	// flip inverts one byte of shard k.
	flip := func(d string, k int, off int64) {
		raw, err := os.ReadFile(filepath.Join(d, m.Shards[k].RelativePath))
		if err != nil {
			t.Fatal(err)
		}
		patch(d, k, off, []byte{^raw[off]})
	}
	ratio := 0.0
	tests := []struct {
		name   string
		sample int // -1: refused by Open
		break_ func(d string)
	}{
		{"truncated shard", -1, func(d string) {
			if err := os.Truncate(filepath.Join(d, m.Shards[1].RelativePath), m.Shards[1].Bytes-10); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated shard, manifest bytes edited to match", -1, func(d string) {
			if err := os.Truncate(filepath.Join(d, m.Shards[1].RelativePath), m.Shards[1].Bytes-10); err != nil {
				t.Fatal(err)
			}
			editManifest(d, func(mm *warehouse.Manifest) { mm.Shards[1].Bytes -= 10 })
		}},
		{"flipped magic byte", first(1), func(d string) { patch(d, 1, 0, []byte{'T' ^ 0xff}) }},
		{"flipped meta magic byte", first(2), func(d string) { patch(d, 2, metaOffset(2)+3, []byte{'X'}) }},
		// Per-sample CRC-32Cs: a flip in a sample's image or record is refused
		// when that sample is read (not before: the shard opens), a flip in
		// the checksum table when the shard is opened.
		{"flipped image byte", first(1) + 1, func(d string) { flip(d, 1, 80+imageBytes+7) }},
		{"flipped record byte", first(2) + 1, func(d string) {
			flip(d, 2, metaOffset(2)+24+int64(recordSize(m))+8) // sample 1's frame_id
		}},
		{"flipped checksum table byte", first(1), func(d string) { flip(d, 1, checksumOffset(1)+16+2) }},
		{"wrong dtype tag", first(1), func(d string) { patch(d, 1, 8, []byte{7}) }},
		{"future shard_version", first(1), func(d string) { patch(d, 1, 4, []byte{5}) }},
		{"shard_version without the checksum section the shard has", first(1), func(d string) { patch(d, 1, 4, []byte{2}) }},
		{"checksum_offset 0 in a shard_version 3 shard", first(1), func(d string) { patch(d, 1, 72, make([]byte, 8)) }},
		{"big-endian flag", first(0), func(d string) { patch(d, 0, 12, []byte{1}) }},
		{"missing shard", -1, func(d string) {
			if err := os.Remove(filepath.Join(d, m.Shards[2].RelativePath)); err != nil {
				t.Fatal(err)
			}
		}},
		// From shard_version 2 on the version decides whether a shard has
		// per-sample checksums, and the manifest's size must agree.
		{"manifest says shard_version 2 for a shard with checksums", -1, func(d string) {
			editManifest(d, func(mm *warehouse.Manifest) { mm.Shards[1].ShardVersion = 2 })
		}},
		{"checksum section cut off, manifest bytes edited to match", -1, func(d string) {
			l := shard.Layout{DType: dtype, Width: m.Transform.TargetWidth, Height: m.Transform.TargetHeight,
				Channels: m.Transform.Channels, MaxBoxes: m.Transform.MaxBoxes}
			size := l.FileSizeWithoutChecksums(int(m.Shards[1].Samples))
			if err := os.Truncate(filepath.Join(d, m.Shards[1].RelativePath), size); err != nil {
				t.Fatal(err)
			}
			editManifest(d, func(mm *warehouse.Manifest) { mm.Shards[1].Bytes = size })
		}},
		{"manifest lies about the total", -1, func(d string) {
			editManifest(d, func(mm *warehouse.Manifest) { mm.Samples++; mm.Summary.Total.Kept++ })
		}},
		{"relative_path with ..", -1, func(d string) {
			editManifest(d, func(mm *warehouse.Manifest) { mm.Shards[1].RelativePath = "../shard-00001.twh" })
		}},
		{"manifest of a future format", -1, func(d string) {
			raw, err := os.ReadFile(filepath.Join(d, warehouse.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			raw = []byte(strings.Replace(string(raw), `"format_version": 1`, `"format_version": 2`, 1))
			if err := warehouse.WriteManifest(d, raw); err != nil { // resealed: the damage under test is the content
				t.Fatal(err)
			}
		}},
		// The manifest's detached digest (manifest.json.sha256).
		{"manifest byte flipped", -1, func(d string) {
			p := filepath.Join(d, warehouse.ManifestName)
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			raw[len(raw)/2] ^= 0x01
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest digest removed", -1, func(d string) {
			if err := os.Remove(filepath.Join(d, warehouse.ManifestDigestName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest digest malformed", -1, func(d string) {
			if err := os.WriteFile(filepath.Join(d, warehouse.ManifestDigestName), []byte("not a digest\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"unknown manifest field", -1, func(d string) {
			raw, err := os.ReadFile(filepath.Join(d, warehouse.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			raw = []byte(strings.Replace(string(raw), `"code_version":`, `"surprise": 1, "code_version":`, 1))
			if err := warehouse.WriteManifest(d, raw); err != nil { // resealed: the damage under test is the content
				t.Fatal(err)
			}
		}},
		{"thresholds violated", -1, func(d string) {
			editManifest(d, func(mm *warehouse.Manifest) {
				ratio = 0.01
				mm.Thresholds.Invalid.MaxRatio = &ratio
				mm.Thresholds.Invalid.Action = ""
				zero := int64(0)
				mm.Thresholds.Missing.MaxCount = &zero
				mm.Thresholds.Missing.Action = "fail"
			})
		}},
	}
	var out []damagedCase
	for _, tt := range tests {
		d := copyVersion(t, dir)
		tt.break_(d)
		c := damagedCase{Name: tt.name, Path: d, Stage: "open", Sample: tt.sample}
		r, err := warehouse.Open(d, warehouse.OpenOptions{})
		if tt.sample >= 0 {
			if err != nil {
				t.Fatalf("%s: Open: %v", tt.name, err)
			}
			c.Stage = "sample"
			_, err = r.Sample(tt.sample)
			r.Close()
		}
		if err == nil {
			t.Fatalf("%s: the Go reader accepts it", tt.name)
		}
		var te *validate.ThresholdError
		c.Threshold = errors.As(err, &te)
		c.GoError = err.Error()
		out = append(out, c)
	}
	return out
}

func recordSize(m *warehouse.Manifest) int { return (80 + 4*m.Transform.MaxBoxes + 7) / 8 * 8 }

// The Python package (python/warehouse_etl) against the Go reader: every
// tensor, class index and meta field of f16, f32 and u8 warehouses; the batch plans for a table of options; the
// refusals of damaged warehouses, word for word; the torch DataLoader
// (exactly-once delivery across ranks, workers, pinning, normalisation) and
// examples/train.py. The Python side is python/tests (unittest); this test
// builds the warehouses with the CLI, dumps the Go reader's values and runs
// it.
func TestPythonPackage(t *testing.T) {
	requirePython(t, "numpy", "torch")
	readPythonSources(t, "../../python", "../../examples")
	data := t.TempDir()
	var fixtures []refFixture
	build := func(name string, overrides map[string]any) (refFixture, cliResult, bool) {
		cfgPath, outRoot := writeConfig(t, demoRoot(t), overrides)
		res := runCLI(t, t.Context(), nil, "build", "--config", cfgPath)
		if res.code != 0 {
			return refFixture{}, res, false
		}
		dir := strings.TrimSpace(res.stdout)
		f := refFixture{Name: name, Root: outRoot, Dir: dir, Ref: filepath.Join(data, "ref", name)}
		f.Samples, f.DType = dumpReference(t, dir, f.Ref)
		return f, res, true
	}
	norm := map[string]any{"mean": []float64{0.485, 0.456, 0.406}, "std": []float64{0.229, 0.224, 0.225}}
	for _, c := range []struct {
		name      string
		overrides map[string]any
	}{
		{"f16", map[string]any{"dtype": "f16", "target_size": []int{96, 64}, "shard_target_mb": 0.1}},
		{"f32", map[string]any{"dtype": "f32", "target_size": []int{48, 80}, "resize_mode": "stretch", "pad_value": 7,
			"normalize": norm, "shard_target_mb": 0.2}},
		// The demo config itself (384x384 f16), for examples/train.py.
		{"demo", nil},
	} {
		f, res, ok := build(c.name, c.overrides)
		if !ok {
			t.Fatalf("%s: build exit %d\n%s", c.name, res.code, res.stderr)
		}
		fixtures = append(fixtures, f)
	}
	// U8 storage: uint8 images with f32 boxes, normalized by the readers.
	u8, res, ok := build("u8", map[string]any{"dtype": "u8", "target_size": []int{63, 47}, "shard_target_mb": 0.05, "normalize": norm})
	if !ok {
		t.Fatalf("u8: build exit %d\n%s", res.code, res.stderr)
	}
	fixtures = append(fixtures, u8)
	// The same config with compact_images (shard_version 5): test_compact.py.
	u8c, res, ok := build("u8compact", map[string]any{"dtype": "u8", "target_size": []int{63, 47}, "shard_target_mb": 0.05, "normalize": norm, "compact_images": true})
	if !ok {
		t.Fatalf("u8compact: build exit %d\n%s", res.code, res.stderr)
	}
	fixtures = append(fixtures, u8c)
	// Compact again, in a box wider than the frames: regions narrower than the image
	// (pillarbox), which the Python reader restores around them (test_readahead.py).
	wide, res, ok := build("u8compactwide", map[string]any{"dtype": "u8", "target_size": []int{120, 40}, "shard_target_mb": 0.02, "compact_images": true})
	if !ok {
		t.Fatalf("u8compactwide: build exit %d\n%s", res.code, res.stderr)
	}
	fixtures = append(fixtures, wide)
	// Warehouses of warehouse-etl/3 (testdata/legacy): shard_version 1, read by the legacy rule.
	fixtures = append(fixtures, legacyFixtures(t, data)...)
	pkg, built := builtPythonPackage(t)
	env := []string{"PYTHONPATH=" + pkg, "WAREHOUSE_ETL_TESTDATA=" + data,
		"WAREHOUSE_ETL_REPO=" + mustAbs(t, "../.."), "WAREHOUSE_ETL_EXPECT_U8=1"}
	if built {
		env = append(env, "WAREHOUSE_ETL_EXPECT_COPYCRC=1")
	}
	writeJSON(t, filepath.Join(data, "fixtures.json"), fixtures)
	writeJSON(t, filepath.Join(data, "damaged.json"), damagedCases(t, fixtures[0].Dir))
	writeJSON(t, filepath.Join(data, "unchecked.json"), uncheckedFixture(t, fixtures[0].Dir))
	writeJSON(t, filepath.Join(data, "resume.json"), resumeCases(t, fixtures[0].Dir))

	cmd := exec.Command(debianPython, "-m", "unittest", "discover", "-s", filepath.Join(pkg, "tests"), "-t", pkg, "-v")
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("python -m unittest (%.1fs):\n%s", time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("python tests failed: %v", err)
	}
	if !strings.Contains(string(out), "test_u8") {
		t.Fatal("no u8 test ran")
	}
}

// The package installs with pip (no network: no build isolation, no deps)
// and the installed copy imports and opens a warehouse.
func TestPythonPackageInstalls(t *testing.T) {
	requirePython(t, "numpy", "setuptools")
	readPythonSources(t, "../../python")
	if out, err := exec.Command(debianPython, "-m", "pip", "--version").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s -m pip: %v\n%s; CI must install python3-pip", debianPython, err, out)
		}
		t.Skipf("%s -m pip: %v", debianPython, err)
	}
	target := t.TempDir()
	build := t.TempDir()
	src := filepath.Join(build, "python")
	if err := os.CopyFS(src, os.DirFS(mustAbs(t, "../../python"))); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(debianPython, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
		"--target", target, src).CombinedOutput()
	if err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	dir, _ := smallDemo(t, nil)
	// pip compiles the optional warehouse_etl._copycrc where it finds a C compiler and
	// Python's headers; .ci/run installs both, as a user's machine with them has.
	if m, _ := filepath.Glob(filepath.Join(target, "warehouse_etl", "_copycrc*.so")); len(m) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pip install built no warehouse_etl._copycrc:\n%s", out)
		}
		t.Logf("pip install built no warehouse_etl._copycrc (no C compiler or Python headers?)")
	}
	cmd := exec.Command(debianPython, "-c", "import sys, warehouse_etl; from warehouse_etl import _crc32c; "+
		"wh = warehouse_etl.open(sys.argv[1]); "+
		"print(warehouse_etl.__file__, len(wh), wh.read_batch([0, 1])['images'].shape, 'COPY_CRC', _crc32c.COPY_CRC)", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+target)
	cmd.Dir = target
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), target) {
		t.Fatalf("installed package: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// goMeta is every record field of s under the names docs/format/shard.md
// gives them.
func goMeta(s warehouse.Sample) map[string]any {
	m := s.Meta()
	return map[string]any{
		"source_index": uint64(m.SourceIndex), "flags": uint64(0), "frame_id": m.FrameID, "input_seq": m.InputSeq,
		"unix_time_ns": m.UnixTimeNs, "sim_time": m.SimTime, "src_width": uint64(m.SrcWidth), "src_height": uint64(m.SrcHeight),
		"resized_width": uint64(m.ResizedWidth), "resized_height": uint64(m.ResizedHeight), "pad_x": uint64(m.PadX), "pad_y": uint64(m.PadY),
		"scale_x": float64(m.ScaleX), "scale_y": float64(m.ScaleY), "box_count": uint64(s.BoxCount()), "boxes_dropped": uint64(m.BoxesDropped),
	}
}
