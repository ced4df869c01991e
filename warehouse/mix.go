package warehouse

import (
	"context"
	"fmt"
	"math"
	"sort"

	"warehouse-etl/shard"
)

// A Mixture reads several warehouses of one layout as one BatchSource:
// each epoch draws Quota(m) samples from warehouse m, interleaved in an
// order that depends only on (seed, epoch), so every rank computes it
// alone (docs/format/reading.md, "Mixtures"). Its sample indices are the
// warehouses' concatenated: index i of the mixture is sample i-Offset(m)
// of warehouse m (Locate).
type Mixture struct {
	parts   []BatchSource
	weights []float64
	offsets []int // offsets[m] = sum of Len() of parts before m; one more: the total
	quotas  []int
	epoch   int // samples per epoch: the sum of quotas
	layout  shard.Layout
	pool    batchPool // the buffers of the last iterator, for the next (as a Reader's)
	advice  adviceMemory
}

// mixSalt seeds the stream that interleaves the warehouses (ASCII "mixture!").
const mixSalt = 0x6D69787475726521

// NewMixture mixes parts by weights (finite, > 0). epochSamples is the
// epoch's length in samples; 0 means the sum of the parts' lengths, which
// visits every sample once per epoch on average when the weights are
// proportional to the sizes. Every part must have the same layout (dtype,
// image shape, max_boxes, extras; compact storage may differ) and every part must get at least one
// sample per epoch.
func NewMixture(parts []BatchSource, weights []float64, epochSamples int) (*Mixture, error) {
	if len(parts) == 0 || len(parts) != len(weights) {
		return nil, fmt.Errorf("mixture: %d warehouses and %d weights: want one weight per warehouse, at least one", len(parts), len(weights))
	}
	m := &Mixture{parts: parts, weights: weights, offsets: []int{0}, layout: tensorLayout(parts[0].Layout())}
	for k, p := range parts {
		w := weights[k]
		if math.IsNaN(w) || math.IsInf(w, 0) || !(w > 0) {
			return nil, fmt.Errorf("mixture: warehouse %d: weight %v, want a finite weight > 0", k, w)
		}
		if p.Len() == 0 {
			return nil, fmt.Errorf("mixture: warehouse %d has no samples", k)
		}
		if l := tensorLayout(p.Layout()); l != m.layout {
			return nil, fmt.Errorf("mixture: warehouse %d has layout %+v, warehouse 0 %+v: a mixture needs one dtype, image shape, max_boxes and extras", k, l, m.layout)
		}
		m.offsets = append(m.offsets, m.offsets[k]+p.Len())
	}
	if epochSamples < 0 {
		return nil, fmt.Errorf("mixture: epoch samples %d: must be >= 0", epochSamples)
	}
	if epochSamples == 0 {
		epochSamples = m.offsets[len(parts)]
	}
	m.epoch = epochSamples
	m.quotas = MixQuotas(weights, epochSamples)
	for k, q := range m.quotas {
		if q == 0 {
			return nil, fmt.Errorf("mixture: warehouse %d gets 0 of %d samples per epoch with weight %v: raise its weight or the epoch length", k, epochSamples, weights[k])
		}
	}
	if ra := normalizationOf(parts[0]); ra != nil {
		for k, p := range parts[1:] {
			if nk := normalizationOf(p); nk != nil && *nk != *ra {
				return nil, fmt.Errorf("mixture: warehouse %d is normalised with mean/std %v, warehouse 0 with %v: a mixture needs one normalisation", k+1, *nk, *ra)
			}
		}
	}
	return m, nil
}

// normalizationOf is a *Reader's U8 normalisation table, nil for anything
// else.
func normalizationOf(x any) *[3][256]float32 {
	if r, ok := x.(*Reader); ok && r.Layout().DType == shard.U8 {
		return r.NormalizeTable()
	}
	return nil
}

// MixQuotas splits an epoch of total samples over warehouses by weight:
// q_m = floor(total*w_m/sum(w)) in float64 (sum left to right), then the
// samples left over go one each to the warehouses with the largest
// fractional parts, the lower index first on ties (the largest remainder
// method; reading.md, "Mixtures").
func MixQuotas(weights []float64, total int) []int {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	q := make([]int, len(weights))
	frac := make([]float64, len(weights))
	left := total
	for k, w := range weights {
		x := float64(total) * w / sum
		f := math.Floor(x)
		q[k], frac[k] = int(f), x-f
		left -= q[k]
	}
	rank := make([]int, len(weights))
	for k := range rank {
		rank[k] = k
	}
	sort.SliceStable(rank, func(a, b int) bool { return frac[rank[a]] > frac[rank[b]] })
	for k := 0; left > 0 && len(rank) > 0; k = (k + 1) % len(rank) {
		q[rank[k]]++
		left--
	}
	return q
}

// Len is the number of distinct samples (the parts' lengths summed); an
// epoch has EpochSamples.
func (m *Mixture) Len() int { return m.offsets[len(m.parts)] }

// EpochSamples is the length of an epoch of the mixture.
func (m *Mixture) EpochSamples() int { return m.epoch }

// Quotas is how many samples each warehouse gives every epoch.
func (m *Mixture) Quotas() []int { return append([]int(nil), m.quotas...) }

