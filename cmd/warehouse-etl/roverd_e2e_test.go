package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/x448/float16"

	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// roverdRoot is the committed roverd demo (testdata/roverdgen).
func roverdRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../testdata/roverd")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// roverdRecording is one demo recording as testdata/roverdgen/main.go and
// testdata/roverd/README.md describe it; the test recomputes every value
// from these formulas rather than asking the reader.
type roverdRecording struct {
	name       string
	t0         float64 // camera frame k at t0 + 0.1k
	frames     int     // frames used (drive_10: 9 ts records, 8 video frames)
	blue       int     // make_video.py's background blue
	base       int     // IMU values use m = base + n
	imuN       int     // IMU counter n = 0..imuN-1 ...
	gap0, gap1 int     // ... without [gap0, gap1]
	truncated  bool
}

var roverdDemo = []roverdRecording{
	{name: "drive_2", t0: 1700000000.0, frames: 12, blue: 60, base: 0, imuN: 120, gap0: 35, gap1: 68},
	{name: "drive_10", t0: 1700000100.0, frames: 8, blue: 160, base: 1000, imuN: 90, gap0: 1, gap1: 0, truncated: true},
}

// imu returns the IMU records' times and counters.
func (r roverdRecording) imu() (ts []float64, n []int) {
	for i := range r.imuN {
		if i < r.gap0 || i > r.gap1 {
			ts = append(ts, r.t0-0.018+0.01*float64(i))
			n = append(n, i)
		}
	}
	return ts, n
}

// extras are imu/acc, imu/avel, imu/rot for counter n, as the files store
// them (float32).
func (r roverdRecording) extras(n int) []float32 {
	m := float64(r.base + n)
	a := 0.05 * m
	return []float32{
		float32(0.01 * m), float32(-0.02 * m), float32(9.81 + 0.001*m),
		float32(math.Sin(0.1 * m)), float32(math.Cos(0.1 * m)), 0.25,
		float32(math.Cos(a)), float32(-math.Sin(a)), 0, float32(math.Sin(a)), float32(math.Cos(a)), 0, 0, 0, 1,
	}
}

// join is the nearest-timestamp rule by exhaustive search: the record
// closest in time, the earlier one on a tie, if within tol seconds.
func join(ts []float64, t, tol float64) (int, bool) {
	best, bestD := -1, math.Inf(1)
	for i, v := range ts {
		if d := math.Abs(v - t); d < bestD {
			best, bestD = i, d
		}
	}
	return best, best >= 0 && bestD <= tol
}

