package capture

import (
	"bytes"
	"context"
	"errors"
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

func scanAll(t *testing.T, src *Source) []*sources.Sample {
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

func newSource(t *testing.T, root string, opts Options) *Source {
	t.Helper()
	src, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestRunOrder(t *testing.T) {
	root := t.TempDir()
	label := []byte(`{"frame_id": 0, "labels": []}`)
	writeTree(t, root, map[string][]byte{
		"run_10/labels/a.json":            label,
		"run_2/labels/a.json":             label,
		"run_1700000000000/labels/a.json": label,
		"run_02/labels/a.json":            label,
		"run_3/labels":                    nil, // a run without samples
		"notes/images/x.png":              encoded(t, "png", 2, 2),
		"_tmp/labels/a.json":              label,
		".cache/labels/a.json":            label,
		"run_4":                           []byte("a file, not a folder"),
		"run_5/labels":                    []byte("labels is a file"),
		"labels/a.json":                   label, // the root is never a run
	})
	if err := os.Symlink(filepath.Join(root, "run_2"), filepath.Join(root, "run_6")); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, root, Options{})
	runs, err := src.runs()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run_02", "run_2", "run_3", "run_10", "run_1700000000000"}
	if !slices.Equal(runs, want) {
		t.Errorf("runs = %q, want %q", runs, want)
	}
	var got []string
	for _, s := range scanAll(t, src) {
		got = append(got, s.Source)
		if int(s.SourceIndex) != slices.Index(want, s.Source) {
			t.Errorf("%s: SourceIndex %d, want %d", s.Source, s.SourceIndex, slices.Index(want, s.Source))
		}
	}
	if wantSamples := []string{"run_02", "run_2", "run_10", "run_1700000000000"}; !slices.Equal(got, wantSamples) {
		t.Errorf("sample sources = %q, want %q", got, wantSamples)
	}
}

func TestFrameOrder(t *testing.T) {
	root := t.TempDir()
	lab := func(frame string) []byte { return []byte(`{"frame_id": ` + frame + `, "labels": []}`) }
	writeTree(t, root, map[string][]byte{
		"r/labels/a.json":          lab("5"),
		"r/labels/b.json":          lab("1"),
		"r/labels/frame_10.json":   lab("3"),
		"r/labels/frame_9.json":    lab("3"),
		"r/labels/noframe_10.json": lab(`"x"`),
		"r/labels/noframe_2.json":  []byte(`{"labels": []}`),
		"r/labels/broken_1.json":   []byte(`{"frame_id": 0`),
		"r/labels/array_0.json":    []byte(`[]`),
		"r/labels/z.json":          lab("0"),
		"r/labels/.hidden.json":    lab("0"),
		"r/labels/notes.txt":       lab("0"),
		"r/labels/dir.json":        nil,
	})
	samples := scanAll(t, newSource(t, root, Options{}))
	type row struct {
		name  string
		frame uint64
		dup   bool
	}
	want := []row{
		{"z.json", 0, false},
		{"b.json", 1, false},
		{"frame_9.json", 3, false},
		{"frame_10.json", 3, true},
		{"a.json", 5, false},
		{"noframe_2.json", 0, false},
		{"noframe_10.json", 0, false},
		{"array_0.json", 0, false},
		{"broken_1.json", 0, false},
	}
	var got []row
	for i, s := range samples {
		got = append(got, row{filepath.Base(s.LabelPath), s.Frame, slices.Contains(s.Reasons, validate.ReasonDuplicateFrame)})
		if s.Seq != int64(i) {
			t.Errorf("sample %d has Seq %d", i, s.Seq)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order:\n got %v\nwant %v", got, want)
	}
}

func TestScanSamples(t *testing.T) {
	root := t.TempDir()
	png64x48 := encoded(t, "png", 64, 48)
	writeTree(t, root, map[string][]byte{
		"run_1/images/a.png":      png64x48,
		"run_1/images/b.jpg":      encoded(t, "jpeg", 30, 20),
		"run_1/images/c.gif":      encoded(t, "gif", 9, 7),
		"run_1/images/d.bmp":      encoded(t, "bmp", 5, 3),
		"run_1/images/e.tiff":     encoded(t, "tiff", 4, 6),
		"run_1/images/text.png":   []byte("not an image at all"),
		"run_1/images/sig.png":    png64x48[:8],            // signature only: truncated header
		"run_1/images/ihdr.png":   png64x48[:20],           // cut inside IHDR
		"run_1/images/dir.png":    nil,                     // a folder
		"run_1/outside.png":       encoded(t, "png", 3, 3), // in the run, not in images/
		"outside.png":             encoded(t, "png", 3, 3), // outside the run
		"run_0/labels/first.json": []byte(`{"frame_id": 99, "image": "x.png", "image_present": false, "labels": []}`),
	})
	labels := map[string]string{
		// name: JSON
		"f00.json": `{"frame_id": 0, "sim_time": 0.25, "unix_time": 1700000000.5, "image": "images/a.png", "labels": [{"bbox_px": [1, 2, 30, 40], "class_name": "polyp"}]}`,
		"f01.json": `{"frame_id": 1, "image": "images/a.png", "labels": [{"bbox_norm": [0.25, 0.5, 0.75, 1]}]}`,
		"f02.json": `{"frame_id": 2, "image": "images/a.png", "labels": [{"bbox_px": [-0.5, 0, 64.5, 48.25]}]}`,
		"f03.json": `{"frame_id": 3, "image": "images/a.png", "labels": [{"bbox_px": [1, 1, 2, 2], "bbox_norm": [0.5, 0.5, 1, 1]}]}`,
		"f04.json": `{"frame_id": 4, "image": "images/a.png", "labels": [{"bbox_px": [5, 1, 2, 2], "bbox_norm": [0.5, 0.5, 1, 1]}]}`,
		"f05.json": `{"frame_id": 5, "image": "images/a.png", "labels": [{"bbox_px": [0, 0, 65, 10]}, {"bbox_norm": [0, 0, 1.5, 1]}, {"bbox_px": [1, 1, 3, 3]}, {}]}`,
		"f06.json": `{"frame_id": 6, "image": "images/a.png", "image_present": false, "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f07.json": `{"frame_id": 7, "image": "", "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f08.json": `{"frame_id": 8, "labels": []}`,
		"f09.json": `{"frame_id": 9, "image": ["images/a.png"], "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f10.json": `{"frame_id": 10, "image": "../outside.png", "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f11.json": `{"frame_id": 11, "image": "/etc/hostname", "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f12.json": `{"frame_id": 12, "image": "images/../outside.png", "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f13.json": `{"frame_id": 13, "image": "images/nope.png", "labels": [{"bbox_norm": [0.1, 0.1, 0.2, 0.2]}, {"bbox_norm": [0.1, 0.1, 1.2, 0.2]}, {"bbox_px": [5000, 1, 6000, 2]}]}`,
		"f14.json": `{"frame_id": 14, "image": "images/dir.png", "labels": []}`,
		"f15.json": `{"frame_id": 15, "image": "images/text.png", "labels": [{"bbox_px": [1, 1, 3, 3]}]}`,
		"f16.json": `{"frame_id": 16, "image": "images/sig.png", "labels": []}`,
		"f17.json": `{"frame_id": 17, "image": "images/ihdr.png", "labels": []}`,
		"f18.json": `{"frame_id": 18, "image": "images/b.jpg", "labels": [{"bbox_px": [0, 0, 30, 20], "class_id": 2}]}`,
		"f19.json": `{"frame_id": 19, "image": "images/c.gif", "labels": [{"bbox_norm": [0, 0, 1, 1]}]}`,
		"f20.json": `{"frame_id": 20, "image": "images/d.bmp", "labels": []}`,
		"f21.json": `{"frame_id": 21, "image": "images/e.tiff", "labels": []}`,
		// Everything at once: duplicate frame, bad schema, missing file,
		// an invalid box, an out-of-bounds box.
		"f22.json": `{"frame_id": 21, "camera_active": "yes", "image": "images/gone.png", "labels": [{"bbox_px": [3, 3, 1, 1]}, {"bbox_norm": [0, 0, 2, 1]}]}`,
		"f23.json": `{"frame_id": 23, "image": "images/a.png", "labels": [{"bbox_px": [1, 1, 3, 3], "center_world": [1]}, {"bbox_px": [2, 2, 4, 4]}]}`,
		"f24.json": `this is not json`,
	}
	for name, data := range labels {
		writeTree(t, root, map[string][]byte{"run_1/labels/" + name: []byte(data)})
	}

	type want struct {
		label   string
		image   string
		w, h    int
		boxes   []sources.Box
		valid   int
		reasons []validate.Reason
	}
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	B := func(x0, y0, x1, y1 float64) sources.Box { return sources.Box{X0: x0, Y0: y0, X1: x1, Y1: y1} }
	wants := []want{
		{"run_0/labels/first.json", "run_0/x.png", 0, 0, nil, 0, R(validate.ReasonMissingImage, validate.ReasonEmpty)},
		{"run_1/labels/f00.json", "run_1/images/a.png", 64, 48, []sources.Box{{X0: 1, Y0: 2, X1: 30, Y1: 40, Class: sources.ClassKey{Name: "polyp"}}}, 1, nil},
		{"run_1/labels/f01.json", "run_1/images/a.png", 64, 48, []sources.Box{B(16, 24, 48, 48)}, 1, nil},
		{"run_1/labels/f02.json", "run_1/images/a.png", 64, 48, []sources.Box{B(0, 0, 64, 48)}, 1, nil},
		{"run_1/labels/f03.json", "run_1/images/a.png", 64, 48, []sources.Box{B(1, 1, 2, 2)}, 1, nil},
		{"run_1/labels/f04.json", "run_1/images/a.png", 64, 48, nil, 0, R(validate.ReasonInvalidBBox)},
		{"run_1/labels/f05.json", "run_1/images/a.png", 64, 48, []sources.Box{B(1, 1, 3, 3)}, 1, R(validate.ReasonInvalidBBox, validate.ReasonBBoxOutOfBounds)},
		{"run_1/labels/f06.json", "run_1/images/a.png", 0, 0, nil, 1, R(validate.ReasonMissingImage)},
		{"run_1/labels/f07.json", "", 0, 0, nil, 1, R(validate.ReasonMissingImage)},
		{"run_1/labels/f08.json", "", 0, 0, nil, 0, R(validate.ReasonMissingImage, validate.ReasonEmpty)},
		{"run_1/labels/f09.json", "", 0, 0, nil, 1, R(validate.ReasonBadSchema)},
		{"run_1/labels/f10.json", "", 0, 0, nil, 1, R(validate.ReasonPathEscape)},
		{"run_1/labels/f11.json", "", 0, 0, nil, 1, R(validate.ReasonPathEscape)},
		{"run_1/labels/f12.json", "run_1/outside.png", 3, 3, []sources.Box{B(1, 1, 3, 3)}, 1, nil},
		{"run_1/labels/f13.json", "run_1/images/nope.png", 0, 0, nil, 2, R(validate.ReasonMissingFile, validate.ReasonBBoxOutOfBounds)},
		{"run_1/labels/f14.json", "run_1/images/dir.png", 0, 0, nil, 0, R(validate.ReasonMissingFile, validate.ReasonEmpty)},
		{"run_1/labels/f15.json", "run_1/images/text.png", 0, 0, nil, 1, R(validate.ReasonDecodeError)},
		{"run_1/labels/f16.json", "run_1/images/sig.png", 0, 0, nil, 0, R(validate.ReasonDecodeError, validate.ReasonEmpty)},
		{"run_1/labels/f17.json", "run_1/images/ihdr.png", 0, 0, nil, 0, R(validate.ReasonDecodeError, validate.ReasonEmpty)},
		{"run_1/labels/f18.json", "run_1/images/b.jpg", 30, 20, []sources.Box{{X1: 30, Y1: 20, Class: sources.ClassKey{ID: 2, HasID: true}}}, 1, nil},
		{"run_1/labels/f19.json", "run_1/images/c.gif", 9, 7, []sources.Box{B(0, 0, 9, 7)}, 1, nil},
		{"run_1/labels/f20.json", "run_1/images/d.bmp", 5, 3, nil, 0, R(validate.ReasonEmpty)},
		{"run_1/labels/f21.json", "run_1/images/e.tiff", 4, 6, nil, 0, R(validate.ReasonEmpty)},
		{"run_1/labels/f22.json", "run_1/images/gone.png", 0, 0, nil, 0,
			R(validate.ReasonMissingFile, validate.ReasonBadSchema, validate.ReasonDuplicateFrame, validate.ReasonInvalidBBox, validate.ReasonBBoxOutOfBounds)},
		{"run_1/labels/f23.json", "run_1/images/a.png", 64, 48, []sources.Box{B(2, 2, 4, 4)}, 1, R(validate.ReasonBadSchema)},
		{"run_1/labels/f24.json", "", 0, 0, nil, 0, R(validate.ReasonBadSchema)},
	}
	samples := scanAll(t, newSource(t, root, Options{}))
	if len(samples) != len(wants) {
		t.Fatalf("%d samples, want %d", len(samples), len(wants))
	}
	for i, w := range wants {
		s := samples[i]
		if s.LabelPath != w.label {
			t.Errorf("sample %d is %s, want %s", i, s.LabelPath, w.label)
			continue
		}
		if s.ImagePath != w.image || s.Width != w.w || s.Height != w.h || !reflect.DeepEqual(s.Boxes, w.boxes) ||
			s.ValidBoxes != w.valid || !slices.Equal(s.Reasons, w.reasons) {
			t.Errorf("%s:\n got image %q %dx%d boxes %v valid %d reasons %v\nwant image %q %dx%d boxes %v valid %d reasons %v",
				w.label, s.ImagePath, s.Width, s.Height, s.Boxes, s.ValidBoxes, s.Reasons,
				w.image, w.w, w.h, w.boxes, w.valid, w.reasons)
		}
		if s.Seq != int64(i) {
			t.Errorf("%s: Seq %d, want %d", w.label, s.Seq, i)
		}
		wantIndex := int32(1)
		if i == 0 {
			wantIndex = 0
		}
		if s.SourceIndex != wantIndex || s.Source != strings.Split(w.label, "/")[0] {
			t.Errorf("%s: source %s index %d", w.label, s.Source, s.SourceIndex)
		}
	}
	// Fields read from the first label.
	if s := samples[1]; s.Frame != 0 || s.SimTime != 0.25 || s.UnixTimeNs != 1700000000500000000 {
		t.Errorf("f00: frame %d sim_time %v unix_time_ns %d", s.Frame, s.SimTime, s.UnixTimeNs)
	}
	if s := samples[0]; s.Frame != 99 {
		t.Errorf("first.json: frame %d, want 99", s.Frame)
	}
}

func TestScanSizeLimits(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 8, 8)
	small := `{"frame_id": 1, "image": "a.png", "labels": []}`
	big := `{"frame_id": 2, "image": "a.png", "labels": [], "pad": "` + strings.Repeat("x", 200) + `"}`
	writeTree(t, root, map[string][]byte{
		"r/a.png":         img,
		"r/labels/1.json": []byte(small),
		"r/labels/2.json": []byte(big),
	})
	tests := []struct {
		name      string
		opts      Options
		wantSmall []validate.Reason
		wantBig   []validate.Reason
	}{
		{"defaults", Options{}, []validate.Reason{validate.ReasonEmpty}, []validate.Reason{validate.ReasonEmpty}},
		{"label limit", Options{MaxLabelBytes: int64(len(small))}, []validate.Reason{validate.ReasonEmpty}, []validate.Reason{validate.ReasonBadSchema}},
		{"image limit exact", Options{MaxImageBytes: int64(len(img))}, []validate.Reason{validate.ReasonEmpty}, []validate.Reason{validate.ReasonEmpty}},
		{"image limit below", Options{MaxImageBytes: int64(len(img) - 1)}, []validate.Reason{validate.ReasonDecodeError, validate.ReasonEmpty}, []validate.Reason{validate.ReasonDecodeError, validate.ReasonEmpty}},
	}
	for _, tt := range tests {
		samples := scanAll(t, newSource(t, root, tt.opts))
		if len(samples) != 2 {
			t.Fatalf("%s: %d samples", tt.name, len(samples))
		}
		if !slices.Equal(samples[0].Reasons, tt.wantSmall) || !slices.Equal(samples[1].Reasons, tt.wantBig) {
			t.Errorf("%s: reasons %v and %v, want %v and %v", tt.name, samples[0].Reasons, samples[1].Reasons, tt.wantSmall, tt.wantBig)
		}
	}
}

func TestLabelKeysOption(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"r/a.png":         encoded(t, "png", 8, 8),
		"r/labels/1.json": []byte(`{"frame_id": 1, "image": "a.png", "objects": [{"bbox_px": [1, 1, 2, 2]}], "labels": []}`),
	})
	tests := []struct {
		keys  []string
		valid int
		want  []validate.Reason
	}{
		{nil, 0, []validate.Reason{validate.ReasonEmpty}},                          // defaults: labels
		{[]string{"objects"}, 1, nil},                                              // configured key
		{[]string{"polyp_labels"}, 0, []validate.Reason{validate.ReasonBadSchema}}, // no list under the key
	}
	for _, tt := range tests {
		s := scanAll(t, newSource(t, root, Options{LabelKeys: tt.keys}))[0]
		if s.ValidBoxes != tt.valid || !slices.Equal(s.Reasons, tt.want) {
			t.Errorf("keys %q: valid %d reasons %v, want %d %v", tt.keys, s.ValidBoxes, s.Reasons, tt.valid, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "f")
	writeTree(t, root, map[string][]byte{"f": []byte("x")})
	tests := []struct {
		name string
		root string
		opts Options
		want string
	}{
		{"missing root", filepath.Join(root, "nope"), Options{}, "dataset root"},
		{"file root", file, Options{}, "not a directory"},
		{"no keys", root, Options{LabelKeys: []string{}}, "label keys"},
		{"empty key", root, Options{LabelKeys: []string{"labels", ""}}, "label keys"},
		{"negative limit", root, Options{MaxImageBytes: -1}, "negative"},
	}
	for _, tt := range tests {
		_, err := New(tt.root, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	src := newSource(t, root, Options{})
	if src.Kind() != "capture" {
		t.Errorf("Kind() = %q", src.Kind())
	}
	if !slices.Equal(src.opts.LabelKeys, []string{"polyp_labels", "labels"}) || src.opts.MaxLabelBytes != 16<<20 || src.opts.MaxImageBytes != 256<<20 {
		t.Errorf("defaults = %+v", src.opts)
	}
}

func TestScanStops(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"r/labels/1.json": []byte(`{"frame_id": 1, "labels": []}`),
		"r/labels/2.json": []byte(`{"frame_id": 2, "labels": []}`),
	})
	src := newSource(t, root, Options{})
	stop := errors.New("stop")
	n := 0
	err := src.Scan(context.Background(), func(*sources.Sample) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Scan with failing fn: err %v after %d samples, want stop after 1", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = src.Scan(ctx, func(*sources.Sample) error { t.Error("fn called after cancel"); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with cancelled context: %v", err)
	}
}

func TestScanUnreadableLabel(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"r/labels/1.json": []byte(`{}`)})
	if err := os.Chmod(filepath.Join(root, "r/labels/1.json"), 0); err != nil {
		t.Fatal(err)
	}
	err := newSource(t, root, Options{}).Scan(context.Background(), func(*sources.Sample) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "r/labels/1.json") {
		t.Errorf("Scan of an unreadable label = %v, want an error naming it", err)
	}
}

func TestFingerprint(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{
		"run_10/run_manifest.json":   []byte(`{"schema_version": 1}`),
		"run_10/labels/b.json":       []byte(`{"frame_id": 1, "image": "images/a.png", "labels": []}`),
		"run_10/labels/a.json":       []byte(`{"frame_id": 2, "image": "extra/x.png", "labels": []}`),
		"run_10/labels/c.json":       []byte(`{"frame_id": 3, "image": "images/sub/y.png", "labels": []}`),
		"run_10/labels/d.json":       []byte(`{"frame_id": 4, "image": "images/link.png", "labels": []}`),
		"run_10/labels/e.json":       []byte(`{"frame_id": 5, "image": "../escape.png", "labels": []}`),
		"run_10/labels/f.json":       []byte(`{"frame_id": 6, "image": "extra/x.png", "image_present": false, "labels": []}`),
		"run_10/labels/g.json":       []byte(`{"frame_id": 7, "image": "extra/gone.png", "labels": []}`),
		"run_10/labels/h.json":       []byte(`{"frame_id": 8, "image": "./extra/x.png", "labels": []}`),
		"run_10/labels/.hidden.json": []byte(`{"frame_id": 9, "image": "extra/hidden.png", "labels": []}`),
		"run_10/images/a.png":        []byte("aaaa"),
		"run_10/images/sub/y.png":    []byte("yy"),
		"run_10/extra/x.png":         []byte("xxx"),
		"run_10/extra/hidden.png":    []byte("h"),
		"run_10/overlays/o.png":      []byte("o"),
		"run_10/notes.txt":           []byte("n"),
		"run_2/labels/z.json":        []byte(`not json`),
		"escape.png":                 []byte("e"),
		"notes/images/q.png":         []byte("q"),
	})
	if err := os.Symlink("a.png", filepath.Join(root, "run_10/images/link.png")); err != nil {
		t.Fatal(err)
	}
	// Distinct, known modification times.
	base := time.Date(2024, 6, 11, 12, 0, 0, 123456789, time.UTC)
	var i int
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			i++
			if err := os.Chtimes(p, base, base.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	var got []warehouse.FileEntry
	if err := newSource(t, root, Options{}).Fingerprint(context.Background(), func(fi warehouse.FileEntry) error {
		got = append(got, fi)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{
		"run_2/labels/z.json",
		"run_10/run_manifest.json",
		"run_10/labels/.hidden.json",
		"run_10/labels/a.json",
		"run_10/labels/b.json",
		"run_10/labels/c.json",
		"run_10/labels/d.json",
		"run_10/labels/e.json",
		"run_10/labels/f.json",
		"run_10/labels/g.json",
		"run_10/labels/h.json",
		"run_10/images/a.png",
		"run_10/extra/x.png",
		"run_10/images/link.png", // a symbolic link: its target's size and time
		"run_10/images/sub/y.png",
	}
	var gotPaths []string
	for _, fi := range got {
		gotPaths = append(gotPaths, fi.Path)
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(fi.Path)))
		if err != nil {
			t.Errorf("%s: %v", fi.Path, err)
			continue
		}
		if fi.Size != st.Size() || fi.MtimeNs != st.ModTime().UnixNano() {
			t.Errorf("%s: size %d mtime %d, want %d %d", fi.Path, fi.Size, fi.MtimeNs, st.Size(), st.ModTime().UnixNano())
		}
	}
	if !slices.Equal(gotPaths, wantPaths) {
		t.Errorf("paths:\n got %q\nwant %q", gotPaths, wantPaths)
	}
	if got[11].Size != 4 || got[13].Size != 4 || got[12].Size != 3 {
		t.Errorf("sizes of a.png, link.png, x.png = %d %d %d, want 4 4 3", got[11].Size, got[13].Size, got[12].Size)
	}
}

func TestReadImage(t *testing.T) {
	root := t.TempDir()
	img := encoded(t, "png", 8, 8)
	writeTree(t, root, map[string][]byte{"r/images/a.png": img, "secret.png": img})
	src := newSource(t, root, Options{})
	im, err := src.ReadImage(&sources.Sample{ImagePath: "r/images/a.png"})
	data := im.Encoded
	if err != nil || !bytes.Equal(data, img) {
		t.Errorf("ReadImage = %d bytes, %v; want the file's %d bytes", len(data), err, len(img))
	}
	capped := newSource(t, root, Options{MaxImageBytes: int64(len(img) - 1)})
	tests := []struct {
		name string
		src  *Source
		path string
		want string
	}{
		{"too large", capped, "r/images/a.png", "r/images/a.png is larger than"},
		{"absent", src, "r/images/b.png", "r/images/b.png"},
		{"no path", src, "", "no readable image path"},
		{"escaping path", src, "../secret.png", "no readable image path"},
		{"absolute path", src, filepath.Join(root, "secret.png"), "no readable image path"},
	}
	for _, tt := range tests {
		_, err := tt.src.ReadImage(&sources.Sample{ImagePath: tt.path, LabelPath: "r/labels/x.json"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}
