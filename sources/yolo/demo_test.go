package yolo

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

// demoRoot is the demo dataset written by testdata/yologen.
var demoRoot = filepath.Join("..", "..", "testdata", "yolo")

// demoSample is one line of testdata/yolo/expected.jsonl, which yologen
// writes from its own table of what it drew and planted.
type demoSample struct {
	Split       string    `json:"split"`
	Seq         int64     `json:"seq"`
	Source      string    `json:"source"`
	SourceIndex int32     `json:"source_index"`
	Frame       uint64    `json:"frame"`
	Image       string    `json:"image_path"`
	Label       string    `json:"label_path"`
	Width       int       `json:"width"`
	Height      int       `json:"height"`
	Boxes       []demoBox `json:"boxes"`
	ValidBoxes  int       `json:"valid_boxes"`
	Reasons     []string  `json:"reasons"`
}

type demoBox struct {
	Class          int64
	Name           string
	X0, Y0, X1, Y1 float64
}

// TestDemo scans both splits of the demo dataset and compares every sample
// with what the generator says it planted.
func TestDemo(t *testing.T) {
	f, err := os.Open(filepath.Join(demoRoot, "expected.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string][]demoSample{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d demoSample
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		want[d.Split] = append(want[d.Split], d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want["train"]) != 30 || len(want["val"]) != 6 {
		t.Fatalf("expected.jsonl: %d train, %d val samples", len(want["train"]), len(want["val"]))
	}
	for _, split := range []string{"train", "val"} {
		src := newSource(t, demoRoot, Options{Split: split})
		if names := src.Classes(); len(names) != 3 || names[2].Name != "diamond" {
			t.Errorf("classes %v", names)
		}
		got := scanAll(t, src)
		if len(got) != len(want[split]) {
			t.Fatalf("%s: %d samples, want %d", split, len(got), len(want[split]))
		}
		for i, w := range want[split] {
			s := got[i]
			var boxes []sources.Box
			for _, b := range w.Boxes {
				boxes = append(boxes, sources.Box{X0: b.X0, Y0: b.Y0, X1: b.X1, Y1: b.Y1, Class: sources.ClassKey{ID: b.Class, HasID: true, Name: b.Name}})
			}
			var reasons []validate.Reason
			for _, r := range w.Reasons {
				reasons = append(reasons, validate.Reason(r))
			}
			g := demoSample{Split: split, Seq: s.Seq, Source: s.Source, SourceIndex: s.SourceIndex, Frame: s.Frame, Image: s.ImagePath,
				Label: s.LabelPath, Width: s.Width, Height: s.Height, ValidBoxes: s.ValidBoxes}
			w.Boxes, w.Reasons = nil, nil
			if !reflect.DeepEqual(g, w) || !reflect.DeepEqual(s.Boxes, boxes) || !reflect.DeepEqual(s.Reasons, reasons) {
				t.Errorf("%s sample %d:\n got %+v boxes %v reasons %v\nwant %+v boxes %v reasons %v", split, i, g, s.Boxes, s.Reasons, w, boxes, reasons)
			}
		}
	}
}
