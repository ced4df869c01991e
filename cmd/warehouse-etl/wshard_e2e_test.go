package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/config"
	"warehouse-etl/sources/wshard"
	"warehouse-etl/warehouse"
)

// The WShard demo, testdata/wshard, written by testdata/wshardgen.
// Everything expected here comes from testdata/wshard/README.md: the
// episode table, the signal and frame formulas and the planted defects.

func wshardDemoRoot(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../testdata/wshard")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wshardEpisode is one demo episode in scan order: its name in the summary,
// e (the formulas' episode number), its steps, the steps that exist
// (chunked episodes may miss some) and whether its camera is grayscale.
type wshardEpisode struct {
	name   string
	e      int
	steps  int
	frames []int
	gray   bool
}

func span(a, z int) []int {
	var out []int
	for t := a; t < z; t++ {
		out = append(out, t)
	}
	return out
}

var wshardEpisodes = []wshardEpisode{
	{"gap_ep", 1, 8, slices.Concat(span(0, 3), span(5, 8)), false},
	{"long_ep", 2, 9, span(0, 9), false},
	{"pick_cube/ep_2", 3, 6, span(0, 6), false},
	{"pick_cube/ep_10", 4, 5, span(0, 5), false},
	{"push/ep_1", 5, 4, span(0, 4), true},
	{"zz_bad/crc_reward", 6, 3, span(0, 3), false},
	{"zz_bad/frames_crc", 7, 3, span(0, 3), false},
	{"zz_bad/nan_reward", 8, 3, span(0, 3), false},
	{"zz_bad/no_camera", 9, 3, span(0, 3), false},
	{"zz_bad/time_backwards", 10, 4, span(0, 4), false},
	{"zz_bad/truncated", 11, 3, []int{0}, false}, // unreadable: one placeholder
}

// wshardReasons are the reasons of samples.jsonl keyed "episode#frame";
// every other sample is clean and kept.
func wshardReasons() map[string]string {
	m := map[string]string{
		"gap_ep#5":                "episode_gap",
		"zz_bad/nan_reward#1":     "nonfinite",
		"zz_bad/time_backwards#2": "timestamp_not_monotonic",
		"zz_bad/truncated#0":      "decode_error",
	}
	for f := range 3 {
		m[fmt.Sprintf("zz_bad/crc_reward#%d", f)] = "checksum_mismatch"
		m[fmt.Sprintf("zz_bad/frames_crc#%d", f)] = "decode_error" // found at transform time
		m[fmt.Sprintf("zz_bad/no_camera#%d", f)] = "camera_missing"
	}
	return m
}

// The demo's signal formulas (README), written again here.
func wsJointPos(e, t, j int) float32 { return float32(e) + float32(t)*0.125 - float32(j)*0.25 }
func wsCtrl(e, t, j int) float32 {
	return float32(float64(0.1*float64(t)) - float64(0.05*float64(j)) + float64(e))
}

func wsExtras(e, t, steps int) []float32 {
	out := make([]float32, 0, 12)
	for j := range 7 {
		out = append(out, wsJointPos(e, t, j))
	}
	out = append(out, wsCtrl(e, t, 0), wsCtrl(e, t, 1), float32(t%2)*0.5, float32(t)*0.25)
	if t == steps-1 {
		return append(out, 1)
	}
	return append(out, 0)
}

// pinnedWShardOverrides turns configs/wshard.jsonc into writeConfig
// overrides, with the dataset root made absolute: the test builds the
// pinned settings, not a copy of them.
func pinnedWShardOverrides(t *testing.T) map[string]any {
	t.Helper()
	cfg, err := config.Load("../../configs/wshard.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source.Root != "../testdata/wshard" {
		t.Fatalf("configs/wshard.jsonc builds %s, not the demo", cfg.Source.Root)
	}
	var thresholds map[string]any
	raw, err := json.Marshal(cfg.Thresholds)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &thresholds); err != nil {
		t.Fatal(err)
	}
	ws := cfg.Source.Settings.(*wshard.Settings)
	return map[string]any{
		"source":          map[string]any{"kind": cfg.Source.Kind, "root": wshardDemoRoot(t), "camera": ws.Camera, "extras": ws.Extras},
		"target_size":     cfg.TargetSize,
		"resize_mode":     cfg.ResizeMode,
		"dtype":           cfg.DType,
		"max_boxes":       cfg.MaxBoxes,
		"shard_target_mb": cfg.ShardTargetMB,
		"thresholds":      thresholds,
	}
}

