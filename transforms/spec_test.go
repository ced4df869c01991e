package transforms

import (
	"math"
	"strings"
	"testing"

	"warehouse-etl/dtype"
)

func TestSpecValidate(t *testing.T) {
	ok := Spec{Width: 384, Height: 384, Mode: Letterbox, DType: dtype.F16}
	imagenet := ok
	imagenet.Mean = [3]float64{0.485, 0.456, 0.406}
	imagenet.Std = [3]float64{0.229, 0.224, 0.225}
	with := func(f func(*Spec)) Spec {
		s := ok
		f(&s)
		return s
	}
	tests := []struct {
		name    string
		spec    Spec
		wantErr string // "" = valid
	}{
		{"defaults", ok, ""},
		{"imagenet", imagenet, ""},
		{"stretch f32", with(func(s *Spec) { s.Mode = Stretch; s.DType = dtype.F32 }), ""},
		{"none 1x1", with(func(s *Spec) { s.Mode = None; s.Width, s.Height = 1, 1 }), ""},
		{"max side", with(func(s *Spec) { s.Width, s.Height = MaxTargetSide, MaxTargetSide }), ""},
		{"zero width", with(func(s *Spec) { s.Width = 0 }), "target size"},
		{"negative height", with(func(s *Spec) { s.Height = -1 }), "target size"},
		{"too wide", with(func(s *Spec) { s.Width = MaxTargetSide + 1 }), "target size"},
		{"empty mode", with(func(s *Spec) { s.Mode = "" }), "resize mode"},
		{"unknown mode", with(func(s *Spec) { s.Mode = "crop" }), "resize mode"},
		{"unknown dtype", with(func(s *Spec) { s.DType = 7 }), "dtype"},
		{"mean without std", with(func(s *Spec) { s.Mean = [3]float64{0.5, 0.5, 0.5} }), "without std"},
		{"one std zero", with(func(s *Spec) { s.Std = [3]float64{0.2, 0, 0.2} }), "std must be"},
		{"negative std", with(func(s *Spec) { s.Std = [3]float64{0.2, -0.2, 0.2} }), "std must be"},
		{"NaN std", with(func(s *Spec) { s.Std = [3]float64{0.2, math.NaN(), 0.2} }), "std must be"},
		{"Inf std", with(func(s *Spec) { s.Std = [3]float64{0.2, math.Inf(1), 0.2} }), "std must be"},
		{"NaN mean", with(func(s *Spec) { s.Mean[1] = math.NaN(); s.Std = [3]float64{1, 1, 1} }), "not finite"},
		// 1/1e-5 = 100000 > 65504, the largest finite f16.
		{"f16 overflow", with(func(s *Spec) { s.Std = [3]float64{1e-5, 1, 1} }), "not finite in f16"},
		{"same std fits f32", with(func(s *Spec) { s.Std = [3]float64{1e-5, 1, 1}; s.DType = dtype.F32 }), ""},
		{"f32 overflow", with(func(s *Spec) { s.Std = [3]float64{1e-300, 1, 1}; s.DType = dtype.F32 }), "not finite in f32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if _, nerr := NewTransformer(tt.spec); (nerr == nil) != (err == nil) {
				t.Fatalf("NewTransformer error %v disagrees with Validate %v", nerr, err)
			}
		})
	}
}

func TestOutputBytes(t *testing.T) {
	tests := []struct {
		spec Spec
		want int
	}{
		{Spec{Width: 384, Height: 384, DType: dtype.F16}, 3 * 384 * 384 * 2},
		{Spec{Width: 640, Height: 360, DType: dtype.F32}, 3 * 640 * 360 * 4},
		{Spec{Width: 1, Height: 1, DType: dtype.F16}, 6},
	}
	for _, tt := range tests {
		if got := tt.spec.OutputBytes(); got != tt.want {
			t.Errorf("%dx%d %v: OutputBytes = %d, want %d", tt.spec.Width, tt.spec.Height, tt.spec.DType, got, tt.want)
		}
	}
}
