package render

import (
	"image"
	"testing"
)

func TestFit(t *testing.T) {
	for _, c := range []struct{ w, h, limit, ww, wh int }{
		{384, 384, 192, 192, 192},
		{128, 128, 192, 128, 128}, // never enlarged
		{400, 200, 192, 192, 96},
		{200, 400, 192, 96, 192},
		{1000, 1, 100, 100, 1},
	} {
		if w, h := Fit(c.w, c.h, c.limit); w != c.ww || h != c.wh {
			t.Errorf("Fit(%d, %d, %d) = %d x %d, want %d x %d", c.w, c.h, c.limit, w, h, c.ww, c.wh)
		}
	}
}

// Draw outlines a box 2 pixels wide inside the pixels BoxPixels names,
// and leaves the inside alone.
func TestDrawPlacesBoxes(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 80))
	b := [4]float32{0.25, 0.5, 0.75, 0.875}
	Draw(img, []Box{{Box: b, Name: "", Color: ClassColor(2)}})
	x0, y0, x1, y1 := BoxPixels(b, 100, 80)
	if x0 != 25 || y0 != 40 || x1 != 74 || y1 != 69 {
		t.Fatalf("BoxPixels = %d %d %d %d", x0, y0, x1, y1)
	}
	for _, p := range []image.Point{{x0, 55}, {x0 + 1, 55}, {x1, 55}, {x1 - 1, 55}, {50, y0}, {50, y0 + 1}, {50, y1}, {50, y1 - 1}} {
		if got := img.RGBAAt(p.X, p.Y); got != ClassColor(2) {
			t.Errorf("pixel %v is %v, want the box colour", p, got)
		}
	}
	if got := img.RGBAAt(50, 55); got == ClassColor(2) {
		t.Errorf("the inside of the box was painted")
	}
	if got := img.RGBAAt(x0-1, 55); got == ClassColor(2) {
		t.Errorf("the outline spills outside the box")
	}
}
