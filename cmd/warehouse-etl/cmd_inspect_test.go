package main

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
	"warehouse-etl/warehouse"
)

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// With resize_mode none the stored tensor is the source image scaled by
// 1/255 (f16 keeps 11 significant bits, enough to round back to the same
// byte), so the rendered picture must equal the source PNG, decoded here by
// the standard library, pixel for pixel outside the drawn boxes and labels;
// and each box outline must sit on the box's pixel edges.
func TestInspectRendersSampleBackToItsSource(t *testing.T) {
	for _, dtype := range []string{"f16", "u8"} {
		t.Run(dtype, func(t *testing.T) { inspectRendersSampleBackToItsSource(t, dtype) })
	}
}

func inspectRendersSampleBackToItsSource(t *testing.T, dtype string) {
	root := demoRoot(t)
	dir, _ := smallDemo(t, map[string]any{
		"target_size": []int{200, 150}, "resize_mode": "none", "dtype": dtype,
		"thresholds": map[string]any{"invalid": map[string]any{"max_ratio": 0.9}, "missing": map[string]any{"max_ratio": 0.5}},
	})
	var rec *struct {
		index int64
		image string
	}
	for _, r := range readSamples(t, dir) {
		if r.Kept && strings.HasSuffix(r.ImagePath, ".png") && r.BoxCount >= 2 {
			rec = &struct {
				index int64
				image string
			}{r.Index, r.ImagePath}
			break
		}
	}
	if rec == nil {
		t.Fatal("no kept PNG sample with two boxes in the demo")
	}
	out := filepath.Join(t.TempDir(), "sample.png")
	res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--sample", itoa(rec.index), "--png", out)
	if res.code != exitOK || !strings.Contains(res.stdout, "rendered to "+out) {
		t.Fatalf("inspect: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	got := decodePNG(t, out)
	src := decodePNG(t, filepath.Join(root, rec.image))
	if got.Bounds() != src.Bounds() {
		t.Fatalf("rendered %v, source %v", got.Bounds(), src.Bounds())
	}

	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Sample(int(rec.index))
	if err != nil {
		t.Fatal(err)
	}
	// Annotated pixels: each box's rectangle and the label strip above it.
	annotated := func(x, y int) bool {
		for _, b := range s.Boxes() {
			x0, y0 := int(math.Floor(float64(b[0])*200)), int(math.Floor(float64(b[1])*150))
			x1, y1 := int(math.Ceil(float64(b[2])*200)), int(math.Ceil(float64(b[3])*150))
			if x >= x0-1 && x <= max(x1, x0+7*12)+2 && y >= y0-14 && y <= y1+1 {
				return true
			}
		}
		return false
	}
	compared := 0
	for y := range 150 {
		for x := range 200 {
			if annotated(x, y) {
				continue
			}
			compared++
			g := color.RGBAModel.Convert(got.At(x, y)).(color.RGBA)
			// Straight (non-premultiplied) RGB: the transform drops alpha
			// without blending.
			o := color.NRGBAModel.Convert(src.At(x, y)).(color.NRGBA)
			if g.R != o.R || g.G != o.G || g.B != o.B {
				t.Fatalf("pixel (%d,%d): rendered %d,%d,%d, source %d,%d,%d", x, y, g.R, g.G, g.B, o.R, o.G, o.B)
			}
		}
	}
	if compared < 200*150/2 {
		t.Fatalf("only %d pixels compared", compared)
	}
	classes := s.ClassIndex()
	for j, b := range s.Boxes() {
		x0 := int(math.Floor(float64(b[0]) * 200))
		yMid := int((float64(b[1]) + float64(b[3])) / 2 * 150)
		want := render.ClassColor(int(classes[j]))
		if c := color.RGBAModel.Convert(got.At(x0, yMid)).(color.RGBA); c != want {
			t.Errorf("box %d: left edge pixel (%d,%d) is %v, want class colour %v", j, x0, yMid, c, want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestInspectSummaryAndJSON(t *testing.T) {
	dir, outRoot := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", outRoot)
	for _, want := range []string{
		"version     " + m.Version,
		"transform   96x64 letterbox, pad 0, normalize none (pixel/255), F16, max_boxes 16, skip_empty false",
		"classes     0 instrument, 1 polyp, 2 object",
		"validation  33 input: kept 19, skipped 14; empty 4, invalid 11, missing 3",
		"invalid  max_ratio 0.5 (fail): 11 of 33",
		"shard-00000",
		`target_size="96x64"`,
	} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if res.code != exitOK || t.Failed() {
		t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	res = runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--json", "--sample", "0")
	var rep struct {
		Dir               string              `json:"dir"`
		Manifest          *warehouse.Manifest `json:"manifest"`
		ThresholdFindings []validate.Finding  `json:"threshold_findings"`
		ShardFiles        []shardFile         `json:"shard_files"`
		Sample            *sampleReport       `json:"sample"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, res.stdout)
	}
	if res.code != exitOK || rep.Manifest.Version != m.Version || rep.ShardFiles[1].Status != "ok" ||
		len(rep.ThresholdFindings) != 0 || rep.Sample == nil || rep.Sample.Index != 0 || len(rep.Sample.Boxes) == 0 {
		t.Fatalf("exit %d, report %+v", res.code, rep)
	}

	// A missing shard shows in the table; showing a sample needs the
	// reader, which refuses the version and names the file.
	if err := os.Remove(filepath.Join(dir, m.Shards[1].RelativePath)); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--json")
	rep.ShardFiles = nil
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || rep.ShardFiles[1].Status != "missing" || rep.ShardFiles[0].Status != "ok" {
		t.Fatalf("missing shard: %v %+v", err, rep.ShardFiles)
	}
	res = runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--sample", "0")
	if res.code != exitFailure || !strings.Contains(res.stderr, filepath.Join(dir, m.Shards[1].RelativePath)+": missing: the manifest lists shard shard-00001") {
		t.Fatalf("sample of a damaged version: exit %d\n%s", res.code, res.stderr)
	}
	if res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--png", "x.png"); res.code != exitUsage || !strings.Contains(res.stderr, "--png needs --sample N") {
		t.Fatalf("--png without --sample: exit %d %s", res.code, res.stderr)
	}
}
