package transforms

import (
	"fmt"
	"math"
)

// Geometry says where a source image lands in the target tensor. All sizes
// are in pixels; the source size is the displayed size (after EXIF
// orientation).
type Geometry struct {
	SrcW, SrcH       int     // source size
	NewW, NewH       int     // size of the resized image inside the target
	PadX, PadY       int     // left and top offset of the resized image
	ScaleX, ScaleY   float64 // NewW/SrcW and NewH/SrcH: the factors the pixels were scaled by
	TargetW, TargetH int     // target size (Spec.Width, Spec.Height)
}

// PlanGeometry computes the geometry of a srcW x srcH image under s. It
// fails with ErrSizeMismatch when s.Mode is None and the sizes differ, and
// with ErrImageTooLarge when the source exceeds MaxSourceSide or
// MaxSourcePixels.
func PlanGeometry(s Spec, srcW, srcH int) (Geometry, error) {
	if err := s.Validate(); err != nil {
		return Geometry{}, err
	}
	if err := checkSourceSize(srcW, srcH, MaxSourcePixels); err != nil {
		return Geometry{}, err
	}
	return planGeometry(s, srcW, srcH)
}

// checkSourceSize rejects empty sources and sources beyond the limits.
func checkSourceSize(w, h, maxPixels int) error {
	if w < 1 || h < 1 {
		return fmt.Errorf("transforms: empty source size %dx%d", w, h)
	}
	if w > MaxSourceSide || h > MaxSourceSide || int64(w)*int64(h) > int64(maxPixels) {
		return fmt.Errorf("%w: %dx%d exceeds %d pixels per side or %d pixels in total",
			ErrImageTooLarge, w, h, MaxSourceSide, maxPixels)
	}
	return nil
}

// planGeometry is PlanGeometry for a validated spec and a checked size.
//
// Letterbox works in exact integer arithmetic: the scale min(tw/w, th/h) is
// the rational tw/w when tw*h <= th*w (the width limits) and th/h otherwise.
// The limiting axis gets exactly the target size, the other one
// round-half-up(src*scale), at least 1 pixel; padding is (target-new)/2
// rounded down, so an odd remainder puts the extra pixel right/bottom.
// Floating point would give the same sizes except exactly at .5 ties, where
// a float scale may land on either side; integers make the rule exact.
func planGeometry(s Spec, srcW, srcH int) (Geometry, error) {
	g := Geometry{SrcW: srcW, SrcH: srcH, TargetW: s.Width, TargetH: s.Height}
	switch s.Mode {
	case None:
		if srcW != s.Width || srcH != s.Height {
			return Geometry{}, fmt.Errorf("%w: source %dx%d, target %dx%d", ErrSizeMismatch, srcW, srcH, s.Width, s.Height)
		}
		g.NewW, g.NewH = srcW, srcH
	case Stretch:
		g.NewW, g.NewH = s.Width, s.Height
	case Letterbox:
		// int64: the products reach 2^31 with the largest sizes, which
		// would overflow int on 32-bit platforms.
		tw, th, w, h := int64(s.Width), int64(s.Height), int64(srcW), int64(srcH)
		if tw*h <= th*w {
			g.NewW = s.Width
			g.NewH = int(max(1, min(th, roundDiv(h*tw, w))))
		} else {
			g.NewH = s.Height
			g.NewW = int(max(1, min(tw, roundDiv(w*th, h))))
		}
		g.PadX = (s.Width - g.NewW) / 2
		g.PadY = (s.Height - g.NewH) / 2
	default:
		return Geometry{}, fmt.Errorf("transforms: unknown resize mode %q", s.Mode)
	}
	g.ScaleX = float64(g.NewW) / float64(srcW)
	g.ScaleY = float64(g.NewH) / float64(srcH)
	return g, nil
}

// roundDiv is a/b rounded half up, for a >= 0 and b > 0.
func roundDiv(a, b int64) int64 {
	return (2*a + b) / (2 * b)
}

// MapBox maps a box given in source pixels (x0, y0) - (x1, y1) into the
// target, normalized to [0,1]: each coordinate is scaled by ScaleX/ScaleY,
// offset by the padding, divided by the target size and clamped to [0,1].
// ok is false when the clamped box is degenerate (x1 <= x0 or y1 <= y0 in
// float32) or when any input is not finite; out is then the zero box.
//
// The scale is the one the pixels were resized with (NewW/SrcW), not the
// ideal min(tw/w, th/h), so a box stays on its object even where rounding
// the new size made the two differ by a fraction of a pixel.
func (g Geometry) MapBox(x0, y0, x1, y1 float64) (out [4]float32, ok bool) {
	for _, v := range [4]float64{x0, y0, x1, y1} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return [4]float32{}, false
		}
	}
	out = [4]float32{
		mapCoordinate(x0, g.ScaleX, g.PadX, g.TargetW),
		mapCoordinate(y0, g.ScaleY, g.PadY, g.TargetH),
		mapCoordinate(x1, g.ScaleX, g.PadX, g.TargetW),
		mapCoordinate(y1, g.ScaleY, g.PadY, g.TargetH),
	}
	if !(out[2] > out[0] && out[3] > out[1]) {
		return [4]float32{}, false
	}
	return out, true
}

// mapCoordinate is (v*scale + pad) / target clamped to [0,1]. The product is
// converted explicitly so that it is rounded before the addition: the Go
// spec lets a compiler fuse x*y + z into one FMA instruction otherwise,
// which rounds once instead of twice and differs between architectures.
func mapCoordinate(v, scale float64, pad, target int) float32 {
	x := float64(v*scale) + float64(pad)
	x = x / float64(target)
	if !(x > 0) { // also catches NaN from a zero Geometry
		return 0
	}
	if x > 1 {
		return 1
	}
	return float32(x)
}
