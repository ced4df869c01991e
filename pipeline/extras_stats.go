package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"os"
	"path/filepath"
	"slices"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// episodesRecipe is the recipe's "episodes" entry of a build with extras:
// the layout of episodes.bin and of extra_stats. Versions built before
// either have no such key, so their ids differ and they are never reused
// as if they had them.
const episodesRecipe = "episodes.bin/1,extra_stats/1"

// writeEpisodes reads every sample's episode (source_index), step
// (frame_id) and extras back from the shards of m in the version directory
// tmp, in sample order, writes episodes.bin and records it and the extras'
// statistics in m. Reading the shards, not the workers' results, makes
// both a function of the shard bytes alone: the same for any worker or
// partition count. Nothing happens for a build without extras. Memory:
// samples x (12 + 4 x extra_f32) bytes, plus one column's copy to sort.
func writeEpisodes(ctx context.Context, tmp string, m *warehouse.Manifest, extraF32 int) error {
	if extraF32 == 0 {
		return nil
	}
	ep := &warehouse.Episodes{
		Episode: make([]uint32, 0, m.Samples), Step: make([]uint64, 0, m.Samples),
		Extras: make([]float32, 0, m.Samples*int64(extraF32)), E: extraF32,
	}
	for _, s := range m.Shards {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := shard.Open(filepath.Join(tmp, filepath.FromSlash(s.RelativePath)))
		if err != nil {
			return err
		}
		if r.Layout().ExtraF32 != extraF32 {
			r.Close()
			return fmt.Errorf("pipeline: %s holds %d extras per sample, the build %d", s.RelativePath, r.Layout().ExtraF32, extraF32)
		}
		for i := range r.Len() {
			meta := r.Meta(i)
			ep.Episode = append(ep.Episode, meta.SourceIndex)
			ep.Step = append(ep.Step, meta.FrameID)
			ep.Extras = append(ep.Extras, r.Extras(i)...)
		}
		if err := r.Close(); err != nil {
			return err
		}
	}
	if int64(ep.Len()) != m.Samples {
		return fmt.Errorf("pipeline: the shards hold %d samples, the manifest says %d", ep.Len(), m.Samples)
	}
	stats, err := extraStats(m.Extras, ep)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(tmp, warehouse.EpisodesName))
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(fsfault.File{File: f}, 1<<20)
	if err := warehouse.EncodeEpisodes(bw, ep); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	m.ExtraStats, m.Files.Episodes = stats, warehouse.EpisodesName
	return nil
}

// extraStats computes extra_stats for the extras xs over the samples of
// ep (docs/format/manifest.md): exact sums, exact min and max, quantiles
// of the sorted column. Every result is a function of the multiset of
// values, so neither sample order nor worker count changes a bit.
func extraStats(xs []warehouse.Extra, ep *warehouse.Episodes) ([]warehouse.ExtraStats, error) {
	n := ep.Len()
	out := make([]warehouse.ExtraStats, len(xs))
	col := make([]float32, n)
	for xi, x := range xs {
		dim := 1
		for _, d := range x.Shape {
			dim *= d
		}
		st := warehouse.ExtraStats{Name: x.Name, Count: int64(n)}
		for c := range dim {
			k := x.Offset + c
			if k >= ep.E {
				return nil, fmt.Errorf("pipeline: extra %s channel %d beyond the %d extras", x.Name, c, ep.E)
			}
			for i := range n {
				col[i] = ep.Extras[i*ep.E+k]
			}
			mean, std, err := exactMeanStd(col)
			if err != nil {
				return nil, fmt.Errorf("pipeline: extra %s channel %d: %w", x.Name, c, err)
			}
			slices.Sort(col)
			st.Mean = append(st.Mean, mean)
			st.Std = append(st.Std, std)
			if n == 0 {
				st.Min, st.Max, st.Q01, st.Q99 = append(st.Min, 0), append(st.Max, 0), append(st.Q01, 0), append(st.Q99, 0)
				continue
			}
			st.Min = append(st.Min, float64(col[0]))
			st.Max = append(st.Max, float64(col[n-1]))
			st.Q01 = append(st.Q01, quantileLinear(col, 0.01))
			st.Q99 = append(st.Q99, quantileLinear(col, 0.99))
		}
		out[xi] = st
	}
	return out, nil
}

