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

// contentSums sums the values of a CHW tensor of spec inside the letterbox
// content rectangle of g, reading the tensor back: the reference that
// transformSums (what the build uses) must equal, and the sums of a reused
// image (reuse.go). Summation order is fixed per channel (row, column), so
// the result is the same on every run. A U8 tensor is summed as the
// float32 values its readers' normalization gives (the F32 build's values),
// so image statistics compare across dtypes.
//
// The three channels' sums are independent chains of float64 additions, so
// they are added up side by side, one row of each channel per step: each
// chain sees its values in the same order as a channel-after-channel loop
// (contentSumsSerial in the tests), so the sums are bit for bit the same,
// while the CPU overlaps the six chains' additions instead of waiting on
// one (a third of the time on a 384x384 u8 image).
func contentSums(img []byte, spec transforms.Spec, g transforms.Geometry) channelSums {
	var s channelSums
	width, height := spec.Width, spec.Height
	plane := width * height
	var acc [6]float64 // sum, sumSq of channels 0, 1, 2
	switch spec.DType {
	case dtype.U8:
		t := u8SumTable(spec)
		v0, v1, v2 := &t.v[0], &t.v[1], &t.v[2]
		q0, q1, q2 := &t.sq[0], &t.sq[1], &t.sq[2]
		s0, s1, s2, sq0, sq1, sq2 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			o := y*width + g.PadX
			r0 := img[o : o+g.NewW]
			r1 := img[plane+o : plane+o+len(r0)]
			r2 := img[2*plane+o : 2*plane+o+len(r0)]
			r1, r2 = r1[:len(r0)], r2[:len(r0)]
			for x, b0 := range r0 {
				b1, b2 := r1[x], r2[x]
				s0 += v0[b0]
				sq0 += q0[b0]
				s1 += v1[b1]
				sq1 += q1[b1]
				s2 += v2[b2]
				sq2 += q2[b2]
			}
		}
		acc = [6]float64{s0, s1, s2, sq0, sq1, sq2}
	case dtype.F16:
		table := f16Table()
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			o := y*width + g.PadX
			for x := range g.NewW {
				for c := range 3 {
					v := float64(table[binary.LittleEndian.Uint16(img[2*(c*plane+o+x):])])
					acc[c] += v
					acc[3+c] += float64(v * v) // float64(): rounded, so no architecture fuses it (FMA)
				}
			}
		}
	default:
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			o := y*width + g.PadX
			for x := range g.NewW {
				for c := range 3 {
					v := float64(math.Float32frombits(binary.LittleEndian.Uint32(img[4*(c*plane+o+x):])))
					acc[c] += v
					acc[3+c] += float64(v * v) // float64(): rounded, so no architecture fuses it (FMA)
				}
			}
		}
	}
	for c := range 3 {
		s.sum[c], s.sumSq[c] = acc[c], acc[3+c]
	}
	s.n = int64(g.NewW) * int64(g.NewH)
	return s
}

// u8SumTables caches u8SumTable per normalization.
var u8SumTables sync.Map // [2][3]float64 -> *u8Sums

// u8Sums are a U8 byte's normalized value (transforms.NormalizeTable, in
// float32, widened) and that value's square as contentSums squares it (in
// float64, rounded once), per channel.
type u8Sums struct {
	v, sq [3][256]float64
}

func u8SumTable(spec transforms.Spec) *u8Sums {
	key := [2][3]float64{spec.Mean, spec.Std}
	if t, ok := u8SumTables.Load(key); ok {
		return t.(*u8Sums)
	}
	norm := transforms.NormalizeTable(spec.Mean, spec.Std)
	t := new(u8Sums)
	for c := range 3 {
		for b := range 256 {
			v := float64(norm[c][b])
			t.v[c][b], t.sq[c][b] = v, float64(v*v)
		}
	}
	got, _ := u8SumTables.LoadOrStore(key, t)
	return got.(*u8Sums)
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
