package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/scan.jsonl from the current scan")

// demoRoot is the demo dataset written by testdata/capturegen.
const demoRoot = "../../testdata/capture"

// demoExpectation is what testdata/capture/README.md promises for one
// label, written out by hand from the generator's table.
type demoExpectation struct {
	label   string
	reasons []validate.Reason
}

func demoOrder() []demoExpectation {
	var out []demoExpectation
	add := func(run string, files []int, reasons map[int][]validate.Reason) {
		for _, f := range files {
			out = append(out, demoExpectation{fmt.Sprintf("%s/labels/frame_%05d.json", run, f), reasons[f]})
		}
	}
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	add("run_2", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, map[int][]validate.Reason{
		3: R(validate.ReasonEmpty),
		5: R(validate.ReasonMissingImage),
		7: R(validate.ReasonBadSchema),
		9: R(validate.ReasonDuplicateFrame),
	})
	// frame_00008.json is cut-off JSON: unparseable labels come last.
	add("run_10", []int{0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 8}, map[int][]validate.Reason{
		2: R(validate.ReasonMissingFile),
		3: R(validate.ReasonInvalidBBox),
		4: R(validate.ReasonInvalidBBox),
		5: R(validate.ReasonBBoxOutOfBounds),
		6: R(validate.ReasonBBoxOutOfBounds),
		8: R(validate.ReasonBadSchema),
		9: R(validate.ReasonPathEscape),
	})
	// frame_00007.json has frame_id 12; frame_00002.json has no usable
	// frame_id. frame_00004.png is truncated after its header: clean here.
	add("run_1700000000123", []int{0, 1, 3, 4, 5, 6, 8, 9, 10, 7, 2}, map[int][]validate.Reason{
		2: R(validate.ReasonBadSchema),
		5: R(validate.ReasonDecodeError),
		8: R(validate.ReasonMissingImage),
	})
	return out
}

func TestDemoDataset(t *testing.T) {
	samples := scanAll(t, newSource(t, demoRoot, Options{}))
	want := demoOrder()
	if len(samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(samples), len(want))
	}
	for i, w := range want {
		s := samples[i]
		if s.LabelPath != w.label || !slices.Equal(s.Reasons, w.reasons) {
			t.Errorf("sample %d: %s %v, want %s %v", i, s.LabelPath, s.Reasons, w.label, w.reasons)
		}
	}

	byLabel := map[string]*sources.Sample{}
	for _, s := range samples {
		byLabel[s.LabelPath] = s
	}
	// Tolerance: [-0.4, 10, 320.3, 60] is clamped to the 320x240 image.
	if s := byLabel["run_10/labels/frame_00007.json"]; len(s.Boxes) != 1 || s.Boxes[0] != (sources.Box{X0: 0, Y0: 10, X1: 320, Y1: 60}) {
		t.Errorf("tolerance frame boxes = %v", s.Boxes)
	}
	// Mixed frame: the valid box is resolved beside the invalid one.
	if s := byLabel["run_10/labels/frame_00004.json"]; s.ValidBoxes != 1 || len(s.Boxes) != 1 {
		t.Errorf("frame with one box of neither kind: %d valid, boxes %v", s.ValidBoxes, s.Boxes)
	}
	// Norm-only frame: boxes are bbox_norm times 200x150, read here from
	// the label file with plain encoding/json.
	s := byLabel["run_2/labels/frame_00006.json"]
	var doc struct {
		Labels []struct {
			Px   *[4]float64 `json:"bbox_px"`
			Norm [4]float64  `json:"bbox_norm"`
			Name string      `json:"class_name"`
		} `json:"labels"`
	}
	raw, err := os.ReadFile(filepath.Join(demoRoot, s.LabelPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Labels) == 0 || len(s.Boxes) != len(doc.Labels) {
		t.Fatalf("norm-only frame: %d boxes for %d labels", len(s.Boxes), len(doc.Labels))
	}
	for i, l := range doc.Labels {
		want := sources.Box{X0: l.Norm[0] * 200, Y0: l.Norm[1] * 150, X1: l.Norm[2] * 200, Y1: l.Norm[3] * 150, Class: sources.ClassKey{Name: l.Name}}
		if l.Px != nil || s.Boxes[i] != want {
			t.Errorf("norm-only box %d = %+v, want %+v (bbox_px %v)", i, s.Boxes[i], want, l.Px)
		}
	}
	// Run indices and image sizes.
	for _, s := range samples {
		wantIndex := map[string]int32{"run_2": 0, "run_10": 1, "run_1700000000123": 2}[s.Source]
		if s.SourceIndex != wantIndex {
			t.Errorf("%s: source index %d, want %d", s.LabelPath, s.SourceIndex, wantIndex)
		}
		if s.Width == 0 {
			continue
		}
		wantW := map[string]int{"run_2": 200, "run_10": 320, "run_1700000000123": 200}[s.Source]
		if s.Width != wantW {
			t.Errorf("%s: width %d, want %d", s.LabelPath, s.Width, wantW)
		}
	}
}

// TestDemoGolden pins every field of every sample of the demo scan. The
// golden file was reviewed by hand against testdata/capture/README.md; a
// change in it is a change of the scan's output and needs the same review.
func TestDemoGolden(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, s := range scanAll(t, newSource(t, demoRoot, Options{})) {
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "golden", "scan.jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s missing: run go test -run TestDemoGolden -update", golden)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := bytes.Split(buf.Bytes(), []byte("\n"))
	wantLines := bytes.Split(want, []byte("\n"))
	for i := range max(len(got), len(wantLines)) {
		var g, w []byte
		if i < len(got) {
			g = got[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if !bytes.Equal(g, w) {
			t.Errorf("line %d differs:\n got %s\nwant %s", i+1, g, w)
		}
	}
}