// Offset is the mixture index of warehouse k's sample 0.
func (m *Mixture) Offset(k int) int { return m.offsets[k] }

// Locate is the warehouse and its sample number of mixture index i.
func (m *Mixture) Locate(i int) (part, sample int) {
	k := sort.Search(len(m.parts), func(k int) bool { return m.offsets[k+1] > i })
	return k, i - m.offsets[k]
}

// tensorLayout is l without its storage fields (Compact, Pad): the
// layout of the tensors a reader hands out, which a compact part restores
// to the plain layout's bytes, so a compact and a plain u8 warehouse mix.
func tensorLayout(l shard.Layout) shard.Layout {
	l.Compact, l.Pad = false, 0
	return l
}

// Layout is the parts' common tensor layout (without Compact and Pad:
// each part reads its own storage).
func (m *Mixture) Layout() shard.Layout { return m.layout }

// ShardStarts lists every part's shards in mixture indices.
func (m *Mixture) ShardStarts() []int {
	var out []int
	for k, p := range m.parts {
		for _, s := range p.ShardStarts() {
			out = append(out, m.offsets[k]+s)
		}
	}
	return out
}

// ReadSampleInto reads mixture sample i from its warehouse.
func (m *Mixture) ReadSampleInto(i int, dst SampleSlot) error {
	if i < 0 || i >= m.Len() {
		return fmt.Errorf("mixture: sample %d out of range [0, %d)", i, m.Len())
	}
	k, j := m.Locate(i)
	return m.parts[k].ReadSampleInto(j, dst)
}

// ReadRunInto reads a run of consecutive mixture samples, by the parts'
// ReadRunInto where they have one.
func (m *Mixture) ReadRunInto(first, n int, b *Batch, row int) error {
	if first < 0 || n < 0 || first > m.Len()-n {
		return fmt.Errorf("mixture: samples [%d, %d) out of range [0, %d)", first, first+n, m.Len())
	}
	for n > 0 {
		k, j := m.Locate(first)
		c := min(n, m.offsets[k+1]-first)
		if rr, ok := m.parts[k].(runReader); ok {
			if err := rr.ReadRunInto(j, c, b, row); err != nil {
				return err
			}
		} else {
			for q := range c {
				if err := m.parts[k].ReadSampleInto(j+q, b.Slot(row+q)); err != nil {
					return err
				}
			}
		}
		first, row, n = first+c, row+c, n-c
	}
	return nil
}

// Batches starts an iterator over one rank's batches of one epoch of the
// mixture (NewBatchIterator); its buffers go back to the mixture on Close
// for the next iterator, as a Reader's do.
func (m *Mixture) Batches(ctx context.Context, opts BatchOptions) (*BatchIterator, error) {
	return newBatchIterator(ctx, m, opts, &m.pool)
}

// EpochOrder is the mixture's order of one epoch (reading.md, "Mixtures"):
// EpochSamples mixture indices.
func (m *Mixture) EpochOrder(shuffle Shuffle, seed uint64, epoch int) []int {
	sizes := make([]int, len(m.parts))
	starts := make([][]int, len(m.parts))
	for k, p := range m.parts {
		sizes[k], starts[k] = p.Len(), p.ShardStarts()
	}
	return MixOrder(sizes, starts, m.quotas, shuffle, seed, epoch)
}

// MixOrder is the order of epoch e of a mixture of warehouses of sizes
// sizes (shard starts starts) drawing quotas[m] samples each per epoch:
//
//   - warehouse m's samples come from its own endless stream of epoch
//     orders, pass k = EpochOrder(sizes[m], starts[m], shuffle, seed^mix64(m), k)
//     concatenated; epoch e takes stream positions [e*q_m, (e+1)*q_m);
//   - which warehouse each position of the epoch reads: the list of
//     q_0 zeros, q_1 ones, ..., shuffled by the stream of
//     (seed^mixSalt, e) (whatever shuffle says);
//   - position p reads warehouse m = label[p]'s next sample of its stream,
//     as a mixture index (its offset added).
//
// One warehouse with its own length as the epoch is EpochOrder itself.
func MixOrder(sizes []int, starts [][]int, quotas []int, shuffle Shuffle, seed uint64, epoch int) []int {
	total := 0
	for _, q := range quotas {
		total += q
	}
	labels := make([]int, 0, total)
	for k, q := range quotas {
		for range q {
			labels = append(labels, k)
		}
	}
	newOrderStream(seed^mixSalt, epoch).shuffle(labels)
	streams := make([][]int, len(sizes))
	offset := 0
	for k, n := range sizes {
		q := quotas[k]
		first := epoch * q // stream position of this epoch's first sample
		s := make([]int, 0, q)
		for pass := first / n; len(s) < q; pass++ {
			order := EpochOrder(n, starts[k], shuffle, seed^mix64(uint64(k)), pass)
			from := 0
			if pass == first/n {
				from = first % n
			}
			take := min(n-from, q-len(s))
			for _, i := range order[from : from+take] {
				s = append(s, offset+i)
			}
		}
		streams[k] = s
		offset += n
	}
	next := make([]int, len(sizes))
	for p, k := range labels {
		labels[p] = streams[k][next[k]]
		next[k]++
	}
	return labels
}
