package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// zarritaDump is dump_store.mjs's output.
type zarritaDump struct {
	Root struct {
		Attributes struct {
			Warehouse struct {
				Version       string `json:"version"`
				VersionRecipe string `json:"version_recipe"`
				Summary       struct {
					Total struct {
						Kept int64 `json:"kept"`
					} `json:"total"`
				} `json:"summary"`
			} `json:"warehouse"`
			Export struct {
				Arrays       []string `json:"arrays"`
				ShardSamples int      `json:"shard_samples"`
				ZstdLevel    int      `json:"zstd_level"`
			} `json:"zarr_export"`
		} `json:"attributes"`
	} `json:"root"`
	Arrays map[string]struct {
		DataType       string   `json:"data_type"`
		Shape          []int64  `json:"shape"`
		Chunks         []int64  `json:"chunks"`
		DimensionNames []string `json:"dimension_names"`
		FillValue      any      `json:"fill_value"`
		Values         int64    `json:"values"`
		File           string   `json:"file"`
	} `json:"arrays"`
	Shards map[string]struct {
		Files  int `json:"files"`
		Chunks int `json:"chunks"`
		Empty  int `json:"empty"`
		CRCOK  int `json:"crc_ok"`
	} `json:"shards"`
}

// runZarrita opens store with zarrita.js (zarr/engines) and returns what it
// read. Without node or the npm packages the test is skipped, except in CI
// (CI=true), where .ci/run installs them and their absence fails.
func runZarrita(t *testing.T, store string) zarritaDump {
	t.Helper()
	engines, err := filepath.Abs("../../zarr/engines")
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	}
	for _, pkg := range []string{"zarrita", "@zarrita/storage", "@petamoriken/float16"} {
		if _, err := os.Stat(filepath.Join(engines, "node_modules", pkg, "package.json")); err != nil && missing == "" {
			missing = pkg + " is not installed: run npm ci --prefix zarr/engines"
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
	cmd := exec.CommandContext(ctx, "node", filepath.Join(engines, "dump_store.mjs"), store, t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dump_store.mjs: %v\n%s", err, stderr.String())
	}
	var d zarritaDump
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("dump_store.mjs output: %v", err)
	}
	return d
}

// goReaderArrays is every array of the store as the Go shard reader sees
// the warehouse: name -> the little-endian bytes of all its values in C
// order. The mapping from shard fields to arrays is docs/format/zarr.md's.
func goReaderArrays(t *testing.T, dir string, m *warehouse.Manifest) (names []string, values map[string][]byte) {
	t.Helper()
	le := binary.LittleEndian
	values = map[string][]byte{}
	names = []string{"images", "boxes", "box_mask", "class_index", "box_count", "source_index", "frame_id", "input_seq",
		"unix_time_ns", "sim_time", "src_width", "src_height", "resized_width", "resized_height", "pad_x", "pad_y",
		"scale_x", "scale_y", "boxes_dropped"}
	extraNames := map[string]warehouse.Extra{}
	for _, e := range m.Extras {
		name := "extras." + strings.ReplaceAll(e.Name, "/", ".")
		names = append(names, name)
		extraNames[name] = e
	}
	u32 := func(v uint32) []byte { return le.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return le.AppendUint64(nil, v) }
	for _, e := range m.Shards {
		sr, err := shard.Open(filepath.Join(dir, filepath.FromSlash(e.RelativePath)))
		if err != nil {
			t.Fatal(err)
		}
		b := sr.Layout().MaxBoxes
		for i := range sr.Len() {
			meta := sr.Meta(i)
			var classes []byte
			for j := range b {
				c := int32(-1)
				if ci := sr.ClassIndex(i); j < len(ci) {
					c = ci[j]
				}
				classes = le.AppendUint32(classes, uint32(c))
			}
			for name, v := range map[string][]byte{
				"images": sr.Image(i), "boxes": sr.BoxesRaw(i), "box_mask": sr.MaskRaw(i), "class_index": classes,
				"box_count": u32(uint32(sr.BoxCount(i))), "source_index": u32(meta.SourceIndex),
				"frame_id": u64(meta.FrameID), "input_seq": u64(meta.InputSeq), "unix_time_ns": u64(uint64(meta.UnixTimeNs)),
				"sim_time": u64(math.Float64bits(meta.SimTime)), "src_width": u32(meta.SrcWidth), "src_height": u32(meta.SrcHeight),
				"resized_width": u32(meta.ResizedWidth), "resized_height": u32(meta.ResizedHeight), "pad_x": u32(meta.PadX),
				"pad_y": u32(meta.PadY), "scale_x": u32(math.Float32bits(meta.ScaleX)), "scale_y": u32(math.Float32bits(meta.ScaleY)),
				"boxes_dropped": u32(meta.BoxesDropped),
			} {
				values[name] = append(values[name], v...)
			}
			for name, e := range extraNames {
				n := 1
				for _, d := range e.Shape {
					n *= d
				}
				for _, x := range sr.Extras(i)[e.Offset : e.Offset+n] {
					values[name] = le.AppendUint32(values[name], math.Float32bits(x))
				}
			}
		}
		sr.Close()
	}
	return names, values
}