func TestWShardDemoEndToEnd(t *testing.T) {
	cfgPath, _ := writeConfig(t, wshardDemoRoot(t), pinnedWShardOverrides(t))
	dir, _ := mustBuild(t, cfgPath, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}

	// The manifest describes the extras and the episodes.
	wantExtras := []warehouse.Extra{
		{Name: "signal/joint_pos", Shape: []int{7}, SourceDType: "f32", Offset: 0},
		{Name: "action/ctrl", Shape: []int{2}, SourceDType: "f64", Offset: 7},
		{Name: "signal/gripper", Shape: []int{1}, SourceDType: "bf16", Offset: 9},
		{Name: "reward", Shape: []int{}, SourceDType: "f32", Offset: 10},
		{Name: "done", Shape: []int{}, SourceDType: "u8", Offset: 11},
	}
	got, err1 := json.Marshal(m.Extras)
	want, err2 := json.Marshal(wantExtras)
	if err1 != nil || err2 != nil || string(got) != string(want) {
		t.Fatalf("manifest extras %s, want %s", got, want)
	}
	if m.Source.Kind != "wshard" || len(m.Sources) != len(wshardEpisodes) {
		t.Fatalf("source %+v, %d sources", m.Source, len(m.Sources))
	}
	for i, ep := range wshardEpisodes {
		if s := m.Sources[i]; s.Index != i || s.Name != ep.name {
			t.Fatalf("sources[%d] = %+v, want %s", i, s, ep.name)
		}
	}
	if a := m.Sources[1].Attributes; a["chunks"] != "3" || a["file"] != "long/long_ep_manifest.wshard" || a["steps"] != "9" {
		t.Fatalf("long_ep attributes %v", a)
	}
	if a := m.Sources[10].Attributes; !strings.Contains(a["error"], "zz_bad/truncated.wshard") {
		t.Fatalf("the truncated episode's error does not name its file: %v", a)
	}
	if c := m.Summary.Total; c.Total != 47 || c.Invalid != 10 || c.MissingImage != 3 || c.Kept != 34 {
		t.Fatalf("summary %+v", c)
	}

	// samples.jsonl: every step, in order, with exactly the planted reasons.
	recs := readSamples(t, dir)
	reasons := wshardReasons()
	k := 0
	for i, ep := range wshardEpisodes {
		for _, f := range ep.frames {
			if k >= len(recs) {
				t.Fatalf("samples.jsonl has only %d lines", len(recs))
			}
			r := recs[k]
			k++
			key := fmt.Sprintf("%s#%d", ep.name, f)
			if r.Source != ep.name || r.SourceIndex != int64(i) || r.Frame != uint64(f) {
				t.Fatalf("line %d is %s#%d (index %d), want %s", r.Seq, r.Source, r.Frame, r.SourceIndex, key)
			}
			var got []string
			for _, reason := range r.Reasons {
				got = append(got, string(reason))
			}
			if strings.Join(got, "+") != reasons[key] || r.Kept != (reasons[key] == "") {
				t.Errorf("%s: reasons %v kept %v, want %q", key, got, r.Kept, reasons[key])
			}
			if reasons[key] == "decode_error" && ep.name == "zz_bad/frames_crc" && !strings.Contains(r.Error, `block "signal/cam0/rgb": checksum mismatch`) {
				t.Errorf("%s: error %q does not name the block and the checksum", key, r.Error)
			}
		}
	}
	if k != len(recs) {
		t.Fatalf("samples.jsonl has %d lines, want %d", len(recs), k)
	}

	// The extras, frames and metadata read back through the training reader.
	wr, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	byName := map[string]wshardEpisode{}
	for _, ep := range wshardEpisodes {
		byName[ep.name] = ep
	}
	for _, r := range recs {
		if !r.Kept {
			continue
		}
		ep := byName[r.Source]
		tStep := int(r.Frame)
		s, err := wr.Sample(int(r.Index))
		if err != nil {
			t.Fatal(err)
		}
		if want := wsExtras(ep.e, tStep, ep.steps); !slices.Equal(s.Extras(), want) {
			t.Fatalf("%s#%d extras %v, want %v", r.Source, r.Frame, s.Extras(), want)
		}
		meta := s.Meta()
		if meta.FrameID != r.Frame || meta.SourceIndex != uint32(r.SourceIndex) || meta.SrcWidth != 24 || meta.SrcHeight != 16 || s.BoxCount() != 0 {
			t.Fatalf("%s#%d meta %+v, %d boxes", r.Source, r.Frame, meta, s.BoxCount())
		}
		if ep.name == "pick_cube/ep_10" && meta.UnixTimeNs != 1_700_000_000_000_000_000+int64(tStep)*20_000_000 {
			t.Fatalf("%s#%d unix time %d", r.Source, r.Frame, meta.UnixTimeNs)
		}
		if ep.name == "pick_cube/ep_2" && math.Abs(meta.SimTime-float64(tStep)/10) > 1e-9 {
			t.Fatalf("%s#%d sim time %v", r.Source, r.Frame, meta.SimTime)
		}
		for _, m := range s.Mask() {
			if m != 0 {
				t.Fatalf("%s#%d: mask %v, want all zero", r.Source, r.Frame, s.Mask())
			}
		}
		// The centre of the moving square, mapped through the letterbox.
		W, H := 64, 64
		lb := r.Letterbox
		x := int((float64((2+tStep)%18)+3)*lb.ScaleX) + int(lb.PadX)
		y := int(8*lb.ScaleY) + int(lb.PadY)
		want := [3]float32{250, 220, 40}
		if ep.gray {
			want = [3]float32{250, 250, 250}
		}
		img := s.ImageF16()
		for c := range 3 {
			got := float16.Frombits(img[(c*H+y)*W+x]).Float32() * 255
			if math.Abs(float64(got-want[c])) > 3 {
				t.Fatalf("%s#%d: pixel (%d,%d) channel %d = %.1f/255, want %.0f", r.Source, r.Frame, x, y, c, got, want[c])
			}
		}
	}

	// A rerun finds the version up to date.
	if _, res := mustBuild(t, cfgPath, nil); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("rerun:\n%s", res.stderr)
	}
}

