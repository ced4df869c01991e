package capture

import (
	"testing"

	"warehouse-etl/validate"
)

// LabelBoxes gives each box as written with the verdict Scan gives it.
func TestLabelBoxes(t *testing.T) {
	label := []byte(`{"frame_id": 1, "labels": [
		{"bbox_px": [10, 10, 50, 40], "class_name": "polyp"},
		{"bbox_px": [150, 10, 260, 40]},
		{"bbox_norm": [0.5, 0.5, 0.25, 0.75], "class_id": 3},
		{"bbox_px": "nope"}
	]}`)
	got := LabelBoxes(label, nil, 200, 100)
	want := []struct {
		written [4]float64
		reason  validate.Reason
	}{
		{[4]float64{10, 10, 50, 40}, ""},
		{[4]float64{150, 10, 260, 40}, validate.ReasonBBoxOutOfBounds},
		{[4]float64{100, 50, 50, 75}, validate.ReasonInvalidBBox},
	}
	if len(got) != len(want) {
		t.Fatalf("%d boxes, want %d (the malformed entry has no coordinates): %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Written == nil || *got[i].Written != w.written || got[i].Reason != w.reason {
			t.Errorf("box %d: %+v, want %v %q", i, got[i], w.written, w.reason)
		}
	}
	if got[0].Class.Name != "polyp" || !got[2].Class.HasID || got[2].Class.ID != 3 {
		t.Errorf("classes: %+v %+v", got[0].Class, got[2].Class)
	}
}
