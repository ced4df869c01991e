package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/analytics/records"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// The kinodb demo, testdata/kdb/demo.kdb, written by testdata/kdbgen.
// Everything expected here comes from testdata/kdb/README.md: the episode
// table, the value formulas and the planted defects.

func kdbDemoFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../testdata/kdb/demo.kdb")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kdbEpisodes are the demo's episodes in scan order (numeric episode_id),
// with their frame counts, embodiment and task.
var kdbEpisodes = []struct {
	id         int
	frames     int
	embodiment string
	task       string
}{
	{0, 6, "franka", "pick up the red block"},
	{2, 6, "franka", "open the drawer"},
	{3, 0, "ur5", "wait"},
	{10, 8, "widowx", "put the spoon in the drawer"},
	{11, 4, "franka", "stack the cups"},
}

func kdbState(id, t, j int) float32 { return float32(id) + float32(t)/4 + float32(j)/16 }
func kdbAction(t, k int) float32    { return float32(k) - float32(t)/2 }
func kdbReward(t, n int) float32 {
	if t == n-1 {
		return 1
	}
	return float32(t) / 8
}

// kdbReasons are the reasons samples.jsonl must carry, keyed
// "episode#frame", for camera front (the default) or wrist, with action
// among the extras; every other sample is clean and kept.
func kdbReasons(camera string) map[string][]string {
	m := map[string][]string{
		"3#0":  {"zero_frames"},
		"10#5": {"nonfinite"}, // action[0] is NaN
	}
	for f := range 4 {
		m[fmt.Sprintf("11#%d", f)] = []string{"length_mismatch"}
	}
	if camera == "front" {
		m["10#1"] = []string{"camera_missing"}
		m["10#2"] = []string{"decode_error"}
		m["10#3"] = []string{"decode_error"} // header fine, pixels cut: found at transform time
		m["10#4"] = []string{"dims_mismatch"}
	} else {
		m["10#6"] = []string{"block_size_mismatch"}
	}
	return m
}