// TestWShardGlobDefaultCamera: a glob root, the default camera (the first
// rgb channel) and one extra.
func TestWShardGlobDefaultCamera(t *testing.T) {
	cfgPath, _ := writeConfig(t, "", map[string]any{
		"source":      map[string]any{"kind": "wshard", "root": filepath.Join(wshardDemoRoot(t), "pick_cube", "*.wshard"), "extras": []string{"reward"}},
		"target_size": []int{32, 32},
	})
	dir, _ := mustBuild(t, cfgPath, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Samples != 11 || len(m.Sources) != 2 || m.Sources[0].Name != "pick_cube/ep_2" || m.Sources[0].Attributes["camera"] != "signal/cam0/rgb" {
		t.Fatalf("manifest: %d samples, sources %+v", m.Samples, m.Sources)
	}
	wr, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	for i, r := range readSamples(t, dir) {
		s, err := wr.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		if want := []float32{float32(r.Frame) * 0.25}; !r.Kept || !slices.Equal(s.Extras(), want) {
			t.Fatalf("%s#%d: kept %v extras %v, want %v", r.Source, r.Frame, r.Kept, s.Extras(), want)
		}
	}
}

// source.boxes through the CLI: a WShard label channel's pixel boxes land
// in the shards in target space (letterbox applied), with their class ids
// in the manifest's class table and masks set; padding rows are not boxes,
// an all-padding step is empty, a broken box is a reason.
func TestWShardLabelChannelEndToEnd(t *testing.T) {
	const T, H, W = 3, 16, 32
	frames := make([]byte, T*H*W*3)
	for i := range frames {
		frames[i] = byte(i * 7)
	}
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	ep := &wshard.EpisodeFile{
		ID: "boxed", Length: T, TickHz: 10,
		Channels: []wshard.ChannelData{
			{ID: "cam", Block: "signal/cam", DType: "u8", Shape: []int{H, W, 3}, Modality: "rgb", Data: frames},
			{ID: "boxes", Block: "label/boxes", DType: "f32", Shape: []int{2, 4}, Data: f32(
				4, 2, 12, 10, 16, 0, 32, 16, // step 0: two boxes
				0, 0, 0, 0, 0, 0, 0, 0, // step 1: padding only
				8, 8, 4, 12, 0, 0, 0, 0)}, // step 2: x0 >= x1
			{ID: "cls", Block: "label/cls", DType: "f32", Shape: []int{2}, Data: f32(9, 5, 0, 0, 5, 0)},
		},
	}
	raw, err := ep.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "boxed.wshard"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := writeConfig(t, root, map[string]any{
		"source":      map[string]any{"kind": "wshard", "root": root, "boxes": "label/boxes", "box_classes": "cls"},
		"target_size": []int{64, 64},
		"max_boxes":   4,
		"thresholds":  map[string]any{"invalid": map[string]any{}, "missing": map[string]any{}, "empty": map[string]any{}},
	})
	dir, _ := mustBuild(t, cfgPath, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	tot := m.Summary.Total
	// Empty counts steps without a valid box (the invalid step too), the
	// empty reason only the all-padding one.
	if tot.Total != 3 || tot.Kept != 2 || tot.Empty != 2 || tot.Invalid != 1 || tot.NonEmpty != 1 ||
		tot.ByReason["empty"] != 1 || tot.ByReason["invalid_bbox"] != 1 {
		t.Fatalf("summary %+v", tot)
	}
	classID := map[int32]int64{}
	for _, c := range m.Classes {
		if c.ID == nil {
			t.Fatalf("class %+v has no id", c)
		}
		classID[int32(c.Index)] = *c.ID
	}
	if len(classID) != 2 {
		t.Fatalf("classes %+v, want ids 5 and 9", m.Classes)
	}
	wr, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	if wr.Len() != 2 {
		t.Fatalf("%d samples, want 2", wr.Len())
	}
	s, err := wr.Sample(0)
	if err != nil {
		t.Fatal(err)
	}
	// 32x16 -> 64x32 (scale 2), padded 16 rows above: y' = 2y + 16, then /64.
	want := [][4]float32{{8.0 / 64, 20.0 / 64, 24.0 / 64, 36.0 / 64}, {32.0 / 64, 16.0 / 64, 1, 48.0 / 64}}
	if got := s.Boxes(); s.BoxCount() != 2 || !slices.Equal(got[:2], want) {
		t.Fatalf("boxes %v (count %d), want %v", got, s.BoxCount(), want)
	}
	if mask := s.Mask(); !slices.Equal(mask, []float32{1, 1, 0, 0}) {
		t.Fatalf("mask %v", mask)
	}
	ci := s.ClassIndex()
	if classID[ci[0]] != 9 || classID[ci[1]] != 5 {
		t.Fatalf("class indices %v map to ids %d, %d; want 9, 5", ci, classID[ci[0]], classID[ci[1]])
	}
	empty, err := wr.Sample(1)
	if err != nil {
		t.Fatal(err)
	}
	if empty.BoxCount() != 0 || empty.Meta().FrameID != 1 {
		t.Fatalf("sample 1: frame %d with %d boxes, want the empty step 1", empty.Meta().FrameID, empty.BoxCount())
	}
}
