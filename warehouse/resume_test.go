package warehouse_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	"warehouse-etl/shard"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// elasticCase is a job of world ranks that took steps batches each and was
// resumed with world2 ranks (reading.md, "Resuming").
type elasticCase struct {
	n, batch, world, steps, world2 int
	shuffle                        Shuffle
	remainder                      Remainder
}

var elasticCases = []elasticCase{
	{50, 4, 2, 3, 2, ShuffleGlobal, DropRemainder},
	{50, 4, 2, 3, 1, ShuffleGlobal, DropRemainder},
	{50, 4, 2, 3, 3, ShuffleShards, PadRemainder},
	{50, 4, 1, 5, 4, ShuffleNone, PadRemainder},
	{50, 4, 2, 5, 4, ShuffleGlobal, DropRemainder}, // 10 positions left: 0 batches of 4 on 4 ranks
	{50, 4, 2, 5, 4, ShuffleGlobal, PadRemainder},  // ... 1 each, the last 6 rows repeats
	{50, 3, 3, 2, 8, ShuffleShards, PadRemainder},  // 32 left, 24 per round: 2 batches each
	{50, 5, 4, 2, 1, ShuffleGlobal, PadRemainder},  // 40 consumed of 60 padded: 10 left
	{97, 1, 8, 12, 3, ShuffleGlobal, DropRemainder},
	{97, 2, 3, 0, 5, ShuffleShards, DropRemainder}, // resumed before the first step
	{40, 4, 2, 5, 3, ShuffleGlobal, PadRemainder},  // resumed at the end of the epoch: nothing left
}

var testShardStarts = []int{0, 13, 26, 39}

func plan(t *testing.T, n int, opts BatchOptions) []PlannedBatch {
	t.Helper()
	p, err := PlanBatches(n, testShardStarts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResumeSameWorldIsTheUninterruptedRun: resumed at a batch boundary with
// the same world size, every rank gets exactly the rest of its batches.
func TestResumeSameWorldIsTheUninterruptedRun(t *testing.T) {
	for _, c := range elasticCases {
		for r := range c.world {
			base := BatchOptions{BatchSize: c.batch, Seed: 9, Epoch: 4, Rank: r, WorldSize: c.world, Shuffle: c.shuffle, Remainder: c.remainder}
			whole := plan(t, c.n, base)
			resumed := base
			resumed.StartPosition = Position(0, c.steps, c.world, c.batch)
			rest := plan(t, c.n, resumed)
			if c.steps > len(whole) {
				t.Fatalf("%+v: %d steps of %d", c, c.steps, len(whole))
			}
			if !slices.EqualFunc(rest, whole[c.steps:], func(a, b PlannedBatch) bool {
				return slices.Equal(a.Indices, b.Indices) && a.Repeats == b.Repeats
			}) {
				t.Errorf("%+v rank %d: resumed %v, want %v", c, r, rest, whole[c.steps:])
			}
		}
	}
}

// TestResumeElastic: W ranks take k steps, W' ranks take the rest: every
// position of the order is read at most once (drop) or every sample at
// least once and the repeats only at the end (pad), the positions left out
// being only a tail shorter than W'*B.
func TestResumeElastic(t *testing.T) {
	for _, c := range elasticCases {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			order := EpochOrder(c.n, testShardStarts, c.shuffle, 3, 1)
			pos := map[int]int{} // sample -> position in the order
			for p, i := range order {
				pos[i] = p
			}
			seen := map[int]int{}
			repeats := 0
			take := func(world, start, steps int) int {
				got := 0
				for r := range world {
					opts := BatchOptions{BatchSize: c.batch, Seed: 3, Epoch: 1, Rank: r, WorldSize: world, Shuffle: c.shuffle, Remainder: c.remainder, StartPosition: start}
					p := plan(t, c.n, opts)
					if steps >= 0 {
						p = p[:steps]
					}
					got = len(p)
					for _, b := range p {
						for _, i := range b.Indices[:len(b.Indices)-b.Repeats] {
							seen[i]++
						}
						repeats += b.Repeats
					}
				}
				return got
			}
			take(c.world, 0, c.steps)
			start := Position(0, c.steps, c.world, c.batch)
			after := take(c.world2, start, -1)
			rest := max(0, c.n-start)
			per := c.world2 * c.batch
			wantAfter := rest / per
			if c.remainder == PadRemainder {
				wantAfter = (rest + per - 1) / per
			}
			if after != wantAfter {
				t.Fatalf("%d batches per rank after the resume, want %d", after, wantAfter)
			}
			end := min(c.n, start+after*per) // positions read
			for i, k := range seen {
				if k != 1 {
					t.Fatalf("sample %d read %d times", i, k)
				}
				if pos[i] >= end {
					t.Fatalf("sample %d at position %d, beyond %d", i, pos[i], end)
				}
			}
			if len(seen) != end {
				t.Fatalf("%d samples read, want the first %d positions", len(seen), end)
			}
			if c.remainder == PadRemainder {
				if len(seen) != c.n && start < c.n {
					t.Fatalf("pad: %d of %d samples read", len(seen), c.n)
				}
				if start < c.n && repeats != start+after*per-c.n {
					t.Fatalf("pad: %d repeats, want %d", repeats, start+after*per-c.n)
				}
			} else if c.n-end >= per {
				t.Fatalf("drop: %d positions left out, want fewer than %d", c.n-end, per)
			}
		})
	}
}

