package yolo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// The shared test helpers (internal/testfiles).
var (
	writeTree = testfiles.WriteTree
	encoded   = testfiles.Image
)

func newSource(t testing.TB, root string, opts Options) *Source {
	t.Helper()
	src, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func scanAll(t testing.TB, src *Source) []*sources.Sample {
	t.Helper()
	var out []*sources.Sample
	if err := src.Scan(context.Background(), func(s *sources.Sample) error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

func fingerprint(t testing.TB, src *Source) []warehouse.FileEntry {
	t.Helper()
	var out []warehouse.FileEntry
	if err := src.Fingerprint(context.Background(), func(f warehouse.FileEntry) error {
		out = append(out, f)
		return nil
	}); err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	return out
}

// names3 is the data.yaml tail most tests use.
const names3 = "names: [cat, dog, bird]\n"

var (
	cat  = sources.ClassKey{ID: 0, HasID: true, Name: "cat"}
	dog  = sources.ClassKey{ID: 1, HasID: true, Name: "dog"}
	bird = sources.ClassKey{ID: 2, HasID: true, Name: "bird"}
)

func TestScanSamples(t *testing.T) {
	root := t.TempDir()
	png64x32 := encoded(t, "png", 64, 32)
	files := map[string][]byte{
		"data.yaml":                 []byte("path: .\ntrain: images/train\n" + names3),
		"images/train/b.jpg":        encoded(t, "jpeg", 32, 16),
		"images/train/text.png":     []byte("not an image at all"),
		"images/train/sig.png":      png64x32[:8],
		"images/train/note.txt":     []byte("not an image name"),
		"images/train/.hid.png":     png64x32,
		"images/train/x.gif":        png64x32, // not in IMG_FORMATS
		"images/train/dir.png":      nil,      // a folder named like an image
		"images/train/.cache/z.png": png64x32,
	}
	labels := map[string]string{
		// image name: label text ("-" for no label file)
		"a01.png":  "0 0.5 0.5 0.5 0.5\n",                                                          // clean: 16,8,48,24
		"a02.png":  "-",                                                                            // no label file
		"a03.png":  "",                                                                             // empty label file
		"a04.png":  " \n\n",                                                                        // blank lines only
		"a05.png":  "1 0.5 0.5 0.25\n0 0.5 0.5 0.5 0.5\n",                                          // malformed line + a good box
		"a06.png":  "2 0.5 0.5 0.5 0.5\n3 0.5 0.5 0.5 0.5\n",                                       // class beyond names
		"a07.png":  "0 0.5 0.5 0 0.5\n",                                                            // w = 0
		"a08.png":  "0 1.5 0.5 0.25 0.5\n",                                                         // far outside
		"a09.png":  "1 0.5 0.5 1.015625 1.03125\n",                                                 // outside by 0.5 px each side: clamped
		"a10.png":  "1 0.5 0.5 1.015625 1.0625\n",                                                  // outside by 1 px in y
		"a11.png":  "2 0.5 0 1 0.5 0.5 1 0 0.5\n",                                                  // polygon: the whole image
		"a12.png":  "2 0.25 0.25 0.75 0.25 0.5 1.5\n",                                              // polygon beyond the bottom
		"a13.png":  "0 0.5 0.5 0.5 0.5\n0 0.5 0.5 0.5 0.5\n",                                       // duplicate line
		"a14.png":  "0 nan 0.5 0.5 0.5\n1 0.25 0.25 0.5 0.5\n",                                     // non-finite + a good box
		"a15.png":  "x 1 2 3 4\n-1 0.5 0.5 0.5 0.5\n0 0.5 0.5 0 0\n0 2 2 0.5 0.5\n1 0.5 0.5 1 1\n", // one of each
		"a16.png":  "0 0 0 0.015625 0.03125\n",                                                     // corners at -0.5 px: clamped
		"text.png": "0 0.5 0.5 0.5 0.5\n1 1.5 0.5 0.5 0.5\n",                                       // undecodable image; bounds in [0,1] only
		"sig.png":  "",
		"b.jpg":    "1 0.25 0.5 0.5 1\n",
		"dir.png":  "0 0.5 0.5 0.5 0.5\n",
	}
	for name, text := range labels {
		if _, ok := files["images/train/"+name]; !ok && name != "dir.png" {
			files["images/train/"+name] = png64x32
		}
		if text != "-" {
			files["labels/train/"+strings.TrimSuffix(name, filepath.Ext(name))+".txt"] = []byte(text)
		}
	}
	writeTree(t, root, files)

	type want struct {
		image   string
		label   string
		w, h    int
		boxes   []sources.Box
		valid   int
		reasons []validate.Reason
	}
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	B := func(c sources.ClassKey, x0, y0, x1, y1 float64) sources.Box {
		return sources.Box{X0: x0, Y0: y0, X1: x1, Y1: y1, Class: c}
	}
	L := func(name string) string { return "labels/train/" + name + ".txt" }
	wants := []want{
		{"images/train/a01.png", L("a01"), 64, 32, []sources.Box{B(cat, 16, 8, 48, 24)}, 1, nil},
		{"images/train/a02.png", "", 64, 32, nil, 0, R(validate.ReasonEmpty)},
		{"images/train/a03.png", L("a03"), 64, 32, nil, 0, R(validate.ReasonEmpty)},
		{"images/train/a04.png", L("a04"), 64, 32, nil, 0, R(validate.ReasonEmpty)},
		{"images/train/a05.png", L("a05"), 64, 32, []sources.Box{B(cat, 16, 8, 48, 24)}, 1, R(validate.ReasonBadSchema)},
		{"images/train/a06.png", L("a06"), 64, 32, []sources.Box{B(bird, 16, 8, 48, 24)}, 1, R(validate.ReasonUnknownClass)},
		{"images/train/a07.png", L("a07"), 64, 32, nil, 0, R(validate.ReasonInvalidBBox)},
		{"images/train/a08.png", L("a08"), 64, 32, nil, 0, R(validate.ReasonBBoxOutOfBounds)},
		{"images/train/a09.png", L("a09"), 64, 32, []sources.Box{B(dog, 0, 0, 64, 32)}, 1, nil},
		{"images/train/a10.png", L("a10"), 64, 32, nil, 0, R(validate.ReasonBBoxOutOfBounds)},
		{"images/train/a11.png", L("a11"), 64, 32, []sources.Box{B(bird, 0, 0, 64, 32)}, 1, nil},
		{"images/train/a12.png", L("a12"), 64, 32, nil, 0, R(validate.ReasonBBoxOutOfBounds)},
		{"images/train/a13.png", L("a13"), 64, 32, []sources.Box{B(cat, 16, 8, 48, 24)}, 1, nil},
		{"images/train/a14.png", L("a14"), 64, 32, []sources.Box{B(dog, 0, 0, 32, 16)}, 1, R(validate.ReasonInvalidBBox)},
		{"images/train/a15.png", L("a15"), 64, 32, []sources.Box{B(dog, 0, 0, 64, 32)}, 1,
			R(validate.ReasonBadSchema, validate.ReasonInvalidBBox, validate.ReasonBBoxOutOfBounds, validate.ReasonUnknownClass)},
		{"images/train/a16.png", L("a16"), 64, 32, []sources.Box{B(cat, 0, 0, 0.5, 0.5)}, 1, nil},
		{"images/train/b.jpg", L("b"), 32, 16, []sources.Box{B(dog, 0, 0, 16, 16)}, 1, nil},
		{"images/train/sig.png", L("sig"), 0, 0, nil, 0, R(validate.ReasonDecodeError, validate.ReasonEmpty)},
		{"images/train/text.png", L("text"), 0, 0, nil, 1, R(validate.ReasonDecodeError, validate.ReasonBBoxOutOfBounds)},
	}
	var log bytes.Buffer
	samples := scanAll(t, newSource(t, root, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}))
	if len(samples) != len(wants) {
		t.Fatalf("%d samples, want %d", len(samples), len(wants))
	}
	if !strings.Contains(log.String(), `msg="duplicate label lines dropped" label=labels/train/a13.txt lines=1`) {
		t.Errorf("log: %s", log.String())
	}
	for i, w := range wants {
		s := samples[i]
		if s.ImagePath != w.image {
			t.Errorf("sample %d is %s, want %s", i, s.ImagePath, w.image)
			continue
		}
		if s.LabelPath != w.label || s.Width != w.w || s.Height != w.h || !reflect.DeepEqual(s.Boxes, w.boxes) ||
			s.ValidBoxes != w.valid || !slices.Equal(s.Reasons, w.reasons) {
			t.Errorf("%s:\n got label %q %dx%d boxes %v valid %d reasons %v\nwant label %q %dx%d boxes %v valid %d reasons %v",
				w.image, s.LabelPath, s.Width, s.Height, s.Boxes, s.ValidBoxes, s.Reasons,
				w.label, w.w, w.h, w.boxes, w.valid, w.reasons)
		}
		if s.Seq != int64(i) || s.Frame != uint64(i) || s.Source != "images/train" || s.SourceIndex != 0 {
			t.Errorf("%s: seq %d frame %d source %s index %d", w.image, s.Seq, s.Frame, s.Source, s.SourceIndex)
		}
	}
	entries := newSourceEntries(t, root)
	wantEntries := []warehouse.SourceEntry{{Index: 0, Name: "images/train", Attributes: map[string]string{
		"split": "train", "kind": "directory", "images": "19", "labels": "18", "missing_labels": "1",
		"empty_labels": "3", "duplicate_lines": "1",
	}}}
	if !reflect.DeepEqual(entries, wantEntries) {
		t.Errorf("Entries:\n got %v\nwant %v", entries, wantEntries)
	}
}

// newSourceEntries scans the dataset at root and returns its Entries.
func newSourceEntries(t *testing.T, root string) []warehouse.SourceEntry {
	t.Helper()
	src := newSource(t, root, Options{})
	if src.Entries() != nil {
		t.Errorf("Entries before Scan: %v", src.Entries())
	}
	scanAll(t, src)
	return src.Entries()
}

func TestScanSizeLimits(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 8, 8)
	small := "0 0.5 0.5 0.5 0.5\n"
	big := small + strings.Repeat("\n", 100)
	writeTree(t, root, map[string][]byte{
		"data.yaml":           []byte("train: images\n" + names3),
		"images/1.png":        img,
		"images/2.png":        img,
		"labels/1.txt":        []byte(small),
		"labels/2.txt":        []byte(big),
		"images/sub/3.png":    img,
		"labels/sub/3.txt":    nil, // a folder: no label file
		"images/sub/4.png":    img,
		"labels/sub/4.txt.gz": []byte("x"),
	})
	none := []validate.Reason(nil)
	tests := []struct {
		name string
		opts Options
		want [4][]validate.Reason
	}{
		{"defaults", Options{}, [4][]validate.Reason{none, none, {validate.ReasonEmpty}, {validate.ReasonEmpty}}},
		{"label limit", Options{MaxLabelBytes: int64(len(small))}, [4][]validate.Reason{none, {validate.ReasonBadSchema}, {validate.ReasonEmpty}, {validate.ReasonEmpty}}},
		{"image limit exact", Options{MaxImageBytes: int64(len(img))}, [4][]validate.Reason{none, none, {validate.ReasonEmpty}, {validate.ReasonEmpty}}},
		{"image limit below", Options{MaxImageBytes: int64(len(img) - 1)}, [4][]validate.Reason{
			{validate.ReasonDecodeError}, {validate.ReasonDecodeError}, {validate.ReasonDecodeError, validate.ReasonEmpty}, {validate.ReasonDecodeError, validate.ReasonEmpty}}},
	}
	for _, tt := range tests {
		samples := scanAll(t, newSource(t, root, tt.opts))
		if len(samples) != 4 {
			t.Fatalf("%s: %d samples", tt.name, len(samples))
		}
		for i, s := range samples {
			if !slices.Equal(s.Reasons, tt.want[i]) {
				t.Errorf("%s: %s: reasons %v, want %v", tt.name, s.ImagePath, s.Reasons, tt.want[i])
			}
		}
		if tt.name == "label limit" && samples[1].LabelPath != "labels/2.txt" {
			t.Errorf("a label over the limit keeps its path: %q", samples[1].LabelPath)
		}
	}
}

func TestNew(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"ok/data.yaml":        []byte("train: images\n" + names3),
		"ok/images/a.png":     encoded(t, "png", 4, 4),
		"ok/list.txt":         []byte("images/a.png\n"),
		"other/coco8.yaml":    []byte("train: images\n" + names3),
		"other/images":        nil,
		"empty/x":             []byte("x"),
		"outside/images":      nil,
		"big/data.yaml":       append([]byte("train: images\n"+names3+"#"), bytes.Repeat([]byte("x"), int(MaxDataYAMLBytes))...),
		"fifo/images":         nil,
		"file/data.yaml":      []byte("path: data.yaml\ntrain: images\n" + names3),
		"notyaml/data.yaml":   []byte("train: [\n"),
		"nested/ds/data.yaml": []byte("train: ../../outside/images\n" + names3),
	})
	yaml := func(body string) string {
		dir := t.TempDir()
		writeTree(t, dir, map[string][]byte{"data.yaml": []byte(body), "images": nil, "list.txt": []byte("")})
		return dir
	}
	tests := []struct {
		name string
		root string
		opts Options
		want string
	}{
		{"missing root", filepath.Join(root, "nope"), Options{}, "yolo: dataset:"},
		{"no data.yaml", filepath.Join(root, "empty"), Options{}, "holds no data.yaml file"},
		{"other yaml", filepath.Join(root, "other"), Options{}, "name the YAML file itself as the root: coco8.yaml"},
		{"bad split", filepath.Join(root, "ok"), Options{Split: "training"}, `split "training": want one of train, val, test`},
		{"negative limit", filepath.Join(root, "ok"), Options{MaxLabelBytes: -1}, "negative"},
		{"too big", filepath.Join(root, "big"), Options{}, "big/data.yaml is larger than"},
		{"not yaml", filepath.Join(root, "notyaml"), Options{}, "notyaml/data.yaml: not valid YAML"},
		{"path is a file", filepath.Join(root, "file"), Options{}, "dataset root (path)"},
		{"absent split", filepath.Join(root, "ok"), Options{Split: "val"}, "ok/data.yaml: no val split"},
		{"missing dir", yaml("train: images/train\n" + names3), Options{}, "data.yaml: train: images/train ("},
		{"missing dir in list", yaml("train: [images, gone]\n" + names3), Options{}, "train: gone ("},
		{"outside", filepath.Join(root, "nested", "ds"), Options{}, "../../outside/images (" + filepath.Join(root, "outside", "images") + ") is outside the dataset root"},
		{"absolute outside", yaml("train: " + filepath.Join(root, "ok", "images") + "\n" + names3), Options{}, "is outside the dataset root"},
		{"path missing", yaml("path: nowhere\ntrain: images\n" + names3), Options{}, "nowhere is not a readable directory"},
		{"names gap", yaml("train: images\nnames: {0: a, 2: b}\n"), Options{}, "data.yaml: line 2: names: 2 classes need the indices 0..1"},
		{"nc mismatch", yaml("train: images\nnc: 4\n" + names3), Options{}, "data.yaml: line 2: names has 3 classes but nc is 4"},
	}
	for _, tt := range tests {
		_, err := New(tt.root, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	if err := os.Symlink("/dev/null", filepath.Join(root, "fifo", "dev")); err == nil {
		writeTree(t, root, map[string][]byte{"fifo/data.yaml": []byte("train: dev\n" + names3)})
		if _, err := New(filepath.Join(root, "fifo"), Options{}); err == nil || !strings.Contains(err.Error(), "neither a directory nor a list file") {
			t.Errorf("device entry: err = %v", err)
		}
	}

	src := newSource(t, filepath.Join(root, "ok"), Options{})
	if src.Kind() != "yolo" || src.opts.Split != "train" || src.opts.MaxLabelBytes != 4<<20 || src.opts.MaxImageBytes != 256<<20 || src.Extras() != nil {
		t.Errorf("defaults: kind %s opts %+v", src.Kind(), src.opts)
	}
	if got, want := src.Classes(), []sources.ClassKey{cat, dog, bird}; !reflect.DeepEqual(got, want) {
		t.Errorf("Classes() = %v, want %v", got, want)
	}
	src.Classes()[0].Name = "changed"
	if src.Classes()[0].Name != "cat" {
		t.Error("Classes() shares its slice")
	}
	// The YAML file itself as root, under any name.
	if src := newSource(t, filepath.Join(root, "other", "coco8.yaml"), Options{}); src.root != filepath.Join(root, "other") {
		t.Errorf("root = %s", src.root)
	}
}

// TestNamesForms checks the class table in every form it may take, and
// that boxes carry exactly the keys Classes lists.
func TestNamesForms(t *testing.T) {
	tests := []struct {
		names string
		want  []string
	}{
		{"names: [a, b, c]\n", []string{"a", "b", "c"}},
		{"names:\n  2: c\n  0: a\n  1: b\n", []string{"a", "b", "c"}},
		{"names: {'0': a, '1': b, '2': c}\nnc: 3\n", []string{"a", "b", "c"}},
		{"nc: 3\n", []string{"class_0", "class_1", "class_2"}},
	}
	for _, tt := range tests {
		root := t.TempDir()
		writeTree(t, root, map[string][]byte{
			"data.yaml":    []byte("train: images\n" + tt.names),
			"images/a.png": encoded(t, "png", 4, 4),
			"labels/a.txt": []byte("2 0.5 0.5 1 1\n0 0.5 0.5 1 1\n"),
		})
		src := newSource(t, root, Options{})
		var want []sources.ClassKey
		for i, n := range tt.want {
			want = append(want, sources.ClassKey{ID: int64(i), HasID: true, Name: n})
		}
		if got := src.Classes(); !reflect.DeepEqual(got, want) {
			t.Errorf("%q: Classes() = %v, want %v", tt.names, got, want)
		}
		s := scanAll(t, src)[0]
		if len(s.Boxes) != 2 || s.Boxes[0].Class != want[2] || s.Boxes[1].Class != want[0] {
			t.Errorf("%q: boxes %v", tt.names, s.Boxes)
		}
	}
}

// TestRootResolution covers path (absent, relative, absolute, elsewhere),
// the YAML as root, the legacy ../ rule and the validation key.
func TestRootResolution(t *testing.T) {
	base := t.TempDir()
	img := encoded(t, "png", 4, 4)
	lab := []byte("0 0.5 0.5 1 1\n")
	writeTree(t, base, map[string][]byte{
		"ds/images/train/a.png":  img,
		"ds/labels/train/a.txt":  lab,
		"ds/images/val/b.png":    img,
		"ds/train/images/c.png":  img, // a Roboflow export
		"ds/train/labels/c.txt":  lab,
		"cfg/relative.yaml":      []byte("path: ../ds\ntrain: images/train\nval: images/val\n" + names3),
		"cfg/absolute.yaml":      []byte("path: " + filepath.Join(base, "ds") + "\ntrain: images/train\n" + names3),
		"ds/data.yaml":           []byte("train: images/train\nvalidation: images/val\ntest: ../train/images\n" + names3),
		"ds/sub/data.yaml":       []byte("path: ..\ntrain: " + filepath.Join(base, "ds", "images", "train") + "\n" + names3),
		"ds/dot.yaml":            []byte("path: .\ntrain: ./images/train/\n" + names3),
		"ds/roboflow/data.yaml":  []byte("train: ../train/images\n" + names3), // not found, and outside after the rule
		"ds/roboflow/train/x.md": []byte("x"),
	})
	tests := []struct {
		root, split   string
		wantRoot      string
		source, image string
		label         string
		yamlRel       string
	}{
		{"cfg/relative.yaml", "train", "ds", "images/train", "images/train/a.png", "labels/train/a.txt", "../cfg/relative.yaml"},
		{"cfg/relative.yaml", "val", "ds", "images/val", "images/val/b.png", "", "../cfg/relative.yaml"},
		{"cfg/absolute.yaml", "train", "ds", "images/train", "images/train/a.png", "labels/train/a.txt", "../cfg/absolute.yaml"},
		{"ds", "train", "ds", "images/train", "images/train/a.png", "labels/train/a.txt", "data.yaml"},
		{"ds", "val", "ds", "images/val", "images/val/b.png", "", "data.yaml"},                        // from validation:
		{"ds", "test", "ds", "train/images", "train/images/c.png", "train/labels/c.txt", "data.yaml"}, // ../ dropped
		{"ds/sub", "train", "ds", "images/train", "images/train/a.png", "labels/train/a.txt", "sub/data.yaml"},
		{"ds/dot.yaml", "train", "ds", "images/train", "images/train/a.png", "labels/train/a.txt", "dot.yaml"},
	}
	for _, tt := range tests {
		src := newSource(t, filepath.Join(base, tt.root), Options{Split: tt.split})
		if src.root != filepath.Join(base, tt.wantRoot) {
			t.Errorf("%s %s: root %s", tt.root, tt.split, src.root)
		}
		samples := scanAll(t, src)
		if len(samples) != 1 || samples[0].Source != tt.source || samples[0].ImagePath != tt.image || samples[0].LabelPath != tt.label {
			t.Errorf("%s %s: samples %+v", tt.root, tt.split, samples)
		}
		if fp := fingerprint(t, src); fp[0].Path != tt.yamlRel || fp[0].SHA256 == "" {
			t.Errorf("%s %s: fingerprint starts with %+v", tt.root, tt.split, fp[0])
		}
	}
	// ../train/images exists, outside this root: the legacy rule does not apply.
	if _, err := New(filepath.Join(base, "ds", "roboflow"), Options{}); err == nil || !strings.Contains(err.Error(), "is outside the dataset root") {
		t.Errorf("an entry outside the root: %v", err)
	}
}

func TestListFiles(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	img := encoded(t, "png", 8, 4)
	writeTree(t, outside, map[string][]byte{"o.png": img})
	writeTree(t, root, map[string][]byte{
		"data.yaml":              []byte("train: [lists/train.txt, images/extra]\nval: val.txt\n" + names3),
		"images/a_10.png":        img,
		"images/a_2.png":         img,
		"labels/a_2.txt":         []byte("0 0.5 0.5 0.5 0.5\n"),
		"lists/images/b.png":     img, // ./ is relative to the list file's folder
		"lists/labels/b.txt":     []byte("1 0.5 0.5 1 1\n"),
		"images/extra/c.png":     img,
		"images/extra/sub/d.png": img,
		"lists/train.txt": []byte("\ufeffimages/a_10.png\r\n" +
			"./images/b.png\n" +
			"  images/a_2.png  \n" +
			"\n" +
			"images/gone.png\n" +
			"images/notes.txt\n" +
			"images/a_2.png\n" + // a duplicate
			filepath.Join(root, "images", "extra", "c.png") + "\n" + // absolute, inside: also a duplicate
			filepath.Join(outside, "o.png") + "\n" + // absolute, outside
			"../escape.png\n" +
			"images/../images/a_10.PNG\n"), // missing (case matters on disk)
		"val.txt": []byte("images/a_2.png\n"),
	})
	src := newSource(t, root, Options{})
	type row struct {
		source  string
		index   int32
		frame   uint64
		image   string
		label   string
		reasons []validate.Reason
	}
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	want := []row{
		{"lists/train.txt", 0, 0, "", "", R(validate.ReasonPathEscape)}, // ../escape.png
		{"lists/train.txt", 0, 1, "", "", R(validate.ReasonPathEscape)}, // the outside absolute path
		{"lists/train.txt", 0, 2, "images/a_2.png", "labels/a_2.txt", nil},
		{"lists/train.txt", 0, 3, "images/a_2.png", "labels/a_2.txt", R(validate.ReasonDuplicateImage)},
		{"lists/train.txt", 0, 4, "images/a_10.PNG", "", R(validate.ReasonMissingFile, validate.ReasonEmpty)},
		{"lists/train.txt", 0, 5, "images/a_10.png", "", R(validate.ReasonEmpty)},
		{"lists/train.txt", 0, 6, "images/extra/c.png", "", R(validate.ReasonEmpty)},
		{"lists/train.txt", 0, 7, "images/gone.png", "", R(validate.ReasonMissingFile, validate.ReasonEmpty)},
		{"lists/train.txt", 0, 8, "lists/images/b.png", "lists/labels/b.txt", nil},
		{"images/extra", 1, 0, "images/extra/c.png", "", R(validate.ReasonDuplicateImage, validate.ReasonEmpty)},
		{"images/extra", 1, 1, "images/extra/sub/d.png", "", R(validate.ReasonEmpty)},
	}
	var got []row
	for _, s := range scanAll(t, src) {
		got = append(got, row{s.Source, s.SourceIndex, s.Frame, s.ImagePath, s.LabelPath, s.Reasons})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("samples:\n got %v\nwant %v", got, want)
	}
	// The escapes sort by the entry as written: "/..." before "../".
	if len(got) > 1 && got[0].image != "" {
		t.Errorf("escaping entries first: %v", got[:2])
	}
	wantEntries := []warehouse.SourceEntry{
		{Index: 0, Name: "lists/train.txt", Attributes: map[string]string{"split": "train", "kind": "list", "images": "9", "labels": "3",
			"missing_labels": "4", "empty_labels": "0", "duplicate_lines": "0", "skipped_entries": "1"}},
		{Index: 1, Name: "images/extra", Attributes: map[string]string{"split": "train", "kind": "directory", "images": "2", "labels": "0",
			"missing_labels": "2", "empty_labels": "0", "duplicate_lines": "0"}},
	}
	if !reflect.DeepEqual(src.Entries(), wantEntries) {
		t.Errorf("Entries:\n got %v\nwant %v", src.Entries(), wantEntries)
	}

	// Fingerprint: data.yaml and the list file with digests, then each
	// sample's image and label once, in scan order.
	var paths []string
	for _, f := range fingerprint(t, src) {
		p := f.Path
		if f.SHA256 != "" {
			p += " sha256"
		}
		paths = append(paths, p)
	}
	wantPaths := []string{"data.yaml sha256", "lists/train.txt sha256",
		"images/a_2.png", "labels/a_2.txt", "images/a_10.png", "images/extra/c.png", "lists/images/b.png", "lists/labels/b.txt",
		"images/extra/sub/d.png"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("fingerprint:\n got %q\nwant %q", paths, wantPaths)
	}

	val := scanAll(t, newSource(t, root, Options{Split: "val"}))
	if len(val) != 1 || val[0].Source != "val.txt" || val[0].ImagePath != "images/a_2.png" {
		t.Errorf("val: %+v", val)
	}
}

func TestDirectoryOrder(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 4, 4)
	writeTree(t, root, map[string][]byte{
		"data.yaml":                  []byte("train: [images/b, images/a, images/a/x]\n" + names3),
		"images/a/f_10.png":          img,
		"images/a/f_9.JPG":           encoded(t, "jpeg", 4, 4),
		"images/a/f_9.jpg.txt":       []byte("not an image"),
		"images/a/x/f_1.webp":        []byte("RIFF"), // an image name that does not decode
		"images/a/x/y/z/f_0.tiff":    []byte("II*\x00"),
		"images/a/.git/f.png":        img,
		"images/a/_tmp/f.png":        img, // underscore folders are read: Ultralytics reads them
		"images/b/images/f.bmp":      []byte("BM"),
		"images/b/f_2.png":           img,
		"images/b/labels/f_2.txt":    []byte("0 0.5 0.5 1 1\n"), // not f_2.png's label
		"labels/b/f_2.txt":           []byte("1 0.5 0.5 1 1\n"),
		"labels/b/labels/f.txt":      []byte("2 0.5 0.5 1 1\n"), // not f.bmp label
		"images/b/labels/f.txt":      []byte("2 0.5 0.5 1 1\n"),
		"labels/a/_tmp/f.txt":        []byte("0 0.5 0.5 1 1\n"),
		"images/a/f_1.png/inner.png": img, // a folder with an image name
	})
	if err := os.Symlink(filepath.Join(root, "images", "b", "f_2.png"), filepath.Join(root, "images", "a", "link.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "nowhere.png"), filepath.Join(root, "images", "a", "dangling.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "images", "b"), filepath.Join(root, "images", "a", "linkdir")); err != nil {
		t.Fatal(err)
	}
	type row struct {
		source, image, label string
		reasons              []validate.Reason
	}
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	E := R(validate.ReasonEmpty)
	want := []row{
		{"images/b", "images/b/f_2.png", "labels/b/f_2.txt", nil},
		{"images/b", "images/b/images/f.bmp", "images/b/labels/f.txt", R(validate.ReasonDecodeError)},
		{"images/a", "images/a/_tmp/f.png", "labels/a/_tmp/f.txt", nil},
		{"images/a", "images/a/dangling.png", "", R(validate.ReasonMissingFile, validate.ReasonEmpty)},
		{"images/a", "images/a/f_1.png/inner.png", "", E},
		{"images/a", "images/a/f_9.JPG", "", E},
		{"images/a", "images/a/f_10.png", "", E},
		{"images/a", "images/a/link.png", "", E},
		{"images/a", "images/a/x/f_1.webp", "", R(validate.ReasonDecodeError, validate.ReasonEmpty)},
		{"images/a", "images/a/x/y/z/f_0.tiff", "", R(validate.ReasonDecodeError, validate.ReasonEmpty)},
		{"images/a/x", "images/a/x/f_1.webp", "", R(validate.ReasonDecodeError, validate.ReasonDuplicateImage, validate.ReasonEmpty)},
		{"images/a/x", "images/a/x/y/z/f_0.tiff", "", R(validate.ReasonDecodeError, validate.ReasonDuplicateImage, validate.ReasonEmpty)},
	}
	var got []row
	for _, s := range scanAll(t, newSource(t, root, Options{})) {
		got = append(got, row{s.Source, s.ImagePath, s.LabelPath, s.Reasons})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("samples:\n got %v\nwant %v", got, want)
	}
}

