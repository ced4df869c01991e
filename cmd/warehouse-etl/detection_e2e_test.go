package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/analytics/records"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// pixelBox is a source annotation's box in source pixels with the class
// index the warehouse must give it.
type pixelBox struct {
	x0, y0, x1, y1 float64
	class          int32
}

// letterboxRule is the letterbox placement of a w x h image in a t x t
// target, written out from README/transforms' rule rather than taken from
// the code: the limiting axis fills the target, the other is
// round-half-up(src * scale), padding is split with the odd pixel right or
// bottom.
func letterboxRule(w, h, t int) (newW, newH, padX, padY int) {
	if w >= h {
		newW, newH = t, int(math.Floor(float64(h)*float64(t)/float64(w)+0.5))
	} else {
		newW, newH = int(math.Floor(float64(w)*float64(t)/float64(h)+0.5)), t
	}
	newW, newH = max(newW, 1), max(newH, 1)
	return newW, newH, (t - newW) / 2, (t - newH) / 2
}

// checkLetterboxedBoxes compares every kept sample's boxes, mask and class
// indices in the shards of dir (target t x t, f32 boxes) with want, the
// source annotations parsed by the test itself and keyed by image path:
// each box clamped to its image, scaled into the letterbox and normalized.
func checkLetterboxedBoxes(t *testing.T, dir string, target int, recs []records.SampleLine, want map[string][]pixelBox) (checked int) {
	t.Helper()
	shards := map[string]*shard.Reader{}
	defer func() {
		for _, s := range shards {
			s.Close()
		}
	}()
	for _, r := range recs {
		if !r.Kept {
			continue
		}
		sh := shards[r.Shard]
		if sh == nil {
			var err error
			if sh, err = shard.Open(filepath.Join(dir, "shards", r.Shard+".twh")); err != nil {
				t.Fatal(err)
			}
			shards[r.Shard] = sh
		}
		i := int(r.ShardIndex)
		m := sh.Meta(i)
		if int64(m.SrcWidth) != r.Width || int64(m.SrcHeight) != r.Height {
			t.Errorf("%s: meta source size %dx%d, scan said %dx%d", r.ImagePath, m.SrcWidth, m.SrcHeight, r.Width, r.Height)
		}
		newW, newH, padX, padY := letterboxRule(int(r.Width), int(r.Height), target)
		if int(m.ResizedWidth) != newW || int(m.ResizedHeight) != newH || int(m.PadX) != padX || int(m.PadY) != padY {
			t.Errorf("%s: letterbox %dx%d at (%d,%d), want %dx%d at (%d,%d)", r.ImagePath,
				m.ResizedWidth, m.ResizedHeight, m.PadX, m.PadY, newW, newH, padX, padY)
		}
		boxes, classes, mask := sh.Boxes(i), sh.ClassIndex(i), sh.Mask(i)
		wb := want[r.ImagePath]
		if len(boxes) != len(wb) {
			t.Errorf("%s: %d boxes in the shard, the annotation has %d", r.ImagePath, len(boxes), len(wb))
			continue
		}
		for j, b := range wb {
			clamp := func(v, hi float64) float64 { return min(max(v, 0), hi) }
			exp := [4]float64{
				(clamp(b.x0, float64(r.Width))*float64(newW)/float64(r.Width) + float64(padX)) / float64(target),
				(clamp(b.y0, float64(r.Height))*float64(newH)/float64(r.Height) + float64(padY)) / float64(target),
				(clamp(b.x1, float64(r.Width))*float64(newW)/float64(r.Width) + float64(padX)) / float64(target),
				(clamp(b.y1, float64(r.Height))*float64(newH)/float64(r.Height) + float64(padY)) / float64(target),
			}
			for k := range 4 {
				if d := math.Abs(float64(boxes[j][k]) - exp[k]); d > 1e-6 {
					t.Errorf("%s box %d: %v, want %v", r.ImagePath, j, boxes[j], exp)
					break
				}
			}
			if classes[j] != b.class {
				t.Errorf("%s box %d: class index %d, want %d", r.ImagePath, j, classes[j], b.class)
			}
			if mask[j] != 1 {
				t.Errorf("%s box %d: mask %v", r.ImagePath, j, mask[j])
			}
			checked++
		}
		for j := len(wb); j < len(mask); j++ {
			if mask[j] != 0 {
				t.Errorf("%s: mask[%d] = %v after the real boxes", r.ImagePath, j, mask[j])
			}
		}
	}
	return checked
}