// pinnedKDBConfig copies configs/kdb.jsonc with its two paths made
// absolute (the demo file, and an output root in a temp dir), so the test
// builds the pinned config itself.
func pinnedKDBConfig(t *testing.T) (cfgPath, outRoot string) {
	t.Helper()
	raw, err := os.ReadFile("../../configs/kdb.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	outRoot = filepath.Join(dir, "out")
	text := string(raw)
	for from, to := range map[string]string{`"../testdata/kdb/demo.kdb"`: fmt.Sprintf("%q", kdbDemoFile(t)), `"../out/kdb"`: fmt.Sprintf("%q", outRoot)} {
		if !strings.Contains(text, from) {
			t.Fatalf("configs/kdb.jsonc no longer contains %s", from)
		}
		text = strings.Replace(text, from, to, 1)
	}
	cfgPath = filepath.Join(dir, "kdb.jsonc")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, outRoot
}

func checkKDBReasons(t *testing.T, recs []records.SampleLine, camera string) []records.SampleLine {
	t.Helper()
	want := kdbReasons(camera)
	var kept []records.SampleLine
	k := 0
	for _, ep := range kdbEpisodes {
		for f := range max(ep.frames, 1) {
			if k >= len(recs) {
				t.Fatalf("samples.jsonl has only %d lines", len(recs))
			}
			r := recs[k]
			k++
			key := fmt.Sprintf("%d#%d", ep.id, f)
			if r.Source != fmt.Sprintf("demo.kdb/episode_%d", ep.id) || r.Frame != uint64(f) {
				t.Errorf("line %d is %s frame %d, want episode %s", r.Seq, r.Source, r.Frame, key)
			}
			var got []string
			for _, reason := range r.Reasons {
				got = append(got, string(reason))
			}
			if !slices.Equal(got, want[key]) {
				t.Errorf("episode %s: reasons %v, want %v", key, got, want[key])
			}
			if r.Kept != (len(want[key]) == 0) {
				t.Errorf("episode %s: kept %v", key, r.Kept)
			}
			if r.Kept {
				kept = append(kept, r)
			}
		}
	}
	if k != len(recs) {
		t.Errorf("samples.jsonl has %d lines, want %d", len(recs), k)
	}
	return kept
}

func TestKDBPinnedConfigEndToEnd(t *testing.T) {
	cfgPath, _ := pinnedKDBConfig(t)
	dir, _ := mustBuild(t, cfgPath, nil)
	recs := readSamples(t, dir)
	kept := checkKDBReasons(t, recs, "front")
	if late := recs[slices.IndexFunc(recs, func(r records.SampleLine) bool {
		return r.Source == "demo.kdb/episode_10" && r.Frame == 3
	})]; !strings.Contains(late.Error, "jpeg") {
		t.Errorf("late decode failure without a JPEG error: %q", late.Error)
	}

	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Manifest()
	wantExtras := []warehouse.Extra{
		{Name: "state", Shape: []int{4}, SourceDType: "f32", Offset: 0},
		{Name: "action", Shape: []int{7}, SourceDType: "f32", Offset: 4},
		{Name: "reward", Shape: []int{}, SourceDType: "f32", Offset: 11},
		{Name: "is_terminal", Shape: []int{}, SourceDType: "u8", Offset: 12},
	}
	if fmt.Sprint(m.Extras) != fmt.Sprint(wantExtras) {
		t.Errorf("manifest extras %+v, want %+v", m.Extras, wantExtras)
	}

	// The summary counts every planted defect; the late decode error is
	// counted although the scan passed the sample.
	tot := m.Summary.Total
	wantBy := map[validate.Reason]int64{"zero_frames": 1, "camera_missing": 1, "decode_error": 2, "dims_mismatch": 1, "nonfinite": 1, "length_mismatch": 4}
	if tot.Total != 25 || tot.Kept != 15 || fmt.Sprint(tot.ByReason) != fmt.Sprint(wantBy) {
		t.Errorf("summary total %d kept %d by reason %v, want 25, 15, %v", tot.Total, tot.Kept, tot.ByReason, wantBy)
	}

	// Task text and embodiment reach the manifest's episode table, which
	// the Parquet export of runs reads.
	if len(m.Sources) != len(kdbEpisodes) {
		t.Fatalf("%d sources", len(m.Sources))
	}
	for i, ep := range kdbEpisodes {
		a := m.Sources[i].Attributes
		if m.Sources[i].Name != fmt.Sprintf("demo.kdb/episode_%d", ep.id) || a["task"] != ep.task || a["embodiment"] != ep.embodiment || a["episode_id"] != fmt.Sprint(ep.id) {
			t.Errorf("source %d: %+v", i, m.Sources[i])
		}
	}

	// Extras read back through the training reader equal the formulas.
	if r.Len() != len(kept) {
		t.Fatalf("reader has %d samples, samples.jsonl %d kept", r.Len(), len(kept))
	}
	for i, rec := range kept {
		s, err := r.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		meta := s.Meta()
		ep := kdbEpisodes[meta.SourceIndex]
		f := int(meta.FrameID)
		if meta.InputSeq != uint64(rec.Seq) || f != int(rec.Frame) {
			t.Fatalf("sample %d: meta %+v, samples.jsonl %+v", i, meta, rec)
		}
		var want []float32
		for j := range 4 {
			want = append(want, kdbState(ep.id, f, j))
		}
		for k := range 7 {
			want = append(want, kdbAction(f, k))
		}
		term := float32(0)
		if f == ep.frames-1 {
			term = 1
		}
		want = append(want, kdbReward(f, ep.frames), term)
		if got := s.Extras(); !slices.Equal(got, want) {
			t.Errorf("episode %d frame %d: extras %v, want %v", ep.id, f, got, want)
		}
		if wantSim := float64(f) / map[int]float64{0: 10, 2: 15, 10: 5}[ep.id]; meta.SimTime != wantSim || meta.SrcWidth != 64 || meta.SrcHeight != 48 {
			t.Errorf("episode %d frame %d: sim time %v, source %dx%d", ep.id, f, meta.SimTime, meta.SrcWidth, meta.SrcHeight)
		}
	}

	// A rerun finds the version unchanged.
	if _, res := mustBuild(t, cfgPath, nil); !strings.Contains(res.stderr, "up to date") {
		t.Errorf("rerun did not report up to date:\n%s", res.stderr)
	}
}

// TestKDBRawCameraPixels builds the raw "wrist" camera at its own size
// with resize_mode none and f32, so every stored value is a pixel of the
// generator's formula divided by 255.
func TestKDBRawCameraPixels(t *testing.T) {
	cfgPath, _ := writeConfig(t, kdbDemoFile(t), map[string]any{
		"source":      map[string]any{"kind": "kdb", "root": kdbDemoFile(t), "camera": "wrist", "extras": []string{"action", "reward"}},
		"target_size": []int{32, 24},
		"resize_mode": "none",
		"dtype":       "f32",
		"max_boxes":   1,
		"thresholds": map[string]any{
			"invalid": map[string]any{"max_ratio": 0.5}, "missing": map[string]any{"max_ratio": 0.25}, "empty": map[string]any{},
		},
	})
	dir, _ := mustBuild(t, cfgPath, nil)
	kept := checkKDBReasons(t, readSamples(t, dir), "wrist")
	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != len(kept) || len(kept) != 6+6+6 {
		t.Fatalf("%d samples, %d kept lines, want 18", r.Len(), len(kept))
	}
	for i := range kept {
		s, err := r.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		meta := s.Meta()
		ep := kdbEpisodes[meta.SourceIndex]
		f := int(meta.FrameID)
		img := s.ImageF32()
		for y := range 24 {
			for x := range 32 {
				px := [3]uint8{uint8(255 - x*8), uint8(y * 10), uint8(f*40 + ep.id)}
				for c := range 3 {
					got, want := img[c*32*24+y*32+x], float32(px[c])/255
					if math.Abs(float64(got-want)) > 1e-6 {
						t.Fatalf("episode %d frame %d channel %d pixel (%d,%d) = %v, want %v", ep.id, f, c, x, y, got, want)
					}
				}
			}
		}
		if got := s.Extras(); len(got) != 8 || got[1] != kdbAction(f, 1) || got[7] != kdbReward(f, ep.frames) {
			t.Errorf("episode %d frame %d: extras %v", ep.id, f, got)
		}
	}
}
