package shard

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// CopyRows and ImageSpan over every run of a shard agree with the
// per-sample accessors, with and without a meta section.
func TestCopyRowsAndImageSpan(t *testing.T) {
	l := Layout{DType: F16, Width: 3, Height: 2, Channels: 3, MaxBoxes: 3, ExtraF32: 2}
	rng := rand.New(rand.NewPCG(3, 4))
	b, _ := writeShard(t, l, 5, randomSamples(rng, l, 5))
	for _, meta := range []bool{true, false} {
		data := b
		if !meta {
			data = withoutMeta(t, b)
		}
		r := mustParse(t, data)
		e := r.Layout().ExtraF32
		for i := range r.Len() {
			for n := 0; i+n <= r.Len(); n++ {
				dst := Rows{
					Boxes: make([]byte, n*l.MaxBoxes*4*2), Mask: make([]byte, n*l.MaxBoxes*2),
					ClassIndex: make([]int32, n*l.MaxBoxes), BoxCount: make([]int32, n),
					Meta: make([]Meta, n), Extras: make([]float32, n*e),
				}
				for k := range dst.ClassIndex {
					dst.ClassIndex[k] = 99 // stale contents must be overwritten
				}
				r.CopyRows(i, dst)
				off, length := r.ImageSpan(i, n)
				if n > 0 && !bytes.Equal(data[off:off+int64(length)], slices.Concat(imagesOf(r, i, n)...)) {
					t.Fatalf("meta %v run [%d,%d): ImageSpan (%d, %d) is not the images", meta, i, i+n, off, length)
				}
				for j := range n {
					s := i + j
					classes := append(r.ClassIndex(s), -1, -1, -1)[:l.MaxBoxes]
					if !meta {
						classes = []int32{-1, -1, -1}
					}
					switch {
					case !bytes.Equal(dst.Boxes[j*24:(j+1)*24], r.BoxesRaw(s)) || !bytes.Equal(dst.Mask[j*6:(j+1)*6], r.MaskRaw(s)):
						t.Fatalf("meta %v sample %d: boxes or mask differ", meta, s)
					case int(dst.BoxCount[j]) != r.BoxCount(s) || dst.Meta[j] != r.Meta(s):
						t.Fatalf("meta %v sample %d: box count %d meta %+v", meta, s, dst.BoxCount[j], dst.Meta[j])
					case !slices.Equal(dst.ClassIndex[j*3:(j+1)*3], classes):
						t.Fatalf("meta %v sample %d: classes %v, want %v", meta, s, dst.ClassIndex[j*3:(j+1)*3], classes)
					case !slices.Equal(dst.Extras[j*e:(j+1)*e], r.Extras(s)) && e > 0:
						t.Fatalf("meta %v sample %d: extras %v, want %v", meta, s, dst.Extras[j*e:(j+1)*e], r.Extras(s))
					}
				}
			}
		}
	}
	r := mustParse(t, b)
	for _, run := range [][2]int{{-1, 1}, {4, 2}, {0, 6}, {2, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ImageSpan(%d, %d) did not panic", run[0], run[1])
				}
			}()
			r.ImageSpan(run[0], run[1])
		}()
	}
}

func imagesOf(r *Reader, i, n int) [][]byte {
	out := make([][]byte, n)
	for j := range out {
		out[j] = r.Image(i + j)
	}
	return out
}