// reasonStrings is a record's reasons as plain strings.
func reasonStrings(r records.SampleLine) []string {
	out := make([]string, len(r.Reasons))
	for i, reason := range r.Reasons {
		out[i] = fmt.Sprint(reason)
	}
	return out
}

// cocoDemo is the demo COCO dataset, copied so that tests may change it.
func cocoDemo(t *testing.T) (annotations, images string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(mustAbs(t, "../../testdata/coco"))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "annotations", "instances_demo.json"), filepath.Join(dir, "images")
}

// cocoBoxes parses the instances file on its own (not with sources/coco):
// every usable non-crowd annotation's box in pixels, by image id, in file
// order, with the class index its category id has among the ids sorted.
func cocoBoxes(t *testing.T, path string) map[uint64][]pixelBox {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Annotations []json.RawMessage `json:"annotations"`
		Categories  []struct {
			ID int64 `json:"id"`
		} `json:"categories"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, c := range doc.Categories {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	out := map[uint64][]pixelBox{}
	for _, a := range doc.Annotations {
		var ann struct {
			ImageID    uint64     `json:"image_id"`
			CategoryID int64      `json:"category_id"`
			BBox       [4]float64 `json:"bbox"`
			IsCrowd    int        `json:"iscrowd"`
		}
		if json.Unmarshal(a, &ann) != nil || ann.IsCrowd == 1 {
			continue // planted schema defects and crowd regions: no training box
		}
		class := slices.Index(ids, ann.CategoryID)
		if class < 0 {
			continue
		}
		b := ann.BBox
		out[ann.ImageID] = append(out[ann.ImageID], pixelBox{b[0], b[1], b[0] + b[2], b[1] + b[3], int32(class)})
	}
	return out
}

// A COCO instances file becomes a warehouse: every planted defect gets its
// reason (the list, written out here in scan order: images by id,
// then the placeholder of the unknown image id), the class table is the
// categories ordered by id with both id and name in the manifest, and every
// kept sample's letterboxed boxes match the annotation.
func TestCOCOEndToEnd(t *testing.T) {
	annotations, images := cocoDemo(t)
	const target = 128
	cfgPath, _ := writeConfig(t, images, map[string]any{
		"source":      map[string]any{"kind": "coco", "root": images, "annotations": annotations},
		"target_size": []int{target, target}, "dtype": "u8", "max_boxes": 8, "shard_target_mb": 0.2,
		"thresholds": map[string]any{"invalid": map[string]any{"max_ratio": 0.5}, "missing": map[string]any{"max_ratio": 0.25}, "empty": map[string]any{}},
	})
	dir, _ := mustBuild(t, cfgPath, nil, "--quiet")
	type want struct {
		frame   uint64
		reasons []string
	}
	var wants []want
	for id := uint64(101); id <= 120; id++ {
		wants = append(wants, want{id, nil})
	}
	wants = append(wants,
		want{201, []string{"unknown_class"}},
		want{202, []string{"crowd_skipped"}},
		want{203, []string{"empty", "crowd_skipped"}},
		want{204, []string{"invalid_bbox"}},
		want{205, []string{"bbox_out_of_bounds"}},
		want{206, nil}, // 0.4 px outside: clamped, clean
		want{207, []string{"missing_file"}},
		want{208, []string{"decode_error"}},
		want{209, nil},
		want{209, []string{"duplicate_image"}}, // the same id again
		want{210, []string{"duplicate_image"}}, // the file of image 101 again
		want{211, []string{"image_size_mismatch"}},
		want{212, []string{"empty"}},
		want{213, []string{"path_escape"}},
		want{214, []string{"bad_schema"}},
		want{999, []string{"unknown_image"}},
	)
	recs := readSamples(t, dir)
	if len(recs) != len(wants) {
		t.Fatalf("%d samples, want %d", len(recs), len(wants))
	}
	kept := 0
	for i, r := range recs {
		w := wants[i]
		got := reasonStrings(r)
		if r.Frame != w.frame || !slices.Equal(got, w.reasons) && len(got)+len(w.reasons) > 0 {
			t.Errorf("sample %d: frame %d reasons %v, want frame %d reasons %v", i, r.Frame, got, w.frame, w.reasons)
		}
		wantKept := !slices.ContainsFunc(w.reasons, func(s string) bool { return s != "empty" && s != "crowd_skipped" })
		if r.Kept != wantKept {
			t.Errorf("sample %d (frame %d): kept %v, want %v", i, r.Frame, r.Kept, wantKept)
		}
		if r.Kept {
			kept++
		}
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, c := range m.Classes {
		if c.ID == nil {
			t.Fatalf("class %+v has no id", c)
		}
		classes = append(classes, fmt.Sprintf("%d:%d:%s", c.Index, *c.ID, c.Name))
	}
	if want := []string{"0:1:person", "1:3:car", "2:7:bicycle", "3:90:toothbrush"}; !slices.Equal(classes, want) {
		t.Errorf("classes %v, want %v", classes, want)
	}
	if m.Samples != int64(kept) || m.Source.Kind != "coco" || !strings.Contains(m.VersionRecipe, "source.annotations=") {
		t.Errorf("manifest: %d samples (want %d), kind %q, recipe %q", m.Samples, kept, m.Source.Kind, m.VersionRecipe)
	}
	byFrame := cocoBoxes(t, annotations)
	wantBoxes := map[string][]pixelBox{}
	for _, r := range recs {
		if r.Kept {
			wantBoxes[r.ImagePath] = byFrame[r.Frame]
		}
	}
	if n := checkLetterboxedBoxes(t, dir, target, recs, wantBoxes); n < 30 {
		t.Errorf("only %d boxes compared", n)
	}

	// An edit of the annotations that keeps size and mtime is still a
	// change: the fingerprint holds the file's sha256. The rerun is stale.
	st, err := os.Stat(annotations)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(annotations)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), `"toothbrush"`, `"toothbrusH"`, 1)
	if edited == string(raw) {
		t.Fatal("the demo has no toothbrush category to edit")
	}
	if err := os.WriteFile(annotations, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(annotations, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet")
	if res.code != exitStale || !strings.Contains(res.stderr, "instances_demo.json was modified (content changed)") {
		t.Fatalf("rebuild after an annotations edit: exit %d\n%s", res.code, res.stderr)
	}
}

// yoloBoxes parses a YOLO label file on its own (not with sources/yolo):
// `class cx cy w h` lines, or `class x1 y1 x2 y2 ...` polygons taken as
// their bounding box, exact duplicate lines once, in pixels of a w x h
// image.
func yoloBoxes(t *testing.T, path string, w, h int) []pixelBox {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	var out []pixelBox
	seen := map[string]bool{}
	for _, line := range strings.FieldsFunc(string(raw), func(r rune) bool { return r == '\n' || r == '\r' }) {
		f := strings.Fields(line)
		if len(f) == 0 || seen[strings.Join(f, " ")] {
			continue
		}
		seen[strings.Join(f, " ")] = true
		v := make([]float64, len(f))
		for i, s := range f {
			if _, err := fmt.Sscan(s, &v[i]); err != nil {
				t.Fatalf("%s: %q", path, line)
			}
		}
		var b pixelBox
		b.class = int32(v[0])
		if len(v) == 5 {
			b.x0, b.y0, b.x1, b.y1 = (v[1]-v[3]/2)*float64(w), (v[2]-v[4]/2)*float64(h), (v[1]+v[3]/2)*float64(w), (v[2]+v[4]/2)*float64(h)
		} else {
			b.x0, b.y0, b.x1, b.y1 = math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
			for i := 1; i+1 < len(v); i += 2 {
				b.x0, b.x1 = min(b.x0, v[i]*float64(w)), max(b.x1, v[i]*float64(w))
				b.y0, b.y1 = min(b.y0, v[i+1]*float64(h)), max(b.y1, v[i+1]*float64(h))
			}
		}
		out = append(out, b)
	}
	return out
}

// An Ultralytics YOLO folder becomes a warehouse: each planted defect of
// the train split gets its reason (the list, written out here by
// image), the class table is data.yaml's names, every kept sample's
// letterboxed boxes match its label file, and the split is part of the
// version while data.yaml's content is part of the fingerprint.
func TestYOLOEndToEnd(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(mustAbs(t, "../../testdata/yolo"))); err != nil {
		t.Fatal(err)
	}
	const target = 96
	build := func(split string) (dir, cfgPath string) {
		cfgPath, _ = writeConfig(t, root, map[string]any{
			"source":      map[string]any{"kind": "yolo", "root": root, "split": split},
			"target_size": []int{target, target}, "dtype": "u8", "max_boxes": 4, "shard_target_mb": 0.1,
			"thresholds": map[string]any{"invalid": map[string]any{"max_ratio": 0.5}, "missing": map[string]any{"max_ratio": 0.25}, "empty": map[string]any{}},
		})
		dir, _ = mustBuild(t, cfgPath, nil, "--quiet")
		return dir, cfgPath
	}
	dir, cfgPath := build("train")
	defects := map[string][]string{
		"images/train/frame_3.jpg":  {"empty"}, // no label file
		"images/train/frame_5.jpg":  {"empty"}, // empty label file
		"images/train/frame_7.jpg":  {"bad_schema"},
		"images/train/frame_9.jpg":  {"unknown_class"},
		"images/train/frame_11.jpg": {"invalid_bbox"},
		"images/train/frame_13.jpg": {"bbox_out_of_bounds"},
		"images/train/frame_19.jpg": {"decode_error"},
	}
	recs := readSamples(t, dir)
	if len(recs) != 30 {
		t.Fatalf("%d train samples, want 30", len(recs))
	}
	wantBoxes := map[string][]pixelBox{}
	for _, r := range recs {
		want := defects[r.ImagePath]
		if got := reasonStrings(r); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("%s: reasons %v, want %v", r.ImagePath, got, want)
		}
		if wantKept := len(want) == 0 || want[0] == "empty"; r.Kept != wantKept {
			t.Errorf("%s: kept %v, want %v", r.ImagePath, r.Kept, wantKept)
		}
		if r.Kept {
			label := strings.TrimSuffix(strings.Replace(r.ImagePath, "images/", "labels/", 1), filepath.Ext(r.ImagePath)) + ".txt"
			wantBoxes[r.ImagePath] = yoloBoxes(t, filepath.Join(root, label), int(r.Width), int(r.Height))
		}
	}
	if n := checkLetterboxedBoxes(t, dir, target, recs, wantBoxes); n < 40 {
		t.Errorf("only %d boxes compared", n)
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	for _, c := range m.Classes {
		classes = append(classes, c.Name)
	}
	if !slices.Equal(classes, []string{"disc", "square", "diamond"}) || !strings.Contains(m.VersionRecipe, `source.split="train"`) {
		t.Errorf("classes %v, recipe %q", classes, m.VersionRecipe)
	}

	// The val split is another version of the same folder.
	val, _ := build("val")
	if vm, err := warehouse.ReadManifest(val); err != nil || vm.Version == m.Version || vm.Samples != 6 {
		t.Fatalf("val split: %v, version %s (train %s), %d samples", err, vm.Version, m.Version, vm.Samples)
	}

	// data.yaml renamed a class, size and mtime kept: the train version is
	// stale (exit 4), named by the content digest.
	yml := filepath.Join(root, "data.yaml")
	st, err := os.Stat(yml)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(yml)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yml, []byte(strings.Replace(string(raw), "- square", "- squaRe", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(yml, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--quiet")
	if res.code != exitStale || !strings.Contains(res.stderr, "data.yaml was modified (content changed)") {
		t.Fatalf("rebuild after a data.yaml edit: exit %d\n%s", res.code, res.stderr)
	}
}