// TestResumeIteratorReadsThePlan: the iterator of a resumed epoch hands out
// PlanOrder's batches, read from the warehouse.
func TestResumeIteratorReadsThePlan(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, ShardSizes: []int{3, 3, 2}})
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, start := range []int{0, 1, 5, 7, 8, 20} {
		opts := BatchOptions{BatchSize: 2, Seed: 1, Epoch: 2, Rank: 0, WorldSize: 1, Shuffle: ShuffleGlobal, Remainder: PadRemainder, StartPosition: start}
		checkBatches(t, r, fx.Layout, opts)
	}
	if _, err := PlanBatches(8, nil, BatchOptions{BatchSize: 2, StartPosition: -1}); err == nil || err.Error() != "start position -1: must be >= 0" {
		t.Errorf("negative start: %v", err)
	}
}

func TestMixQuotas(t *testing.T) {
	for _, tc := range []struct {
		weights []float64
		total   int
		want    []int
	}{
		{[]float64{1}, 7, []int{7}},
		{[]float64{1, 1}, 7, []int{4, 3}},              // tie: the lower index
		{[]float64{0.7, 0.2, 0.1}, 10, []int{7, 2, 1}}, // 7.000000000000001, 2, 1: exact in spirit
		{[]float64{3, 1}, 10, []int{8, 2}},             // 7.5, 2.5: tie, lower index
		{[]float64{1, 2, 3}, 100, []int{17, 33, 50}},
		{[]float64{1e-9, 1}, 5, []int{0, 5}},
	} {
		if got := MixQuotas(tc.weights, tc.total); !slices.Equal(got, tc.want) {
			t.Errorf("MixQuotas(%v, %d) = %v, want %v", tc.weights, tc.total, got, tc.want)
		}
	}
}

// TestMixOrder: each warehouse gives its quota every epoch, taken from its
// own stream of epoch orders in turn, so consecutive epochs of the mixture
// walk every warehouse's passes without skipping or repeating; one
// warehouse alone is EpochOrder.
func TestMixOrder(t *testing.T) {
	sizes := []int{10, 7}
	starts := [][]int{{0, 4}, {0}}
	quotas := []int{6, 9} // warehouse 1 passes more than once per epoch
	for _, shuffle := range []Shuffle{ShuffleNone, ShuffleGlobal, ShuffleShards} {
		var stream [2][]int
		for e := range 4 {
			o := MixOrder(sizes, starts, quotas, shuffle, 11, e)
			if len(o) != 15 {
				t.Fatalf("len %d", len(o))
			}
			for _, i := range o {
				if i < 10 {
					stream[0] = append(stream[0], i)
				} else {
					stream[1] = append(stream[1], i-10)
				}
			}
			if len(stream[0]) != 6*(e+1) || len(stream[1]) != 9*(e+1) {
				t.Fatalf("%v epoch %d: quotas %d, %d", shuffle, e, len(stream[0]), len(stream[1]))
			}
		}
		for k, n := range sizes {
			var want []int
			for pass := 0; len(want) < len(stream[k]); pass++ {
				want = append(want, EpochOrder(n, starts[k], shuffle, 11^Mix64(uint64(k)), pass)...)
			}
			if !slices.Equal(stream[k], want[:len(stream[k])]) {
				t.Errorf("%v warehouse %d: stream %v, want %v", shuffle, k, stream[k], want)
			}
		}
		if got, want := MixOrder([]int{10}, [][]int{{0, 4}}, []int{10}, shuffle, 11, 3), EpochOrder(10, []int{0, 4}, shuffle, 11, 3); !slices.Equal(got, want) {
			t.Errorf("%v: one warehouse %v, want %v", shuffle, got, want)
		}
	}
	a, b := MixOrder(sizes, starts, quotas, ShuffleGlobal, 11, 1), MixOrder(sizes, starts, quotas, ShuffleGlobal, 11, 2)
	if slices.Equal(a, b) {
		t.Error("two epochs interleave alike")
	}
}