// quantileLinear is numpy's default ("linear") quantile of the sorted
// values: h = (n-1)q, lo = floor(h), g = h - lo, then lerp(x[lo], x[lo+1],
// g) computed as numpy's _lerp does: a + (b-a)g, or b - (b-a)(1-g) when
// g >= 0.5, in float64 (each product rounded on its own: no fused
// multiply-add).
func quantileLinear(sorted []float32, q float64) float64 {
	n := len(sorted)
	h := float64(float64(n-1) * q) // rounded here: g = h - lo must not fuse with the product
	lo := math.Floor(h)
	i := int(lo)
	if i >= n-1 {
		return float64(sorted[n-1])
	}
	g := h - lo
	a, b := float64(sorted[i]), float64(sorted[i+1])
	diff := b - a
	if g >= 0.5 {
		return b - float64(diff*(1-g))
	}
	return a + float64(diff*g)
}

// exactMeanStd returns the mean and the population standard deviation of
// v, computed exactly and rounded once each: every finite float32 is
// m x 2^(s-149) with an integer |m| < 2^24 and 0 <= s < 254, so the sums
// of m and of m^2 are kept per exponent in integers (a superaccumulator)
// and combined in big integers at the end. std is the correctly rounded
// square root of the variance rounded to float64.
func exactMeanStd(v []float32) (mean, std float64, err error) {
	if len(v) == 0 {
		return 0, 0, nil
	}
	var sum [254]int64    // sum of signed m at scale 2^(s-149); |m| < 2^24, so 2^39 values fit
	var sq [507][2]uint64 // sum of m^2 at scale 2^(2s-298), 128-bit (hi, lo)
	for _, x := range v {
		b := math.Float32bits(x)
		e := int(b>>23) & 0xff
		if e == 0xff {
			return 0, 0, fmt.Errorf("non-finite value %v", x)
		}
		m := int64(b & (1<<23 - 1))
		s := 0
		if e != 0 {
			m |= 1 << 23
			s = e - 1
		}
		m2 := uint64(m * m)
		if b>>31 != 0 {
			m = -m
		}
		sum[s] += m
		lo, carry := bits.Add64(sq[2*s][1], m2, 0)
		sq[2*s][1], sq[2*s][0] = lo, sq[2*s][0]+carry
	}
	s1, s2 := new(big.Int), new(big.Int)
	t := new(big.Int)
	for s := len(sum) - 1; s >= 0; s-- {
		if sum[s] != 0 {
			s1.Add(s1, t.Lsh(t.SetInt64(sum[s]), uint(s)))
		}
	}
	for s := len(sq) - 1; s >= 0; s-- {
		if sq[s] != [2]uint64{} {
			t.SetUint64(sq[s][0])
			t.Lsh(t, 64)
			t.Or(t, new(big.Int).SetUint64(sq[s][1]))
			s2.Add(s2, t.Lsh(t, uint(s)))
		}
	}
	n := big.NewInt(int64(len(v)))
	// mean = s1 / (n 2^149); var = (n s2 - s1^2) / (n^2 2^298).
	meanR := new(big.Rat).SetFrac(s1, new(big.Int).Lsh(n, 149))
	mean, _ = meanR.Float64()
	num := new(big.Int).Sub(new(big.Int).Mul(n, s2), new(big.Int).Mul(s1, s1))
	den := new(big.Int).Lsh(new(big.Int).Mul(n, n), 298)
	variance, _ := new(big.Rat).SetFrac(num, den).Float64()
	return mean, math.Sqrt(variance), nil
}
