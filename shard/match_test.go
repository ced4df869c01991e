package shard

import (
	"math/rand/v2"
	"testing"
)

// TestMatchesExceptImages: a shard matches the samples it was written
// from whatever their images say, and a difference anywhere but in the
// image bytes is named.
func TestMatchesExceptImages(t *testing.T) {
	layouts := []Layout{
		{DType: U8, Width: 5, Height: 3, Channels: 3, MaxBoxes: 4},
		{DType: F16, Width: 7, Height: 5, Channels: 3, MaxBoxes: 4},
		{DType: F32, Width: 6, Height: 3, Channels: 3, MaxBoxes: 5, ExtraF32: 3},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, l := range layouts {
		t.Run(l.DType.String(), func(t *testing.T) {
			samples := randomSamples(rng, l, 6)
			b, _ := writeShard(t, l, len(samples), samples)
			r := mustParse(t, b)
			labelsOnly := func() []Sample {
				out := make([]Sample, len(samples))
				copy(out, samples)
				for i := range out {
					out[i].Image = nil
				}
				return out
			}
			if err := r.MatchesExceptImages(l, labelsOnly()); err != nil {
				t.Fatalf("the samples it was written from: %v", err)
			}

			cases := []struct {
				name string
				edit func([]Sample) ([]Sample, Layout)
				want string
			}{
				{"box moved", func(s []Sample) ([]Sample, Layout) {
					s[2].Boxes = append([][4]float32{{0, 0, 0.5, 0.5}}, s[2].Boxes...)
					s[2].ClassIndex = append([]int32{1}, s[2].ClassIndex...)
					if len(s[2].Boxes) > l.MaxBoxes {
						s[2].Boxes, s[2].ClassIndex = s[2].Boxes[:l.MaxBoxes], s[2].ClassIndex[:l.MaxBoxes]
					}
					return s, l
				}, "shard: the boxes of sample 2 differ"},
				{"meta", func(s []Sample) ([]Sample, Layout) { s[4].Meta.FrameID++; return s, l }, "shard: the records of sample 4 differ"},
				{"one sample less", func(s []Sample) ([]Sample, Layout) { return s[:5], l }, "shard: 6 samples, want 5"},
				{"other layout", func(s []Sample) ([]Sample, Layout) { l2 := l; l2.Width++; return s, l2 }, "shard: layout"},
				{"compact", func(s []Sample) ([]Sample, Layout) { l2 := l; l2.Compact = true; return s, l2 },
					"shard: a compact shard is not compared without its images"},
			}
			if l.ExtraF32 > 0 {
				cases = append(cases, struct {
					name string
					edit func([]Sample) ([]Sample, Layout)
					want string
				}{"extras", func(s []Sample) ([]Sample, Layout) {
					s[1].Extras = append([]float32(nil), s[1].Extras...)
					s[1].Extras[0]++
					return s, l
				}, "shard: the extras of sample 1 differ"})
			}
			for _, c := range cases {
				s, l2 := c.edit(labelsOnly())
				err := r.MatchesExceptImages(l2, s)
				if err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
					t.Errorf("%s: got %v, want %q...", c.name, err, c.want)
				}
			}

			// A flipped image byte still matches (images are not
			// compared) but fails that sample's CRC-32C.
			flipped := append([]byte(nil), b...)
			off, _ := r.ImageSpan(3, 1)
			flipped[off+1] ^= 0x10
			r2 := mustParse(t, flipped)
			if err := r2.MatchesExceptImages(l, labelsOnly()); err != nil {
				t.Fatalf("flipped image byte: %v", err)
			}
			if err := r2.VerifySample(3, nil); err == nil {
				t.Fatal("flipped image byte: VerifySample passed")
			}
			// A flipped checksum table byte does not match.
			bad := append([]byte(nil), b...)
			bad[len(bad)-1] ^= 1
			if r3, err := Parse(bad); err == nil {
				if err := r3.MatchesExceptImages(l, labelsOnly()); err == nil {
					t.Fatal("flipped checksum table CRC: matched")
				}
			}
		})
	}
}
