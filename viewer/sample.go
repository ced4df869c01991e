package viewer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"warehouse-etl/analytics/records"
	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
)

type boxRow struct {
	Class string
	Norm  [4]float32
	Px    [4]float64
	Color string
}

type extraRow struct {
	Name, Shape, DType, Values string
}

// polyline is one component of an extra over the neighbouring frames.
type polyline struct {
	Points string
	Color  string
}

// plot is one extra across the run around the sample, as an SVG.
type plot struct {
	Name       string
	Lines      []polyline
	Min, Max   float64
	MarkX      float64
	Width      int
	Height     int
	Components int
}

// samplePage is the body of one sample's page.
type samplePage struct {
	Rec           *records.SampleLine
	Seq           int
	Attributes    map[string]string
	Reasons       []reasonRow
	HasImage      bool
	Width, Height int
	Boxes         []boxRow
	Meta          *shard.Meta
	Extras        []extraRow
	Label         []labelRow // a rejected sample's label as the build read it
	Neighbours    []tile
	Plots         []plot
	PlotFrames    string
	Prev, Next    int // seqs, -1 when none
}

// neighbours is how many frames on each side of a sample its page shows;
// plotWindow how many on each side its extras plots cover.
const (
	neighbours = 3
	plotWindow = 40
)

// plotColors draw an extra's components.
var plotColors = []string{"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// sampleBody describes sample seq.
func (v *Viewer) sampleBody(seq int) (*samplePage, error) {
	ix, err := v.sampleIndex()
	if err != nil {
		return nil, err
	}
	rec, err := ix.record(v.samples, seq)
	if err != nil {
		return nil, err
	}
	p := &samplePage{Rec: rec, Seq: seq, Prev: seq - 1, Next: seq + 1}
	if p.Next >= ix.len() {
		p.Next = -1
	}
	for _, s := range v.m.Sources {
		if int64(s.Index) == rec.SourceIndex {
			p.Attributes = s.Attributes
		}
	}
	for _, r := range rec.Reasons {
		p.Reasons = append(p.Reasons, reasonRow{Code: r, Class: string(validate.Reason(r).Class()), Words: describeReason(r)})
	}
	t, err := v.tileOf(ix, seq)
	if err != nil {
		return nil, err
	}
	p.HasImage = t.HasImage
	if rec.Kept {
		// Small targets are shown enlarged by a whole factor (pixelated).
		k := max(1, 384/max(v.m.Transform.TargetWidth, v.m.Transform.TargetHeight))
		p.Width, p.Height = k*v.m.Transform.TargetWidth, k*v.m.Transform.TargetHeight
		s, err := v.r.Sample(int(rec.Index))
		if err != nil {
			return nil, err
		}
		meta := s.Meta()
		p.Meta = &meta
		for _, b := range render.SampleBoxes(v.m, s) {
			p.Boxes = append(p.Boxes, boxRow{Class: b.Name, Norm: b.Box, Color: cssColor(b.Color.R, b.Color.G, b.Color.B),
				Px: [4]float64{float64(b.Box[0]) * float64(p.Width), float64(b.Box[1]) * float64(p.Height), float64(b.Box[2]) * float64(p.Width), float64(b.Box[3]) * float64(p.Height)}})
		}
		extras := s.Extras()
		for _, e := range v.m.Extras {
			n := elements(e.Shape)
			vals := make([]string, n)
			for i, x := range extras[e.Offset : e.Offset+n] {
				vals[i] = fmt.Sprintf("%.4g", x)
			}
			p.Extras = append(p.Extras, extraRow{Name: e.Name, Shape: fmt.Sprint(e.Shape), DType: e.SourceDType, Values: strings.Join(vals, " ")})
		}
	}
	if !rec.Kept {
		w, h := int(rec.Width), int(rec.Height)
		for _, c := range v.labelRows(seq, rec, w, h) {
			p.Label = append(p.Label, c.row)
		}
		if p.HasImage {
			p.Width, p.Height = v.rejectedSize(seq, rec, FullSize, 384)
		}
	}
	run := ix.bySource[int32(rec.SourceIndex)]
	at, _ := slices.BinarySearch(run, int32(seq))
	if len(v.m.Extras) > 0 || v.m.Source.Kind != "capture" {
		for _, n := range run[max(0, at-neighbours):min(len(run), at+neighbours+1)] {
			if int(n) == seq {
				continue
			}
			nt, err := v.tileOf(ix, int(n))
			if err != nil {
				return nil, err
			}
			p.Neighbours = append(p.Neighbours, nt)
		}
	}
	if len(v.m.Extras) > 0 {
		if err := v.plotExtras(ix, p, run, at); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func cssColor(r, g, b uint8) string { return fmt.Sprintf("#%02x%02x%02x", r, g, b) }

// plotExtras draws every extra (up to len(plotColors) components each)
// over the kept frames of the run within plotWindow of the sample.
func (v *Viewer) plotExtras(ix *sampleIndex, p *samplePage, run []int32, at int) error {
	lo, hi := max(0, at-plotWindow), min(len(run), at+plotWindow+1)
	type point struct {
		x    int
		vals []float32
	}
	var pts []point
	for k, seq := range run[lo:hi] {
		i := ix.index[seq]
		if i < 0 {
			continue
		}
		s, err := v.r.Sample(int(i))
		if err != nil {
			return err
		}
		pts = append(pts, point{x: lo + k, vals: slices.Clone(s.Extras())})
	}
	if len(pts) == 0 {
		return nil
	}
	p.PlotFrames = fmt.Sprintf("frames %d..%d of the run (kept ones)", lo, hi-1)
	const w, h = 320, 80
	xOf := func(x int) float64 { return 4 + float64(w-8)*float64(x-lo)/math.Max(1, float64(hi-1-lo)) }
	for _, e := range v.m.Extras {
		n := min(elements(e.Shape), len(plotColors))
		pl := plot{Name: e.Name, Width: w, Height: h, Components: elements(e.Shape), Min: math.Inf(1), Max: math.Inf(-1), MarkX: xOf(at)}
		for _, pt := range pts {
			for c := range n {
				x := float64(pt.vals[e.Offset+c])
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					pl.Min, pl.Max = math.Min(pl.Min, x), math.Max(pl.Max, x)
				}
			}
		}
		if math.IsInf(pl.Min, 0) {
			continue
		}
		span := math.Max(pl.Max-pl.Min, 1e-9)
		for c := range n {
			var b strings.Builder
			for _, pt := range pts {
				x := float64(pt.vals[e.Offset+c])
				if math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				fmt.Fprintf(&b, "%.1f,%.1f ", xOf(pt.x), 4+float64(h-8)*(1-(x-pl.Min)/span))
			}
			pl.Lines = append(pl.Lines, polyline{Points: strings.TrimSpace(b.String()), Color: plotColors[c]})
		}
		p.Plots = append(p.Plots, pl)
	}
	return nil
}
