package analytics

import (
	"context"
	"math"

	"warehouse-etl/warehouse"
)

// histBins is the resolution of the box size histograms: sizes are
// normalized to [0,1], so quantiles and the KS distance are exact to
// 1/histBins. A histogram keeps Compare's memory independent of the
// number of boxes, where an exact KS would sort every box.
const histBins = 1024

// histogram counts values in [0,1] in histBins equal bins; values outside
// are clamped into the first or last bin.
type histogram struct {
	bins [histBins]int64
	n    int64
	sum  float64
}

func (h *histogram) add(v float64) {
	i := int(v * histBins)
	i = max(0, min(i, histBins-1))
	h.bins[i]++
	h.n++
	h.sum += v
}

// quantile returns the midpoint of the bin holding the q-quantile, or 0
// for an empty histogram.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	// The smallest bin whose cumulative count reaches ceil(q*n) (at least 1).
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var cum int64
	for i, c := range h.bins {
		cum += c
		if cum >= rank {
			return (float64(i) + 0.5) / histBins
		}
	}
	return 1
}

// ksDistance is the two-sample Kolmogorov-Smirnov statistic of a and b,
// max |CDF_a - CDF_b|, evaluated at the bin edges. It is undefined (ok
// false) when both are empty and 1 when exactly one is: every box is new.
func ksDistance(a, b *histogram) (d float64, ok bool) {
	switch {
	case a.n == 0 && b.n == 0:
		return 0, false
	case a.n == 0 || b.n == 0:
		return 1, true
	}
	var ca, cb int64
	for i := range histBins {
		ca += a.bins[i]
		cb += b.bins[i]
		d = max(d, math.Abs(float64(ca)/float64(a.n)-float64(cb)/float64(b.n)))
	}
	return d, true
}

// Distribution summarises one box size histogram.
type Distribution struct {
	Mean float64 `json:"mean"`
	P10  float64 `json:"p10"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
}

func (h *histogram) distribution() Distribution {
	if h.n == 0 {
		return Distribution{}
	}
	return Distribution{Mean: h.sum / float64(h.n), P10: h.quantile(0.1), P50: h.quantile(0.5), P90: h.quantile(0.9)}
}

// boxStats are the box statistics of one version's shards.
type boxStats struct {
	boxes               int64
	perClass            map[string]int64 // class name -> boxes
	width, height, area histogram        // normalized to the target size
}

// readBoxStats walks every kept sample's boxes in the shards.
func readBoxStats(ctx context.Context, dir string, m *warehouse.Manifest) (*boxStats, error) {
	names := classNameTable(m)
	st := &boxStats{perClass: map[string]int64{}}
	c := newShardCursor(dir, m)
	defer c.close()
	for index := range m.Samples {
		r, entry, i, err := c.at(index)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		boxes := r.Boxes(i)
		classes := r.ClassIndex(i) // nil without meta records
		for j, b := range boxes {
			name := unknownClass
			if classes != nil {
				n, ok := names[int64(classes[j])]
				if !ok {
					return nil, corruptf("%s[%d]: class index %d is not in the manifest's class table", entry.ID, i, classes[j])
				}
				name = n
			}
			st.perClass[name]++
			w, h := float64(b[2]-b[0]), float64(b[3]-b[1])
			st.width.add(w)
			st.height.add(h)
			st.area.add(float64(w * h)) // rounded here: no architecture may fuse it into the sum
			st.boxes++
		}
	}
	return st, nil
}

// unknownClass names the class of boxes in shards without meta records.
const unknownClass = "(unknown)"
