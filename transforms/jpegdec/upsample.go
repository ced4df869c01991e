package jpegdec

import "image"

// upsampleChroma replaces the Cb and Cr planes of img (ColorYCbCr or
// ColorRGB, subsampled) by planes at the luma resolution, interpolated with
// libjpeg's "fancy" triangle filter where a factor is 2 (each output
// sample 3/4 of the nearer and 1/4 of the farther input sample, edges
// replicated), replicated where it is 4. The result is 4:4:4.
func (d *Decoder) upsampleChroma(img *Image) {
	m := &img.YCbCr
	var fh, fv int
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		fh, fv = 2, 1
	case image.YCbCrSubsampleRatio420:
		fh, fv = 2, 2
	case image.YCbCrSubsampleRatio440:
		fh, fv = 1, 2
	case image.YCbCrSubsampleRatio411:
		fh, fv = 4, 1
	case image.YCbCrSubsampleRatio410:
		fh, fv = 4, 2
	default:
		return
	}
	w, h := m.Rect.Dx(), m.Rect.Dy()
	n := w * h
	if cap(d.upsampled) < 2*n {
		d.upsampled = make([]byte, 2*n)
	}
	d.upsampled = d.upsampled[:2*n]
	cb, cr := d.upsampled[:n:n], d.upsampled[n:]
	cw, ch := (w+fh-1)/fh, (h+fv-1)/fv // chroma samples that cover the image
	upsamplePlane(cb, w, h, m.Cb, m.CStride, cw, ch, fh, fv)
	upsamplePlane(cr, w, h, m.Cr, m.CStride, cw, ch, fh, fv)
	m.Cb, m.Cr, m.CStride = cb, cr, w
	m.SubsampleRatio = image.YCbCrSubsampleRatio444
}

// upsamplePlane writes the w x h upsampled plane dst from the cw x ch
// samples of src (rows stride apart).
func upsamplePlane(dst []byte, w, h int, src []byte, stride, cw, ch, fh, fv int) {
	for y := 0; y < h; y++ {
		out := dst[y*w : y*w+w]
		cy := y / fv
		near := src[cy*stride : cy*stride+cw]
		if fv == 1 {
			upsampleRow(out, near, nil, fh, 0)
			continue
		}
		// Vertical: the output row in the upper half of its input row
		// leans on the row above, the lower one on the row below.
		fy, bias := cy-1, 1
		if y%2 == 1 {
			fy, bias = cy+1, 2
		}
		fy = min(max(fy, 0), ch-1)
		upsampleRow(out, near, src[fy*stride:fy*stride+cw], fh, bias)
	}
}

// upsampleRow fills out from the chroma row near (and, for vertical
// interpolation, far: colsum = 3*near + far, then bias as libjpeg's
// h1v2/h2v2 rounding), horizontally by factor fh.
func upsampleRow(out, near, far []byte, fh, bias int) {
	col := func(i int) int {
		if far == nil {
			return 4 * int(near[i])
		}
		return 3*int(near[i]) + int(far[i])
	}
	n := len(near)
	switch fh {
	case 1:
		for i := range out {
			out[i] = byte((col(i) + bias) >> 2)
		}
	case 2:
		// libjpeg h2v1/h2v2 fancy: 3/4 of this column, 1/4 of the
		// neighbour on the output sample's side, rounding biases 8 and 7
		// on colsums of weight 16.
		for i := 0; i < n; i++ {
			this := col(i)
			prev, next := this, this
			if i > 0 {
				prev = col(i - 1)
			}
			if i+1 < n {
				next = col(i + 1)
			}
			if 2*i < len(out) {
				out[2*i] = byte((3*this + prev + 8) >> 4)
			}
			if 2*i+1 < len(out) {
				out[2*i+1] = byte((3*this + next + 7) >> 4)
			}
		}
	default:
		for i := range out {
			out[i] = byte((col(i/fh) + 2) >> 2)
		}
	}
}
