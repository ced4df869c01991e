package pipeline

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/x448/float16"

	"warehouse-etl/transforms"
	"warehouse-etl/warehouse"
)

// channelSums are per-channel sums over one or many samples' image content.
type channelSums struct {
	n          int64 // values per channel
	sum, sumSq [3]float64
}

// f16Table decodes every float16 bit pattern once.
var f16Table = sync.OnceValue(func() []float32 {
	t := make([]float32, 1<<16)
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return t
})

// contentSums sums the values of a CHW tensor inside the letterbox content
// rectangle of g. Summation order is fixed (channel, row, column), so the
// result is the same on every run.
func contentSums(img []byte, d transforms.DType, width, height int, g transforms.Geometry) channelSums {
	var s channelSums
	plane := width * height
	table := f16Table()
	for c := range 3 {
		var sum, sumSq float64
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			row := c*plane + y*width + g.PadX
			for x := range g.NewW {
				var v float64
				if d == transforms.F16 {
					v = float64(table[binary.LittleEndian.Uint16(img[2*(row+x):])])
				} else {
					v = float64(math.Float32frombits(binary.LittleEndian.Uint32(img[4*(row+x):])))
				}
				sum += v
				sumSq += float64(v * v) // float64(): rounded, so no architecture fuses it (FMA)
			}
		}
		s.sum[c], s.sumSq[c] = sum, sumSq
	}
	s.n = int64(g.NewW) * int64(g.NewH)
	return s
}

// add accumulates another sample's sums (in plan order, for determinism).
func (s *channelSums) add(o channelSums) {
	s.n += o.n
	for c := range 3 {
		s.sum[c] += o.sum[c]
		s.sumSq[c] += o.sumSq[c]
	}
}

// stats turns the sums into the manifest's image statistics.
func (s channelSums) stats() warehouse.ImageStats {
	st := warehouse.ImageStats{Values: s.n}
	if s.n == 0 {
		return st
	}
	n := float64(s.n)
	for c := range 3 {
		mean := s.sum[c] / n
		st.Mean[c] = mean
		st.Std[c] = math.Sqrt(max(0, s.sumSq[c]/n-float64(mean*mean))) // float64(): no FMA, same bytes on every architecture
	}
	return st
}