// roverdConfig writes configs/roverd.jsonc, as committed, into a temp dir
// with its dataset root and output root made absolute.
func roverdConfig(t *testing.T) (cfgPath, outRoot string) {
	t.Helper()
	raw, err := os.ReadFile("../../configs/roverd.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	outRoot = filepath.Join(dir, "out")
	text := string(raw)
	for from, to := range map[string]string{`"../testdata/roverd"`: fmt.Sprintf("%q", roverdRoot(t)), `"../out/roverd"`: fmt.Sprintf("%q", outRoot)} {
		if !strings.Contains(text, from) {
			t.Fatalf("configs/roverd.jsonc no longer contains %s", from)
		}
		text = strings.Replace(text, from, to, 1)
	}
	cfgPath = filepath.Join(dir, "roverd.jsonc")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, outRoot
}

// checkRoverdWarehouse compares a built warehouse with the demo's formulas
// for a join tolerance of tol seconds: which frames were kept, with which
// reasons, and the extras and image of every kept one, read back through
// warehouse.Open.
func checkRoverdWarehouse(t *testing.T, dir string, tol float64) {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantExtras := "imu/acc:[3]:f32@0 imu/avel:[3]:f32@3 imu/rot:[3 3]:f32@6"
	var got []string
	for _, e := range m.Extras {
		got = append(got, fmt.Sprintf("%s:%v:%s@%d", e.Name, e.Shape, e.SourceDType, e.Offset))
	}
	if strings.Join(got, " ") != wantExtras {
		t.Fatalf("manifest extras %v, want %s", got, wantExtras)
	}
	if len(m.Sources) != 2 || m.Sources[0].Name != "drive_2" || m.Sources[1].Name != "drive_10" ||
		!strings.HasPrefix(m.Sources[1].Attributes["truncated"], "camera: ts 9, video.avi 8 -> 8; imu: ts 91, acc 90 (+ a partial trailing record") {
		t.Fatalf("manifest sources %+v", m.Sources)
	}

	recs := readSamples(t, dir)
	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	i, kept := 0, 0
	for di, rec := range roverdDemo {
		ts, ns := rec.imu()
		if rec.truncated {
			ts, ns = ts[:90], ns[:90] // the common length of the IMU channels
		}
		for k := range rec.frames {
			sr := recs[i]
			i++
			where := fmt.Sprintf("%s frame %d", rec.name, k)
			if sr.Source != rec.name || sr.Frame != uint64(k) {
				t.Fatalf("%s: samples.jsonl line is %s frame %d", where, sr.Source, sr.Frame)
			}
			j, ok := join(ts, rec.t0+0.1*float64(k), tol)
			var want []validate.Reason
			if !ok {
				want = append(want, validate.ReasonNoMatchWithinTolerance)
			}
			if rec.truncated {
				want = append(want, validate.ReasonLengthTruncated)
			}
			if !slices.Equal(sr.Reasons, reasonNames(validate.Normalize(want))) || sr.Kept != ok {
				t.Fatalf("%s: reasons %v kept %v, want %v kept %v", where, sr.Reasons, sr.Kept, want, ok)
			}
			if !ok {
				continue
			}
			s, err := r.Sample(kept)
			if err != nil {
				t.Fatal(err)
			}
			kept++
			if meta := s.Meta(); meta.SourceIndex != uint32(di) || meta.FrameID != uint64(k) || meta.SrcWidth != 64 || meta.SrcHeight != 48 {
				t.Fatalf("%s: shard meta %+v", where, meta)
			}
			if got, want := s.Extras(), rec.extras(ns[j]); !slices.Equal(got, want) {
				t.Fatalf("%s: extras %v\nwant %v (IMU record n=%d)", where, got, want, ns[j])
			}
			// The image is the frame make_video.py drew, in RGB: the
			// background at (60, 40) of the 64x48 target (no letterbox:
			// the target is the video's size).
			img := s.ImageF16()
			wantRGB := [3]int{20 + 15*k, 200 - 10*k, rec.blue}
			for c := range 3 {
				v := float16.Frombits(img[c*48*64+40*64+60]).Float32() * 255
				if d := float64(v) - float64(wantRGB[c]); d < -8 || d > 8 {
					t.Fatalf("%s: channel %d = %.1f, want %d +- 8", where, c, v, wantRGB[c])
				}
			}
		}
	}
	if i != len(recs) || int64(kept) != m.Samples || r.Len() != kept {
		t.Fatalf("%d samples.jsonl lines, %d kept; manifest %d samples, reader %d", len(recs), kept, m.Samples, r.Len())
	}
}

// configs/roverd.jsonc builds through the CLI; its extras, reasons and
// images match the demo's formulas; a rerun is up to date, and a changed
// IMU channel makes the version stale.
func TestRoverdConfigEndToEnd(t *testing.T) {
	cfgPath, outRoot := roverdConfig(t)
	dir, res := mustBuild(t, cfgPath, nil)
	if !strings.HasPrefix(dir, outRoot+string(filepath.Separator)+"v") || !strings.Contains(res.stderr, "built: "+dir) {
		t.Fatalf("stdout %q stderr:\n%s", dir, res.stderr)
	}
	checkRoverdWarehouse(t, dir, 0.050)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) < 2 {
		t.Fatalf("a 0.125 MiB shard target should give several shards, got %d", len(m.Shards))
	}
	if again, res := mustBuild(t, cfgPath, nil); again != dir || !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("rerun: %s\n%s", again, res.stderr)
	}
}

// A changed extras channel is a changed source: the fingerprint covers the
// IMU files, not only the camera's.
func TestRoverdStaleExtras(t *testing.T) {
	root := filepath.Join(t.TempDir(), "roverd")
	if err := os.CopyFS(root, os.DirFS(roverdRoot(t))); err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := writeConfig(t, root, map[string]any{
		"source":      map[string]any{"kind": "roverd", "root": root, "extras": []string{"imu/acc", "imu/avel", "imu/rot"}},
		"target_size": []int{64, 48},
		"thresholds":  map[string]any{"invalid": map[string]any{"max_ratio": 0.2}, "empty": map[string]any{}},
	})
	mustBuild(t, cfgPath, nil)
	touched := filepath.Join(root, "drive_10", "imu", "rot_i")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(touched, future, future); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath)
	if res.code != exitStale || !strings.Contains(res.stderr, "drive_10/imu/rot_i") {
		t.Fatalf("changed extras channel: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// The tolerance decides the join: at 100 ms frames 4 and 6 of drive_2
// reach the IMU records around the dropout (78 and 72 ms away) and frame 5
// still does not; at 1 ms no frame reaches its nearest record (2 ms away),
// every frame is skipped and the invalid threshold stops the build (exit 3).
func TestRoverdTolerance(t *testing.T) {
	source := func(tolMs float64) map[string]any {
		return map[string]any{
			"source":      map[string]any{"kind": "roverd", "root": roverdRoot(t), "extras": []string{"imu/acc", "imu/avel", "imu/rot"}, "tolerance_ms": tolMs},
			"target_size": []int{64, 48},
			"thresholds":  map[string]any{"invalid": map[string]any{"max_ratio": 0.2}, "empty": map[string]any{}},
		}
	}
	cfgPath, _ := writeConfig(t, roverdRoot(t), source(100))
	dir, _ := mustBuild(t, cfgPath, nil)
	checkRoverdWarehouse(t, dir, 0.100)

	cfgPath, _ = writeConfig(t, roverdRoot(t), source(1))
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath)
	if res.code != exitThreshold || !strings.Contains(res.stderr, "invalid.max_ratio") {
		t.Fatalf("1 ms tolerance: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

// reasonNames is rs as samples.jsonl writes them.
func reasonNames(rs []validate.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
