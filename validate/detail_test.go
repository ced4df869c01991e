package validate

import (
	"math"
	"testing"
)

func TestExplainBox(t *testing.T) {
	tests := []struct {
		name string
		b    [4]float64
		r    Reason
		w, h int
		want string
	}{
		{"x order", [4]float64{10, 20, 5, 40}, ReasonInvalidBBox, 0, 0, "bbox_px [10, 20, 5, 40]: x_max is not greater than x_min"},
		{"y order", [4]float64{10, 20, 15, 20}, ReasonInvalidBBox, 64, 48, "bbox_px [10, 20, 15, 20]: y_max is not greater than y_min"},
		{"NaN", [4]float64{math.NaN(), 0, 1, 1}, ReasonInvalidBBox, 0, 0, "bbox_px [NaN, 0, 1, 1]: not finite"},
		{"outside the image", [4]float64{0, 0, 70, 10}, ReasonBBoxOutOfBounds, 64, 48, "bbox_px [0, 0, 70, 10]: outside the 64x48 image"},
		{"normalized", [4]float64{0, 0, 1.5, 1}, ReasonBBoxOutOfBounds, 0, 0, "bbox_px [0, 0, 1.5, 1]: outside [0, 1]"},
	}
	for _, tt := range tests {
		if got := ExplainBox("bbox_px", tt.b, tt.r, tt.w, tt.h); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		// What ExplainBox explains is what the checks decide.
		if tt.w > 0 {
			if _, r := CheckPx(tt.b, tt.w, tt.h); r != tt.r {
				t.Errorf("%s: CheckPx gives %q, the test says %q", tt.name, r, tt.r)
			}
		} else if r := CheckNorm(tt.b); r != tt.r {
			t.Errorf("%s: CheckNorm gives %q, the test says %q", tt.name, r, tt.r)
		}
	}
}

func TestDescribe(t *testing.T) {
	var d Details
	d.Note(ReasonInvalidBBox, "bbox_px [1, 1, 0, 2]: x_max is not greater than x_min")
	d.Note(ReasonInvalidBBox, "a second box") // the first cause wins
	d.Note(ReasonDecodeError, "")             // no words, no entry
	got := Describe([]Reason{ReasonInvalidBBox, ReasonDecodeError, "made_up"}, d)
	want := "invalid_bbox: bbox_px [1, 1, 0, 2]: x_max is not greater than x_min; decode_error: the image cannot be decoded; made_up: an unknown reason code"
	if got != want {
		t.Errorf("Describe = %q\nwant %q", got, want)
	}
	if got := Describe(nil, d); got != "" {
		t.Errorf("Describe(nil) = %q", got)
	}
}

// Every reason has its meaning in words.
func TestEveryReasonHasAMeaning(t *testing.T) {
	for _, r := range AllReasons() {
		if _, ok := meaning[r]; !ok {
			t.Errorf("%s has no meaning in validate/detail.go", r)
		}
	}
	if len(meaning) != len(AllReasons()) {
		t.Errorf("%d meanings for %d reasons", len(meaning), len(AllReasons()))
	}
}