// TestExportZarrReadByZarrita builds f16, f32 and u8 warehouses from the
// capture demo and an f16 one with extras from the kinodb demo, exports
// each with the CLI with and without zstd, opens every store with zarrita.js
// and compares every value of every array with the Go shard reader.
func TestExportZarrReadByZarrita(t *testing.T) {
	thresholds := map[string]any{"invalid": map[string]any{"max_ratio": 0.5}, "missing": map[string]any{"max_ratio": 0.25}, "empty": map[string]any{}}
	for _, tc := range []struct {
		name      string
		root      string
		overrides map[string]any
	}{
		{"capture f16", demoRoot(t), map[string]any{"dtype": "f16", "target_size": []int{40, 24}, "max_boxes": 4, "shard_target_mb": 0.03, "thresholds": thresholds}},
		{"capture f32", demoRoot(t), map[string]any{"dtype": "f32", "target_size": []int{40, 24}, "max_boxes": 4, "shard_target_mb": 0.05, "thresholds": thresholds}},
		// Odd size: U8 images of 3*39*23 bytes, so the shards pad before their f32 boxes.
		{"capture u8", demoRoot(t), map[string]any{"dtype": "u8", "target_size": []int{39, 23}, "max_boxes": 4, "shard_target_mb": 0.02, "thresholds": thresholds}},
		{"kdb f16 extras", kdbDemoFile(t), map[string]any{"source": map[string]any{"kind": "kdb", "root": kdbDemoFile(t), "extras": []string{"state", "action", "reward", "is_terminal"}},
			"dtype": "f16", "target_size": []int{32, 32}, "max_boxes": 1, "shard_target_mb": 0.05, "thresholds": thresholds}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath, outRoot := writeConfig(t, tc.root, tc.overrides)
			dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
			m, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Shards) < 2 {
				t.Fatalf("%d shards: the test wants several", len(m.Shards))
			}
			names, want := goReaderArrays(t, dir, m)
			for _, level := range []string{"0", "3"} {
				store := filepath.Join(t.TempDir(), "export.zarr")
				res := runCLI(t, context.Background(), nil, "export", "zarr", "--tensor-warehouse", outRoot, "--out", store, "--zstd-level", level, "--quiet")
				if res.code != 0 || strings.TrimSpace(res.stdout) != store {
					t.Fatalf("zstd %s: exit %d, stdout %q\n%s", level, res.code, res.stdout, res.stderr)
				}
				checkZarritaDump(t, runZarrita(t, store), m, names, want, level)
			}
		})
	}
}

