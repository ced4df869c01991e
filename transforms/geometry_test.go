package transforms

import (
	"errors"
	"math"
	"testing"

	"warehouse-etl/dtype"
)

// The expected sizes and paddings below are worked out by hand from the rule
// in planGeometry's comment; the comments show the arithmetic.
func TestPlanGeometry(t *testing.T) {
	tests := []struct {
		name           string
		tw, th         int
		mode           ResizeMode
		srcW, srcH     int
		newW, newH     int
		padX, padY     int
		scaleX, scaleY float64
	}{
		// Original defaults: 384x384 letterbox. 1920x1080: scale min(0.2, 0.356) = 0.2,
		// 1080*0.2 = 216, pad (384-216)/2 = 84.
		{"1080p into 384", 384, 384, Letterbox, 1920, 1080, 384, 216, 0, 84, 0.2, 0.2},
		// 640x480: scale 0.6, 480*0.6 = 288, pad 48.
		{"VGA into 384", 384, 384, Letterbox, 640, 480, 384, 288, 0, 48, 0.6, 0.6},
		// portrait 100x300: scale min(3.84, 1.28) = 1.28, 100*1.28 = 128, pad (384-128)/2 = 128.
		{"portrait upscale", 384, 384, Letterbox, 100, 300, 128, 384, 128, 0, 1.28, 1.28},
		{"same size", 384, 384, Letterbox, 384, 384, 384, 384, 0, 0, 1, 1},
		// 1000x999: width limits (384*999 < 384*1000), 999*0.384 = 383.616 -> 384.
		{"nearly square", 384, 384, Letterbox, 1000, 999, 384, 384, 0, 0, 0.384, 384.0 / 999},
		// 3x1: scale 128, new 384x128, pad 128.
		{"tiny wide upscale", 384, 384, Letterbox, 3, 1, 384, 128, 0, 128, 128, 128},
		// 5x3 into 4x4: scale 0.8, 3*0.8 = 2.4 -> 2, pad (4-2)/2 = 1.
		{"round down", 4, 4, Letterbox, 5, 3, 4, 2, 0, 1, 0.8, 2.0 / 3},
		// 7x3 into 10x10: 3*10/7 = 4.29 -> 4, pad (10-4)/2 = 3.
		{"odd sizes", 10, 10, Letterbox, 7, 3, 10, 4, 0, 3, 10.0 / 7, 4.0 / 3},
		// 4x2 into 3x3: 2*3/4 = 1.5 exactly -> 2 (half up), pad (3-2)/2 = 0.
		{"exact tie rounds up", 3, 3, Letterbox, 4, 2, 3, 2, 0, 0, 0.75, 1},
		// 10000x1 into 100x100: 1*0.01 -> 0, raised to 1; pad (100-1)/2 = 49.
		{"at least one pixel", 100, 100, Letterbox, 10000, 1, 100, 1, 0, 49, 0.01, 1},
		// 123x77 into 640x640: 77*640/123 = 400.65 -> 401, pad (640-401)/2 = 119.
		{"123x77 into 640", 640, 640, Letterbox, 123, 77, 640, 401, 0, 119, 640.0 / 123, 401.0 / 77},
		// 1920x1080 into 640x384: 640*1080 = 691200 <= 384*1920 = 737280: width limits,
		// 1080/3 = 360, pad (384-360)/2 = 12.
		{"non-square target", 640, 384, Letterbox, 1920, 1080, 640, 360, 0, 12, 1.0 / 3, 1.0 / 3},
		// 200x200 into 300x100: height limits (300*200 > 100*200), new 100x100, pad 100.
		{"wide target", 300, 100, Letterbox, 200, 200, 100, 100, 100, 0, 0.5, 0.5},
		// 2x2 into 10x9: height limits, new 9x9, pad (10-9)/2 = 0 (the odd pixel goes right).
		{"odd remainder", 10, 9, Letterbox, 2, 2, 9, 9, 0, 0, 4.5, 4.5},
		{"stretch", 384, 384, Stretch, 1920, 1080, 384, 384, 0, 0, 0.2, 384.0 / 1080},
		{"stretch upscale", 640, 480, Stretch, 32, 24, 640, 480, 0, 0, 20, 20},
		{"none", 384, 384, None, 384, 384, 384, 384, 0, 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Spec{Width: tt.tw, Height: tt.th, Mode: tt.mode, DType: dtype.F16}
			g, err := PlanGeometry(s, tt.srcW, tt.srcH)
			if err != nil {
				t.Fatal(err)
			}
			want := Geometry{
				SrcW: tt.srcW, SrcH: tt.srcH, NewW: tt.newW, NewH: tt.newH, PadX: tt.padX, PadY: tt.padY,
				ScaleX: tt.scaleX, ScaleY: tt.scaleY, TargetW: tt.tw, TargetH: tt.th,
			}
			if g != want {
				t.Fatalf("PlanGeometry = %+v\nwant           %+v", g, want)
			}
		})
	}
}

