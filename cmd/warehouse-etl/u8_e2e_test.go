package main

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// u8Pair builds the small demo twice through the CLI, identical but for
// dtype, and opens both.
func u8Pair(t *testing.T, other string, overrides map[string]any) (u8, ref *warehouse.Reader) {
	t.Helper()
	open := func(dtype string) *warehouse.Reader {
		o := map[string]any{"dtype": dtype, "pad_value": 9}
		for k, v := range overrides {
			o[k] = v
		}
		dir, _ := smallDemo(t, o)
		r, err := warehouse.Open(dir, warehouse.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	return open("u8"), open(other)
}

// A u8 build stores the pixels an f16/f32 build normalizes: round(255 x the
// f16 value) without normalization, and through the reader's table bit for
// bit the f32 build's values with it. Boxes, masks, classes, meta and the
// manifest's image statistics agree with the f32 build's exactly.
func TestU8BuildMatchesFloatBuilds(t *testing.T) {
	t.Run("round(255 x f16)", func(t *testing.T) {
		u8, f16 := u8Pair(t, "f16", map[string]any{"target_size": []int{97, 61}})
		if u8.Layout().DType != shard.U8 || u8.Manifest().DefaultDType != "U8" || u8.Manifest().Transform.DType != "u8" {
			t.Fatalf("u8 build: layout %v, manifest %s/%s", u8.Layout().DType, u8.Manifest().DefaultDType, u8.Manifest().Transform.DType)
		}
		if u8.Len() != f16.Len() || u8.Len() == 0 {
			t.Fatalf("%d u8 samples, %d f16", u8.Len(), f16.Len())
		}
		if u8.Manifest().Version == f16.Manifest().Version {
			t.Fatal("u8 and f16 builds share a version id")
		}
		for i := range u8.Len() {
			a, b := mustSample(t, u8, i), mustSample(t, f16, i)
			px, h := a.ImageU8(), b.ImageF16()
			for k := range px {
				if back := math.Round(255 * float64(float16.Frombits(h[k]).Float32())); back != float64(px[k]) {
					t.Fatalf("sample %d element %d: u8 %d, round(255 x f16) %v", i, k, px[k], back)
				}
			}
			checkSameBoxes(t, i, a, b)
		}
	})
	t.Run("normalized = f32", func(t *testing.T) {
		norm := map[string]any{"mean": []float64{0.485, 0.456, 0.406}, "std": []float64{0.229, 0.224, 0.225}}
		u8, f32 := u8Pair(t, "f32", map[string]any{"target_size": []int{64, 80}, "normalize": norm})
		if u8.Len() != f32.Len() {
			t.Fatalf("%d u8 samples, %d f32", u8.Len(), f32.Len())
		}
		if a, b := u8.Manifest().ImageStats, f32.Manifest().ImageStats; a != b {
			t.Errorf("image_stats: u8 %+v, f32 %+v", a, b)
		}
		table := u8.NormalizeTable()
		for i := range u8.Len() {
			a, b := mustSample(t, u8, i), mustSample(t, f32, i)
			px, want := a.ImageU8(), b.ImageF32()
			plane := 64 * 80
			for k := range px {
				if got := table[k/plane][px[k]]; math.Float32bits(got) != math.Float32bits(want[k]) {
					t.Fatalf("sample %d element %d: table(u8 %d) = %v, f32 build %v", i, k, px[k], got, want[k])
				}
			}
			checkSameBoxes(t, i, a, b)
		}
		// Whole batches: Batch.NormalizeImages gives the f32 build's batch.
		it, err := u8.Batches(context.Background(), warehouse.BatchOptions{BatchSize: 5, Seed: 3, Shuffle: warehouse.ShuffleGlobal})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var dst []float32
		batches := 0
		for {
			b, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			dst = b.NormalizeImages(dst, table)
			per := len(dst) / b.Len()
			for j, idx := range b.Indices {
				want := mustSample(t, f32, idx).ImageF32()
				for k, v := range dst[j*per : (j+1)*per] {
					if math.Float32bits(v) != math.Float32bits(want[k]) {
						t.Fatalf("batch %d row %d (sample %d) element %d: %v, f32 build %v", b.Number, j, idx, k, v, want[k])
					}
				}
			}
			batches++
		}
		if batches == 0 {
			t.Fatal("no batches")
		}
	})
}

func mustSample(t *testing.T, r *warehouse.Reader, i int) warehouse.Sample {
	t.Helper()
	s, err := r.Sample(i)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSameBoxes compares a u8 sample's f32 boxes, mask, classes and meta
// with another build's (f16 boxes compare after their rounding).
func checkSameBoxes(t *testing.T, i int, u8, other warehouse.Sample) {
	t.Helper()
	if u8.Meta() != other.Meta() {
		t.Fatalf("sample %d: meta %+v vs %+v", i, u8.Meta(), other.Meta())
	}
	a, b := u8.Boxes(), other.Boxes()
	if len(a) != len(b) || len(u8.ClassIndex()) != len(other.ClassIndex()) {
		t.Fatalf("sample %d: %d vs %d boxes", i, len(a), len(b))
	}
	for j := range a {
		if u8.ClassIndex()[j] != other.ClassIndex()[j] {
			t.Fatalf("sample %d box %d: class %d vs %d", i, j, u8.ClassIndex()[j], other.ClassIndex()[j])
		}
		for k := range 4 {
			want := b[j][k]
			if other.DType() == shard.F16 {
				want = a[j][k]
				if float16.Fromfloat32(a[j][k]).Float32() != b[j][k] {
					t.Fatalf("sample %d box %d: u8 build %v rounds to %v, f16 build %v", i, j, a[j], float16.Fromfloat32(a[j][k]).Float32(), b[j])
				}
			}
			if math.Float32bits(a[j][k]) != math.Float32bits(want) {
				t.Fatalf("sample %d box %d: %v vs %v", i, j, a[j], b[j])
			}
		}
	}
	raw := u8.MaskRaw()
	for j, m := range other.Mask() {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); got != m {
			t.Fatalf("sample %d mask[%d]: %v vs %v", i, j, got, m)
		}
	}
}

// The rest of the CLI takes a u8 warehouse as it takes the others: verify
// --full finds nothing, load reads it, inspect describes it.
func TestU8WarehouseThroughTheCLI(t *testing.T) {
	dir, _ := smallDemo(t, map[string]any{"dtype": "u8", "target_size": []int{33, 17}})
	for _, args := range [][]string{
		{"verify", "--full", "--tensor-warehouse", dir},
		{"load", "--tensor-warehouse", dir, "--batch", "4", "--epochs", "2", "--quiet"},
		{"inspect", "--tensor-warehouse", dir},
	} {
		res := runCLI(t, context.Background(), nil, args...)
		if res.code != exitOK {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		if args[0] == "inspect" && !strings.Contains(res.stdout, "U8") {
			t.Errorf("inspect does not name the dtype:\n%s", res.stdout)
		}
	}
}