func checkZarritaDump(t *testing.T, d zarritaDump, m *warehouse.Manifest, names []string, want map[string][]byte, level string) {
	t.Helper()
	attrs := d.Root.Attributes
	if attrs.Warehouse.Version != m.Version || attrs.Warehouse.VersionRecipe != m.VersionRecipe || attrs.Warehouse.Summary.Total.Kept != m.Samples {
		t.Errorf("zstd %s: root attributes %+v", level, attrs.Warehouse)
	}
	if !slices.Equal(attrs.Export.Arrays, names) || attrs.Export.ShardSamples != m.SamplesPerShard {
		t.Errorf("zstd %s: zarr_export %+v, want arrays %v", level, attrs.Export, names)
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for name := range d.Arrays {
			if !yield(name) {
				return
			}
		}
	})
	if !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Fatalf("zstd %s: zarrita found arrays %v, want %v", level, got, names)
	}
	n := m.Samples
	perShard := int64(m.SamplesPerShard)
	files := int((n + perShard - 1) / perShard)
	for _, name := range names {
		a := d.Arrays[name]
		if a.Shape[0] != n || a.Chunks[0] != 1 || !slices.Equal(a.Chunks[1:], a.Shape[1:]) || a.DimensionNames[0] != "sample" || len(a.DimensionNames) != len(a.Shape) {
			t.Errorf("zstd %s: %s: shape %v chunks %v dimension_names %v", level, name, a.Shape, a.Chunks, a.DimensionNames)
		}
		wantFill := any(0.0)
		switch {
		case name == "class_index":
			wantFill = -1.0
		case a.DataType == "uint64" || a.DataType == "int64":
			wantFill = "0" // zarrita holds 64-bit integers as BigInt
		}
		if a.FillValue != wantFill {
			t.Errorf("zstd %s: %s: fill_value %v (%T)", level, name, a.FillValue, a.FillValue)
		}
		s := d.Shards[name]
		if s.Files != files || s.CRCOK != files || int64(s.Chunks) != n || int64(s.Empty) != int64(files)*perShard-n {
			t.Errorf("zstd %s: %s: shard files %+v, want %d files with valid crc32c, %d chunks", level, name, s, files, n)
		}
		raw, err := os.ReadFile(a.File)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[name]; !bytes.Equal(raw, w) {
			at := 0
			for at < min(len(raw), len(w)) && raw[at] == w[at] {
				at++
			}
			t.Errorf("zstd %s: %s: zarrita read %d bytes of values, the Go reader %d; first difference at byte %d", level, name, len(raw), len(w), at)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, dtype := range []string{"images", "boxes", "box_mask"} {
		wantType := map[string]string{"F16": "float16", "F32": "float32", "U8": "float32"}[m.DefaultDType]
		if dtype == "images" && m.DefaultDType == "U8" {
			wantType = "uint8"
		}
		if d.Arrays[dtype].DataType != wantType {
			t.Errorf("%s data_type %s, want %s", dtype, d.Arrays[dtype].DataType, wantType)
		}
	}
}

// TestBuildWritesZarrStore: with "zarr": {"enabled": true} a build writes
// the store into the version directory, byte-identical to what export zarr
// writes for that version, and the setting is part of the version.
func TestBuildWritesZarrStore(t *testing.T) {
	base := map[string]any{"target_size": []int{40, 24}, "max_boxes": 4, "shard_target_mb": 0.05}
	for _, tc := range []struct {
		zarr any
		want string
	}{
		{map[string]any{"enabled": true, "zstd_level": 23}, "zarr.zstd_level 23: must be 0 (uncompressed) to 22"},
		{map[string]any{"enabled": true, "shard_samples": -1}, "zarr.shard_samples -1: must be 0 (as the warehouse's shards) to 1048576"},
		{map[string]any{"enable": true}, `unknown key "enable" in zarr (known: enabled, shard_samples, zstd_level)`},
	} {
		cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"zarr": tc.zarr})
		if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath); res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("zarr %v: exit %d, stderr lacks %q:\n%s", tc.zarr, res.code, tc.want, res.stderr)
		}
	}
	plainCfg, _ := writeConfig(t, demoRoot(t), base)
	plainDir, _ := mustBuild(t, plainCfg, nil, "--quiet")
	if _, err := os.Stat(filepath.Join(plainDir, "warehouse.zarr")); !os.IsNotExist(err) {
		t.Fatalf("a build without the zarr option wrote a store: %v", err)
	}

	withZarr := map[string]any{"zarr": map[string]any{"enabled": true, "zstd_level": 2, "shard_samples": 3}}
	for k, v := range base {
		withZarr[k] = v
	}
	cfgPath, outRoot := writeConfig(t, demoRoot(t), withZarr)
	dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
	if filepath.Base(dir) == filepath.Base(plainDir) {
		t.Fatal("the zarr option did not change the version")
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.VersionRecipe, "zarr=\"zstd_level=2,shard_samples=3\"\n") {
		t.Errorf("recipe lacks the zarr settings:\n%s", m.VersionRecipe)
	}
	built := filepath.Join(dir, "warehouse.zarr")
	exported := filepath.Join(t.TempDir(), "again.zarr")
	res := runCLI(t, context.Background(), nil, "export", "zarr", "--tensor-warehouse", outRoot, "--out", exported, "--zstd-level", "2", "--shard-samples", "3", "--quiet")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	a, b := storeDigest(t, built), storeDigest(t, exported)
	if len(a) < 40 || !maps2Equal(a, b) {
		t.Fatalf("the build's store (%d files) and export zarr's (%d files) differ", len(a), len(b))
	}
	// A rerun finds the version with its store: up to date.
	if _, res := mustBuild(t, cfgPath, nil); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("rerun: %s", res.stderr)
	}
}

