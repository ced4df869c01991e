package pipeline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"sync"

	"github.com/x448/float16"

	"warehouse-etl/dtype"
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

// u8Tables caches transforms.NormalizeTable per normalization.
var u8Tables sync.Map // [2][3]float64 -> *[3][256]float32

// contentSums sums the values of a CHW tensor of spec inside the letterbox
// content rectangle of g, reading the tensor back: the reference that
// transformSums (what the build uses) must equal. Summation order is fixed (channel, row, column),
// so the result is the same on every run. A U8 tensor is summed as the
// float32 values its readers' normalization gives (the F32 build's values),
// so image statistics compare across dtypes.
func contentSums(img []byte, spec transforms.Spec, g transforms.Geometry) channelSums {
	var s channelSums
	d, width, height := spec.DType, spec.Width, spec.Height
	plane := width * height
	table := f16Table()
	var u8Table *[3][256]float32
	if d == dtype.U8 {
		key := [2][3]float64{spec.Mean, spec.Std}
		t, ok := u8Tables.Load(key)
		if !ok {
			t, _ = u8Tables.LoadOrStore(key, transforms.NormalizeTable(spec.Mean, spec.Std))
		}
		u8Table = t.(*[3][256]float32)
	}
	for c := range 3 {
		var sum, sumSq float64
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			row := c*plane + y*width + g.PadX
			for x := range g.NewW {
				var v float64
				switch d {
				case dtype.U8:
					v = float64(u8Table[c][img[row+x]])
				case dtype.F16:
					v = float64(table[binary.LittleEndian.Uint16(img[2*(row+x):])])
				default:
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

// transformSums are the sums of the image tr last wrote, which it added up
// while writing (Transformer.ContentSums): bit for bit contentSums of that
// tensor and its geometry (TestTransformSumsEqualContentSums), without
// reading the tensor back.
func transformSums(tr *transforms.Transformer) channelSums {
	n, sum, sumSq := tr.ContentSums()
	return channelSums{n: n, sum: sum, sumSq: sumSq}
}

// imageSums accumulates many samples' channelSums exactly: each sample's
// float64 sums are scaled by 2^32 and truncated to integers, and the
// integers are added. Integer addition is associative, so the total does
// not depend on how samples were grouped (per shard, per partition) or
// added up; only the final division rounds.
type imageSums struct {
	n          int64
	sum, sumSq [3]big.Int
}

// fixedShift is the fixed-point scale of imageSums: 2^-32 resolution per
// sample sum, far below a float32 value's precision.
const fixedShift = 32

// add accumulates one sample's sums.
func (s *imageSums) add(o channelSums) {
	s.n += o.n
	var f big.Float
	var i big.Int
	for c := range 3 {
		f.SetFloat64(o.sum[c]).SetMantExp(&f, fixedShift).Int(&i)
		s.sum[c].Add(&s.sum[c], &i)
		f.SetFloat64(o.sumSq[c]).SetMantExp(&f, fixedShift).Int(&i)
		s.sumSq[c].Add(&s.sumSq[c], &i)
	}
}

// merge accumulates another accumulator (a shard's).
func (s *imageSums) merge(o *imageSums) {
	s.n += o.n
	for c := range 3 {
		s.sum[c].Add(&s.sum[c], &o.sum[c])
		s.sumSq[c].Add(&s.sumSq[c], &o.sumSq[c])
	}
}

// stats turns the sums into the manifest's image statistics.
func (s *imageSums) stats() warehouse.ImageStats {
	st := warehouse.ImageStats{Values: s.n}
	if s.n == 0 {
		return st
	}
	n := float64(s.n)
	value := func(i *big.Int) float64 {
		v, _ := new(big.Float).SetInt(i).Float64()
		return math.Ldexp(v, -fixedShift)
	}
	for c := range 3 {
		mean := value(&s.sum[c]) / n
		st.Mean[c] = mean
		st.Std[c] = math.Sqrt(max(0, value(&s.sumSq[c])/n-float64(mean*mean))) // float64(): no FMA, same bytes on every architecture
	}
	return st
}

// imageSumsJSON is how a shard record carries imageSums (big integers as
// JSON numbers: exact).
type imageSumsJSON struct {
	N     int64       `json:"n"`
	Sum   [3]*big.Int `json:"sum"`
	SumSq [3]*big.Int `json:"sum_sq"`
}

func (s imageSums) MarshalJSON() ([]byte, error) {
	j := imageSumsJSON{N: s.n}
	for c := range 3 {
		j.Sum[c], j.SumSq[c] = &s.sum[c], &s.sumSq[c]
	}
	return json.Marshal(j)
}

func (s *imageSums) UnmarshalJSON(b []byte) error {
	var j imageSumsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	s.n = j.N
	for c := range 3 {
		if j.Sum[c] == nil || j.SumSq[c] == nil {
			return errors.New("sums: missing channel")
		}
		s.sum[c].Set(j.Sum[c])
		s.sumSq[c].Set(j.SumSq[c])
	}
	return nil
}