func TestScanNoImages(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"data.yaml":        []byte("train: images\n" + names3),
		"images/notes.txt": []byte("x"),
	})
	err := newSource(t, root, Options{}).Scan(context.Background(), func(*sources.Sample) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "the train split holds no images") {
		t.Errorf("err = %v", err)
	}
}

func TestScanStops(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 4, 4)
	writeTree(t, root, map[string][]byte{"data.yaml": []byte("train: images\n" + names3), "images/1.png": img, "images/2.png": img})
	src := newSource(t, root, Options{})
	stop := errors.New("stop")
	n := 0
	if err := src.Scan(context.Background(), func(*sources.Sample) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("callback error: err %v after %d samples", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.Scan(ctx, func(*sources.Sample) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := src.Fingerprint(ctx, func(warehouse.FileEntry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled fingerprint: %v", err)
	}
}

func TestScanUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	root := t.TempDir()
	img := encoded(t, "png", 4, 4)
	writeTree(t, root, map[string][]byte{"data.yaml": []byte("train: images\n" + names3), "images/1.png": img, "labels/1.txt": []byte("0 0.5 0.5 1 1\n")})
	if err := os.Chmod(filepath.Join(root, "labels", "1.txt"), 0); err != nil {
		t.Fatal(err)
	}
	err := newSource(t, root, Options{}).Scan(context.Background(), func(*sources.Sample) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "yolo: label labels/1.txt") {
		t.Errorf("err = %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 4, 4)
	yamlText := []byte("train: [images/b, images/a]\n" + names3)
	writeTree(t, root, map[string][]byte{
		"data.yaml":       yamlText,
		"images/a/1.png":  img,
		"images/a/2.png":  img,
		"labels/a/1.txt":  []byte("0 0.5 0.5 1 1\n"),
		"labels/a/3.txt":  []byte("an orphan label: not read"),
		"images/b/10.png": img,
		"images/b/9.png":  []byte("broken"),
		"labels/b/9.txt":  []byte(""),
		"labels/b/10.txt": nil, // a folder
		"images/b/x.txt":  []byte("not an image"),
	})
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	for _, p := range []string{"data.yaml", "images/a/1.png", "labels/a/1.txt"} {
		if err := os.Chtimes(filepath.Join(root, p), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	src := newSource(t, root, Options{})
	got := fingerprint(t, src)
	sum := sha256.Sum256(yamlText)
	want := []warehouse.FileEntry{
		{Path: "data.yaml", Size: int64(len(yamlText)), MtimeNs: mtime.UnixNano(), SHA256: hex.EncodeToString(sum[:])},
		{Path: "images/b/9.png", Size: 6},
		{Path: "labels/b/9.txt", Size: 0},
		{Path: "images/b/10.png", Size: int64(len(img))},
		{Path: "images/a/1.png", Size: int64(len(img)), MtimeNs: mtime.UnixNano()},
		{Path: "labels/a/1.txt", Size: 14, MtimeNs: mtime.UnixNano()},
		{Path: "images/a/2.png", Size: int64(len(img))},
	}
	if len(got) != len(want) {
		t.Fatalf("fingerprint:\n got %+v\nwant %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if want[i].MtimeNs == 0 {
			g.MtimeNs = 0 // not pinned
		}
		if g != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// Every file Scan reads is listed, in scan order.
	var scanned []string
	for _, s := range scanAll(t, src) {
		scanned = append(scanned, s.ImagePath)
		if s.LabelPath != "" {
			scanned = append(scanned, s.LabelPath)
		}
	}
	var listed []string
	for _, f := range got[1:] {
		listed = append(listed, f.Path)
	}
	if !slices.Equal(scanned, listed) {
		t.Errorf("scan reads %q, fingerprint lists %q", scanned, listed)
	}

	// An edit of data.yaml that keeps size and mtime changes the digest.
	edited := bytes.Replace(yamlText, []byte("cat"), []byte("cow"), 1)
	if err := os.WriteFile(filepath.Join(root, "data.yaml"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(root, "data.yaml"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	again := fingerprint(t, src)
	if again[0].Size != got[0].Size || again[0].MtimeNs != got[0].MtimeNs || again[0].SHA256 == got[0].SHA256 {
		t.Errorf("edited data.yaml: %+v, before %+v", again[0], got[0])
	}
}

func TestReadImage(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 4, 4)
	writeTree(t, root, map[string][]byte{"data.yaml": []byte("train: images\n" + names3), "images/1.png": img})
	src := newSource(t, root, Options{})
	s := scanAll(t, src)[0]
	got, err := src.ReadImage(s)
	if err != nil || !bytes.Equal(got.Encoded, img) || got.Pixels != nil {
		t.Errorf("ReadImage: %v, %d bytes", err, len(got.Encoded))
	}
	for _, p := range []string{"", "../x.png", "/etc/hostname"} {
		if _, err := src.ReadImage(&sources.Sample{ImagePath: p}); err == nil {
			t.Errorf("ReadImage(%q) reads", p)
		}
	}
	small := newSource(t, root, Options{MaxImageBytes: int64(len(img) - 1)})
	if _, err := small.ReadImage(s); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadImage over the limit: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "images", "1.png")); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ReadImage(s); err == nil || !strings.Contains(err.Error(), "images/1.png") {
		t.Errorf("ReadImage of a removed file: %v", err)
	}
}

// TestSymlinkedSplit reads a split directory that is a symbolic link, and
// its images by their path through the link.
func TestSymlinkedSplit(t *testing.T) {
	root := t.TempDir()
	store := t.TempDir()
	writeTree(t, store, map[string][]byte{"a.png": encoded(t, "png", 4, 4)})
	writeTree(t, root, map[string][]byte{
		"data.yaml":          []byte("train: images/train\n" + names3),
		"images":             nil,
		"labels/train/a.txt": []byte("1 0.5 0.5 1 1\n"),
	})
	if err := os.Symlink(store, filepath.Join(root, "images", "train")); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, root, Options{})
	s := scanAll(t, src)
	if len(s) != 1 || s[0].ImagePath != "images/train/a.png" || s[0].LabelPath != "labels/train/a.txt" || s[0].Reasons != nil {
		t.Fatalf("samples %+v", s)
	}
	if fp := fingerprint(t, src); len(fp) != 3 || fp[1].Path != "images/train/a.png" || fp[2].Path != "labels/train/a.txt" {
		t.Errorf("fingerprint %+v", fp)
	}
}