// TestMixtureReads: a mixture of two warehouses of one layout reads each
// row from its warehouse, resumes like one warehouse, and refuses another
// layout.
func TestMixtureReads(t *testing.T) {
	spec := warehousetest.Spec{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, ShardSizes: []int{3, 3, 2}}
	fa, fb := warehousetest.Write(t, spec), warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, ShardSizes: []int{4, 1}})
	ra, err := Open(fa.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	rb, err := Open(fb.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	m, err := NewMixture([]BatchSource{ra, rb}, []float64{1, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 13 || m.EpochSamples() != 13 || !slices.Equal(m.Quotas(), []int{3, 10}) {
		t.Fatalf("len %d epoch %d quotas %v", m.Len(), m.EpochSamples(), m.Quotas())
	}
	opts := BatchOptions{BatchSize: 2, Seed: 4, Epoch: 1, WorldSize: 2, Rank: 1, Shuffle: ShuffleGlobal, Remainder: PadRemainder, StartPosition: 4}
	order := m.EpochOrder(opts.Shuffle, opts.Seed, opts.Epoch)
	want, err := PlanOrder(order, opts)
	if err != nil {
		t.Fatal(err)
	}
	it, err := NewBatchIterator(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	img := int(fa.Layout.ImageBytes())
	for n := 0; ; n++ {
		b, err := it.Next()
		if err == io.EOF {
			if n != len(want) {
				t.Fatalf("%d batches, want %d", n, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.Indices, want[n].Indices) || b.Repeats != want[n].Repeats {
			t.Fatalf("batch %d: %v, want %+v", n, b.Indices, want[n])
		}
		for j, i := range b.Indices {
			part, s := m.Locate(i)
			if part != 0 && i < 8 || part != 1 && i >= 8 || s != i-m.Offset(part) {
				t.Fatalf("Locate(%d) = %d, %d", i, part, s)
			}
			if !bytes.Equal(b.Images[j*img:(j+1)*img], warehousetest.WantImageBytes(fa.Layout, s)) {
				t.Fatalf("batch %d row %d (warehouse %d sample %d): image differs", n, j, part, s)
			}
		}
	}
	fc := warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 6, Height: 3, MaxBoxes: 2, ShardSizes: []int{2}})
	rc, err := Open(fc.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, tc := range []struct {
		parts   []BatchSource
		weights []float64
		epoch   int
		want    string
	}{
		{[]BatchSource{ra, rc}, []float64{1, 1}, 0, "mixture: warehouse 1 has layout"},
		{[]BatchSource{ra, rb}, []float64{1, 0}, 0, "mixture: warehouse 1: weight 0, want a finite weight > 0"},
		{[]BatchSource{ra, rb}, []float64{1}, 0, "mixture: 2 warehouses and 1 weights"},
		{[]BatchSource{ra, rb}, []float64{1, 1e-6}, 0, "mixture: warehouse 1 gets 0 of 13 samples per epoch"},
	} {
		if _, err := NewMixture(tc.parts, tc.weights, tc.epoch); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("NewMixture(%v): %v, want %q", tc.weights, err, tc.want)
		}
	}
}
