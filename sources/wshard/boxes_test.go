package wshard

import (
	"math"
	"slices"
	"testing"

	"warehouse-etl/sources"
)

// boxEpisode is a clean 6-step episode of 16x12 frames with a [2,4] f32
// label channel and a [2] i32 class channel: per step, what the rows say.
func boxEpisode(boxes [][2][4]float32, classes [][2]int32) *EpisodeFile {
	e := cleanEpisode(0, len(boxes), 12, 16)
	var bv []float32
	var cb []byte
	for t := range boxes {
		for i := range 2 {
			bv = append(bv, boxes[t][i][:]...)
			cb = append(cb, byte(classes[t][i]), byte(classes[t][i]>>8), byte(classes[t][i]>>16), byte(classes[t][i]>>24))
		}
	}
	e.Channels = append(e.Channels,
		ChannelData{ID: "boxes", Block: "label/boxes", DType: "f32", Shape: []int{2, 4}, Data: f32Bytes(bv)},
		ChannelData{ID: "box_class", Block: "label/class", DType: "i32", Shape: []int{2}, Data: cb},
	)
	return e
}

func TestLabelChannelBoxes(t *testing.T) {
	nan := float32(math.NaN())
	pad := [4]float32{}
	boxes := [][2][4]float32{
		{{1, 2, 9, 10}, pad},                  // one box, one padding row
		{{0, 0, 16, 12}, {2.5, 3, 4, 5}},      // two boxes, the whole frame and a small one
		{{5, 5, 3, 8}, pad},                   // x0 >= x1
		{{-3, 0, 8, 8}, {15, 11, 16.4, 12.4}}, // far outside; within the tolerance (clamped)
		{pad, {nan, nan, nan, nan}},           // all padding: empty
		{{1, nan, 4, 4}, pad},                 // a NaN corner
	}
	classes := [][2]int32{{3, 0}, {1, 7}, {3, 0}, {2, 2}, {0, 0}, {1, 0}}
	dir := t.TempDir()
	writeEpisode(t, dir, "ep.wshard", boxEpisode(boxes, classes))
	got := scan(t, newSource(t, dir, Options{Boxes: "label/boxes", BoxClasses: "box_class"}))
	if want := []string{"0:", "1:", "2:invalid_bbox", "3:bbox_out_of_bounds", "4:empty", "5:invalid_bbox"}; !slices.Equal(reasonsOf(got), want) {
		t.Fatalf("reasons %v, want %v", reasonsOf(got), want)
	}
	id := func(v int64) sources.ClassKey { return sources.ClassKey{ID: v, HasID: true} }
	wantBoxes := [][]sources.Box{
		{{X0: 1, Y0: 2, X1: 9, Y1: 10, Class: id(3)}},
		{{X0: 0, Y0: 0, X1: 16, Y1: 12, Class: id(1)}, {X0: 2.5, Y0: 3, X1: 4, Y1: 5, Class: id(7)}},
		nil,
		{{X0: 15, Y0: 11, X1: 16, Y1: 12, Class: id(2)}},
		nil,
		nil,
	}
	for i, s := range got {
		if !slices.Equal(s.Boxes, wantBoxes[i]) || s.ValidBoxes != len(wantBoxes[i]) {
			t.Errorf("step %d: boxes %+v (valid %d), want %+v", i, s.Boxes, s.ValidBoxes, wantBoxes[i])
		}
	}

	// Without classes the boxes have no class key.
	got = scan(t, newSource(t, dir, Options{Boxes: "boxes"}))
	if len(got[0].Boxes) != 1 || got[0].Boxes[0].Class != (sources.ClassKey{}) {
		t.Fatalf("without box_classes: %+v", got[0].Boxes)
	}
}

// A label channel that is absent, of the wrong shape, or with a class
// channel of another K: a reason on every step, no boxes.
func TestLabelChannelProblems(t *testing.T) {
	dir := t.TempDir()
	e := boxEpisode([][2][4]float32{{{1, 1, 2, 2}}, {{1, 1, 2, 2}}}, [][2]int32{{0, 0}, {0, 0}})
	e.Channels = append(e.Channels, ChannelData{ID: "flat", Block: "label/flat", DType: "f32", Shape: []int{8}, Data: make([]byte, 2*8*4)},
		ChannelData{ID: "cls3", Block: "label/cls3", DType: "i32", Shape: []int{3}, Data: make([]byte, 2*3*4)})
	writeEpisode(t, dir, "ep.wshard", e)
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Boxes: "label/none"}, "missing_block"},
		{Options{Boxes: "label/flat"}, "bad_schema"},
		{Options{Boxes: "boxes", BoxClasses: "cls3"}, "length_mismatch"},
		{Options{Boxes: "boxes", BoxClasses: "label/none"}, "missing_block"},
	} {
		got := scan(t, newSource(t, dir, tt.opts))
		if want := []string{"0:" + tt.want, "1:" + tt.want}; !slices.Equal(reasonsOf(got), want) {
			t.Errorf("%+v: reasons %v, want %v", tt.opts, reasonsOf(got), want)
		}
		for _, s := range got {
			if len(s.Boxes) != 0 {
				t.Errorf("%+v: step %d has boxes %+v", tt.opts, s.Frame, s.Boxes)
			}
		}
	}
}
