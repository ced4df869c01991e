package transforms

import "time"

// contentSums are the per-channel sums of the values of the output
// elements inside the letterbox content rectangle, and of their squares,
// added up by the normalizer as it writes each row: the statistics the
// pipeline keeps per sample (image_stats), without a second pass that
// reads the finished tensor back. The additions happen in exactly the
// order of a pass over the CHW tensor in channel, row, column order (each
// channel has its own accumulators, rows are written top to bottom, each
// from left to right), so the sums are bit for bit what such a pass gives.
type contentSums struct {
	n          int64
	sum, sumSq [3]float64
}

// addRow adds one packed RGB row whose elements take the values of table
// value.
func (s *contentSums) addRow(value *[3][256]float64, rgb []byte) {
	s0, s1, s2 := s.sum[0], s.sum[1], s.sum[2]
	q0, q1, q2 := s.sumSq[0], s.sumSq[1], s.sumSq[2]
	v0t, v1t, v2t := &value[0], &value[1], &value[2]
	for i := 0; i+2 < len(rgb); i += 3 {
		v0, v1, v2 := v0t[rgb[i]], v1t[rgb[i+1]], v2t[rgb[i+2]]
		s0 += v0
		s1 += v1
		s2 += v2
		// float64(): each product rounded, so no architecture fuses it
		// into the addition (FMA).
		q0 += float64(v0 * v0)
		q1 += float64(v1 * v1)
		q2 += float64(v2 * v2)
	}
	s.sum[0], s.sum[1], s.sum[2] = s0, s1, s2
	s.sumSq[0], s.sumSq[1], s.sumSq[2] = q0, q1, q2
	s.n += int64(len(rgb) / 3)
}

// ContentSums returns, for the last image Apply or ApplyRGB wrote, the
// number of elements per channel inside the content rectangle (g.NewW x
// g.NewH) and the per-channel sums of their values and of the squares of
// their values: the value an element decodes to (float16 or float32), or
// for U8 its NormalizeTable value. They equal a pass over the tensor in
// channel, row, column order bit for bit. Valid only after a call that
// returned no error.
func (t *Transformer) ContentSums() (n int64, sum, sumSq [3]float64) {
	s := t.norm.sums
	return s.n, s.sum, s.sumSq
}

// Decode is Apply's decode alone, for benchmarks that compare a build with
// its decoder (bench/run.sh): the header, then the pixels at the size
// Apply would decode them at (JPEG: scaled in the DCT domain by the same
// rule), with no resampling or normalization. It returns that size.
func (t *Transformer) Decode(encoded []byte) (w, h int, err error) {
	t0 := time.Now()
	defer func() { t.timings.Decode += time.Since(t0) }()
	hdr, err := readHeader(encoded, t.maxPixels)
	if err != nil {
		return 0, 0, err
	}
	dw, dh := hdr.displayedSize()
	g, err := planGeometry(t.spec, dw, dh)
	if err != nil {
		return 0, 0, err
	}
	defer t.endImage()
	if err := t.reserve(hdr, decodeBytes(hdr, g, encoded)); err != nil {
		return 0, 0, err
	}
	pix, err := t.decodePixels(encoded, hdr, g)
	if err != nil {
		return 0, 0, err
	}
	return pix.w, pix.h, nil
}
