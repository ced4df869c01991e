package validate

import (
	"math"
	"testing"
)

func TestCheckPx(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tests := []struct {
		name string
		box  [4]float64
		w, h int
		want [4]float64
		r    Reason
	}{
		{"inside", [4]float64{10, 20, 30, 40}, 100, 50, [4]float64{10, 20, 30, 40}, ""},
		{"whole image", [4]float64{0, 0, 100, 50}, 100, 50, [4]float64{0, 0, 100, 50}, ""},
		{"edges at tolerance clamp", [4]float64{-0.5, -0.5, 100.5, 50.5}, 100, 50, [4]float64{0, 0, 100, 50}, ""},
		{"inside tolerance clamps", [4]float64{-0.25, 3, 100.125, 4}, 100, 50, [4]float64{0, 3, 100, 4}, ""},
		{"left beyond tolerance", [4]float64{-0.5000001, 0, 10, 10}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"top beyond tolerance", [4]float64{0, -1, 10, 10}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"right beyond tolerance", [4]float64{0, 0, 100.6, 10}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"bottom beyond tolerance", [4]float64{0, 0, 10, 70}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"wholly left within tolerance", [4]float64{-0.4, 5, -0.1, 10}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"wholly right within tolerance", [4]float64{100.1, 5, 100.4, 10}, 100, 50, [4]float64{}, ReasonBBoxOutOfBounds},
		{"x0 == x1", [4]float64{10, 10, 10, 20}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"y0 > y1", [4]float64{10, 30, 20, 20}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"order checked before bounds", [4]float64{500, 10, 400, 20}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"NaN", [4]float64{nan, 0, 10, 10}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"+Inf", [4]float64{0, 0, inf, 10}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"-Inf", [4]float64{-inf, 0, 10, 10}, 100, 50, [4]float64{}, ReasonInvalidBBox},
		{"zero-size image", [4]float64{0, 0, 0.25, 0.25}, 0, 0, [4]float64{}, ReasonBBoxOutOfBounds},
		{"negative size image", [4]float64{0, 0, 1, 1}, -5, 10, [4]float64{}, ReasonBBoxOutOfBounds},
	}
	for _, tt := range tests {
		got, r := CheckPx(tt.box, tt.w, tt.h)
		if got != tt.want || r != tt.r {
			t.Errorf("%s: CheckPx(%v, %d, %d) = %v, %q; want %v, %q", tt.name, tt.box, tt.w, tt.h, got, r, tt.want, tt.r)
		}
	}
}

func TestNormToPx(t *testing.T) {
	tests := []struct {
		name string
		n    [4]float64
		w, h int
		want [4]float64
		r    Reason
	}{
		{"quarter box", [4]float64{0.25, 0.5, 0.75, 1}, 200, 150, [4]float64{50, 75, 150, 150}, ""},
		{"whole image", [4]float64{0, 0, 1, 1}, 320, 240, [4]float64{0, 0, 320, 240}, ""},
		{"below 0: no tolerance", [4]float64{-1e-9, 0, 0.5, 0.5}, 320, 240, [4]float64{}, ReasonBBoxOutOfBounds},
		{"above 1: no tolerance", [4]float64{0, 0, 0.5, 1.0000001}, 320, 240, [4]float64{}, ReasonBBoxOutOfBounds},
		{"far out", [4]float64{0.5, 0.5, 1.5, 0.9}, 320, 240, [4]float64{}, ReasonBBoxOutOfBounds},
		{"x0 == x1", [4]float64{0.5, 0.1, 0.5, 0.2}, 320, 240, [4]float64{}, ReasonInvalidBBox},
		{"order before range", [4]float64{1.5, 0.1, 1.2, 0.2}, 320, 240, [4]float64{}, ReasonInvalidBBox},
		{"NaN", [4]float64{0, math.NaN(), 1, 1}, 320, 240, [4]float64{}, ReasonInvalidBBox},
		{"zero-size image", [4]float64{0, 0, 1, 1}, 0, 240, [4]float64{}, ReasonBBoxOutOfBounds},
	}
	for _, tt := range tests {
		got, r := NormToPx(tt.n, tt.w, tt.h)
		if got != tt.want || r != tt.r {
			t.Errorf("%s: NormToPx(%v, %d, %d) = %v, %q; want %v, %q", tt.name, tt.n, tt.w, tt.h, got, r, tt.want, tt.r)
		}
	}
}

func TestCheckNorm(t *testing.T) {
	tests := []struct {
		n [4]float64
		r Reason
	}{
		{[4]float64{0, 0, 1, 1}, ""},
		{[4]float64{0.1, 0.2, 0.3, 0.4}, ""},
		{[4]float64{0.1, 0.2, 0.1, 0.4}, ReasonInvalidBBox},
		{[4]float64{0.1, -0.2, 0.3, 0.4}, ReasonBBoxOutOfBounds},
		{[4]float64{0.1, 0.2, 0.3, math.Inf(1)}, ReasonInvalidBBox},
	}
	for _, tt := range tests {
		if r := CheckNorm(tt.n); r != tt.r {
			t.Errorf("CheckNorm(%v) = %q, want %q", tt.n, r, tt.r)
		}
	}
}