func TestPlanGeometryErrors(t *testing.T) {
	tests := []struct {
		name       string
		spec       Spec
		srcW, srcH int
		want       error // nil: any error
	}{
		{"none size mismatch", Spec{Width: 384, Height: 384, Mode: None}, 385, 384, ErrSizeMismatch},
		{"none transposed", Spec{Width: 640, Height: 480, Mode: None}, 480, 640, ErrSizeMismatch},
		{"too many pixels", Spec{Width: 384, Height: 384, Mode: Letterbox}, 20000, 20000, ErrImageTooLarge},
		{"side too long", Spec{Width: 384, Height: 384, Mode: Letterbox}, MaxSourceSide + 1, 1, ErrImageTooLarge},
		{"zero source", Spec{Width: 384, Height: 384, Mode: Letterbox}, 0, 10, nil},
		{"negative source", Spec{Width: 384, Height: 384, Mode: Stretch}, 10, -1, nil},
		{"invalid spec", Spec{Width: 0, Height: 384, Mode: Letterbox}, 10, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanGeometry(tt.spec, tt.srcW, tt.srcH)
			if err == nil {
				t.Fatal("PlanGeometry succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("error %v does not wrap %v", err, tt.want)
			}
		})
	}
}

func TestMapBox(t *testing.T) {
	plan := func(tw, th int, mode ResizeMode, w, h int) Geometry {
		g, err := PlanGeometry(Spec{Width: tw, Height: th, Mode: mode, DType: dtype.F16}, w, h)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	hd := plan(384, 384, Letterbox, 1920, 1080)                  // scale 0.2, pad (0, 84)
	portrait := plan(384, 384, Letterbox, 100, 300)              // scale 1.28, pad (128, 0)
	stretched := plan(384, 384, Stretch, 1920, 1080)             // scale 0.2 x 0.3556
	f := func(num float64) float32 { return float32(num / 384) } // target pixel -> normalized
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name           string
		g              Geometry
		x0, y0, x1, y1 float64
		want           [4]float32
		ok             bool
	}{
		// x: 960*0.2 = 192, y: 540*0.2+84 = 192, x1: 384, y1: 216+84 = 300.
		{"quarter", hd, 960, 540, 1920, 1080, [4]float32{0.5, 0.5, 1, 0.78125}, true},
		{"whole image", hd, 0, 0, 1920, 1080, [4]float32{0, f(84), 1, f(300)}, true},
		// x0 -20 clamps to 0; y0 -10+84 = 74; x1 20; y1 10+84 = 94.
		{"clamped top-left", hd, -100, -50, 100, 50, [4]float32{0, f(74), f(20), f(94)}, true},
		// x0 380, y0 200+84 = 284, x1 1000 and y1 1084 clamp to 1.
		{"clamped bottom-right", hd, 1900, 1000, 5000, 5000, [4]float32{f(380), f(284), 1, 1}, true},
		{"entirely left", hd, -50, 10, -10, 20, [4]float32{}, false},
		// y: 2000*0.2+84 = 484 and beyond: both clamp to 1.
		{"entirely below", hd, 10, 2000, 20, 2100, [4]float32{}, false},
		{"zero width", hd, 100, 10, 100, 20, [4]float32{}, false},
		{"inverted", hd, 200, 10, 100, 20, [4]float32{}, false},
		{"NaN", hd, nan, 10, 100, 20, [4]float32{}, false},
		{"Inf", hd, 0, 10, inf, 20, [4]float32{}, false},
		// x: 0+128, 100*1.28+128 = 256; y: 0, 384.
		{"portrait whole", portrait, 0, 0, 100, 300, [4]float32{f(128), 0, f(256), 1}, true},
		// x: 50*1.28+128 = 192, 75*1.28+128 = 224; y: 150*1.28 = 192, 225*1.28 = 288.
		{"portrait middle", portrait, 50, 150, 75, 225, [4]float32{0.5, 0.5, f(224), 0.75}, true},
		// x: 480*0.2 = 96, 1440*0.2 = 288; y: 270*384/1080 = 96, 810*384/1080 = 288.
		{"stretch", stretched, 480, 270, 1440, 810, [4]float32{0.25, 0.25, 0.75, 0.75}, true},
		{"zero geometry", Geometry{}, 1, 1, 2, 2, [4]float32{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.g.MapBox(tt.x0, tt.y0, tt.x1, tt.y1)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("MapBox = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