func storeDigest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maps2Equal(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestExportZarrErrors(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{16, 16}, "max_boxes": 2})
	dir, _ := mustBuild(t, cfgPath, nil, "--quiet")

	// A copy of the version with one image byte flipped: full
	// verification (the default) finds the checksum mismatch.
	damaged := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(damaged, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	shard0 := filepath.Join(damaged, "shards", "shard-00000.twh")
	raw, _ := os.ReadFile(shard0)
	raw[100] ^= 0xff
	os.WriteFile(shard0, raw, 0o644)
	notAStore := t.TempDir()
	os.WriteFile(filepath.Join(notAStore, "keep.txt"), []byte("mine"), 0o644)
	out := filepath.Join(t.TempDir(), "s.zarr")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"help lists zarr", []string{"export", "-h"}, exitOK, "zarr      a Zarr v3 store"},
		{"no out", []string{"export", "zarr", "--tensor-warehouse", outRoot}, exitUsage, "--tensor-warehouse and --out are required"},
		{"bad zstd level", []string{"export", "zarr", "--tensor-warehouse", outRoot, "--out", out, "--zstd-level", "23"}, exitUsage, "--zstd-level 23: want 0..22"},
		{"bad shard samples", []string{"export", "zarr", "--tensor-warehouse", outRoot, "--out", out, "--shard-samples", "-1"}, exitUsage, "--shard-samples -1: want 0..1048576"},
		{"bad verify", []string{"export", "zarr", "--tensor-warehouse", outRoot, "--out", out, "--verify", "some"}, exitUsage, `--verify "some": want full or quick`},
		{"not a warehouse", []string{"export", "zarr", "--tensor-warehouse", notAStore, "--out", out}, exitFailure, "neither a warehouse version"},
		{"verification fails", []string{"export", "zarr", "--tensor-warehouse", damaged, "--out", out}, exitFindings,
			"2 verification finding(s), the first: checksum shards/shard-00000.twh: sha256 "},
		{"target not a store", []string{"export", "zarr", "--tensor-warehouse", outRoot, "--out", notAStore}, exitFailure,
			notAStore + " exists and is not a Zarr v3 store (no zarr.json of a group): refusing to replace it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, context.Background(), nil, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr lacks %q:\n%s", res.code, tc.code, tc.want, res.stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a failed export wrote %s", out)
			}
		})
	}
	if got, _ := os.ReadFile(filepath.Join(notAStore, "keep.txt")); string(got) != "mine" {
		t.Fatal("the refused target was changed")
	}

	// --verify quick does not re-hash: the damaged version exports.
	res := runCLI(t, context.Background(), nil, "export", "zarr", "--tensor-warehouse", damaged, "--out", out, "--verify", "quick", "--quiet")
	if res.code != exitOK {
		t.Fatalf("quick verify: exit %d\n%s", res.code, res.stderr)
	}
	// Exporting again replaces the store.
	before, _ := os.Stat(filepath.Join(out, "zarr.json"))
	res = runCLI(t, context.Background(), nil, "export", "zarr", "--tensor-warehouse", outRoot, "--out", out, "--quiet")
	after, _ := os.Stat(filepath.Join(out, "zarr.json"))
	if res.code != exitOK || os.SameFile(before, after) {
		t.Fatalf("second export: exit %d, replaced %v\n%s", res.code, !os.SameFile(before, after), res.stderr)
	}
}
