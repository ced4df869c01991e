package validate

import "math"

// BoundsTolerancePx is how far, in source pixels, a box may reach outside
// the image before it is bbox_out_of_bounds. Labelling tools round box
// corners to whole pixels or place them at pixel centres, so an edge at -0.5
// or W+0.5 still means "at the border"; anything further is a real error.
// Boxes within the tolerance are clamped to the image.
const BoundsTolerancePx = 0.5

// CheckOrder checks what a box needs regardless of the image: all four
// values finite and x0 < x1, y0 < y1 (b is x0, y0, x1, y1). It returns
// ReasonInvalidBBox or "". Sources use it alone when the image size is
// unknown; CheckPx and NormToPx start with it.
func CheckOrder(b [4]float64) Reason {
	for _, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return ReasonInvalidBBox
		}
	}
	if !(b[0] < b[2]) || !(b[1] < b[3]) {
		return ReasonInvalidBBox
	}
	return ""
}

// CheckPx checks a box in source pixels against a w x h image and returns
// it clamped to [0,w] x [0,h].
//
//   - non-finite, x0 >= x1 or y0 >= y1: ReasonInvalidBBox
//   - any edge outside the image by more than BoundsTolerancePx:
//     ReasonBBoxOutOfBounds
//   - a box that lies wholly outside the image, within the tolerance, and
//     so has no area once clamped: ReasonBBoxOutOfBounds (this is also what
//     every box in an image of zero width or height gets)
//
// When r is not "", clamped is the zero box.
func CheckPx(b [4]float64, w, h int) (clamped [4]float64, r Reason) {
	if r := CheckOrder(b); r != "" {
		return [4]float64{}, r
	}
	fw, fh := float64(max(w, 0)), float64(max(h, 0))
	if b[0] < -BoundsTolerancePx || b[1] < -BoundsTolerancePx ||
		b[2] > fw+BoundsTolerancePx || b[3] > fh+BoundsTolerancePx {
		return [4]float64{}, ReasonBBoxOutOfBounds
	}
	c := [4]float64{
		min(max(b[0], 0), fw),
		min(max(b[1], 0), fh),
		min(max(b[2], 0), fw),
		min(max(b[3], 0), fh),
	}
	if !(c[0] < c[2]) || !(c[1] < c[3]) {
		return [4]float64{}, ReasonBBoxOutOfBounds
	}
	return c, ""
}

// CheckNorm checks a normalized box (pixels divided by the image size)
// without the image: CheckOrder, then every value in [0,1] with no
// tolerance (the rule of the original capture tool), else
// ReasonBBoxOutOfBounds.
func CheckNorm(n [4]float64) Reason {
	if r := CheckOrder(n); r != "" {
		return r
	}
	for _, v := range n {
		if v < 0 || v > 1 {
			return ReasonBBoxOutOfBounds
		}
	}
	return ""
}

// NormToPx checks a normalized box (CheckNorm) and resolves it to source
// pixels by multiplying x by w and y by h, then applies CheckPx to the
// result. In an image of zero width or height no box fits:
// ReasonBBoxOutOfBounds.
func NormToPx(n [4]float64, w, h int) ([4]float64, Reason) {
	if r := CheckNorm(n); r != "" {
		return [4]float64{}, r
	}
	if w <= 0 || h <= 0 {
		return [4]float64{}, ReasonBBoxOutOfBounds
	}
	fw, fh := float64(w), float64(h)
	return CheckPx([4]float64{n[0] * fw, n[1] * fh, n[2] * fw, n[3] * fh}, w, h)
}
