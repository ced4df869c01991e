package warehouse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

func TestEpochOrder(t *testing.T) {
	starts := []int{0, 4, 8}
	const n = 11
	isPermutation := func(order []int) bool {
		sorted := slices.Sorted(slices.Values(order))
		for i, v := range sorted {
			if v != i {
				return false
			}
		}
		return len(order) == n
	}
	if got := EpochOrder(n, starts, ShuffleNone, 1, 5); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("ShuffleNone: %v", got)
	}
	for _, mode := range []Shuffle{ShuffleGlobal, ShuffleShards} {
		a := EpochOrder(n, starts, mode, 42, 0)
		if !isPermutation(a) {
			t.Fatalf("%v: %v is not a permutation", mode, a)
		}
		if !slices.Equal(a, EpochOrder(n, starts, mode, 42, 0)) {
			t.Fatalf("%v: same seed and epoch, different order", mode)
		}
		if slices.Equal(a, EpochOrder(n, starts, mode, 42, 1)) || slices.Equal(a, EpochOrder(n, starts, mode, 43, 0)) {
			t.Fatalf("%v: another epoch or seed gave the same order %v", mode, a)
		}
	}
	// Shard-local: each shard's samples come as one contiguous run.
	for e := range 20 {
		order := EpochOrder(n, starts, ShuffleShards, 9, e)
		shardOf := func(i int) int { return slices.IndexFunc(starts, func(s int) bool { return s > i }) }
		runs := 1
		for j := 1; j < n; j++ {
			if shardOf(order[j]) != shardOf(order[j-1]) {
				runs++
			}
		}
		if runs != len(starts) {
			t.Fatalf("epoch %d: %v visits shards in %d runs, want %d", e, order, runs, len(starts))
		}
	}
}

func TestPlanBatches(t *testing.T) {
	const n = 11
	starts := []int{0, 4, 8}
	tests := []struct {
		name      string
		opts      BatchOptions
		perRank   int
		repeats   int // over all ranks
		unseen    int // samples no rank sees
		wantError string
	}{
		{name: "one rank drop", opts: BatchOptions{BatchSize: 3}, perRank: 3, unseen: 2},
		{name: "one rank pad", opts: BatchOptions{BatchSize: 3, Remainder: PadRemainder}, perRank: 4, repeats: 1},
		{name: "two ranks drop", opts: BatchOptions{BatchSize: 2, WorldSize: 2, Shuffle: ShuffleGlobal}, perRank: 2, unseen: 3},
		{name: "two ranks pad", opts: BatchOptions{BatchSize: 2, WorldSize: 2, Shuffle: ShuffleShards, Remainder: PadRemainder}, perRank: 3, repeats: 1},
		{name: "three ranks pad", opts: BatchOptions{BatchSize: 4, WorldSize: 3, Remainder: PadRemainder, Shuffle: ShuffleGlobal}, perRank: 1, repeats: 1},
		{name: "exact fit", opts: BatchOptions{BatchSize: 11, Shuffle: ShuffleGlobal}, perRank: 1},
		{name: "too few samples to drop", opts: BatchOptions{BatchSize: 4, WorldSize: 3},
			wantError: "11 samples cannot fill one batch of 4 on each of 3 ranks; use a smaller batch or pad the remainder"},
		{name: "bad rank", opts: BatchOptions{BatchSize: 1, Rank: 2, WorldSize: 2}, wantError: "rank 2 of world size 2: want 0 <= rank < world size"},
		{name: "bad batch", opts: BatchOptions{}, wantError: "batch size 0: must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantError != "" {
				if _, err := PlanBatches(n, starts, tt.opts); err == nil || err.Error() != tt.wantError {
					t.Fatalf("error %v, want %q", err, tt.wantError)
				}
				return
			}
			world := max(tt.opts.WorldSize, 1)
			seen := map[int]int{}
			repeats := 0
			var all [][]int
			for rank := range world {
				o := tt.opts
				o.Rank = rank
				batches, err := PlanBatches(n, starts, o)
				if err != nil {
					t.Fatal(err)
				}
				if len(batches) != tt.perRank {
					t.Fatalf("rank %d: %d batches, want %d", rank, len(batches), tt.perRank)
				}
				for _, b := range batches {
					if len(b.Indices) != max(o.BatchSize, 1) {
						t.Fatalf("batch of %d", len(b.Indices))
					}
					for _, i := range b.Indices {
						seen[i]++
					}
					repeats += b.Repeats
					all = append(all, b.Indices)
				}
			}
			if repeats != tt.repeats {
				t.Fatalf("%d repeats, want %d", repeats, tt.repeats)
			}
			if unseen := n - len(seen); unseen != tt.unseen {
				t.Fatalf("%d samples unseen, want %d", unseen, tt.unseen)
			}
			// Dealing is round robin over the epoch's order: concatenating
			// global batch t = rank t%W's batch t/W gives the order back.
			order := EpochOrder(n, starts, tt.opts.Shuffle, tt.opts.Seed, tt.opts.Epoch)
			for t2 := range len(all) {
				rank, local := t2%world, t2/world
				b := all[rank*tt.perRank+local]
				for j, i := range b {
					if want := order[(t2*len(b)+j)%n]; i != want {
						t.Fatalf("global batch %d row %d: sample %d, want %d", t2, j, i, want)
					}
				}
			}
		})
	}
}

func TestParseShuffleAndRemainder(t *testing.T) {
	for _, s := range []Shuffle{ShuffleNone, ShuffleGlobal, ShuffleShards} {
		if got, err := ParseShuffle(s.String()); err != nil || got != s {
			t.Errorf("ParseShuffle(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseShuffle("random"); err == nil || err.Error() != `shuffle "random": want none, global or shard` {
		t.Errorf("ParseShuffle(random): %v", err)
	}
	for _, r := range []Remainder{DropRemainder, PadRemainder} {
		if got, err := ParseRemainder(r.String()); err != nil || got != r {
			t.Errorf("ParseRemainder(%q) = %v, %v", r, got, err)
		}
	}
	if _, err := ParseRemainder("keep"); err == nil || err.Error() != `remainder "keep": want drop or pad` {
		t.Errorf("ParseRemainder(keep): %v", err)
	}
}

func TestBatchIteratorDeliversPlannedSamples(t *testing.T) {
	for _, spec := range []warehousetest.Spec{
		warehousetest.DefaultSpec(),
		{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, Extras: [][]int{{3}}, ShardSizes: []int{3, 3, 2}},
	} {
		fx := warehousetest.Write(t, spec)
		r, err := Open(fx.Dir, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Every shuffle (ShuffleNone reads runs that cross shard
		// boundaries), and a second epoch whose buffers come from the
		// pool with the first epoch's bytes still in them.
		for _, tc := range []struct {
			shuffle Shuffle
			epoch   int
		}{{ShuffleGlobal, 2}, {ShuffleNone, 2}, {ShuffleShards, 2}, {ShuffleShards, 3}, {ShuffleNone, 3}} {
			opts := BatchOptions{BatchSize: 3, Seed: 5, Epoch: tc.epoch, Rank: 1, WorldSize: 2, Shuffle: tc.shuffle, Remainder: PadRemainder, Prefetch: 2, Workers: 2}
			checkBatches(t, r, fx.Layout, opts)
		}
		// Batches split into pieces of one and two rows, filled by more
		// workers than batches in flight (runs cut at the pieces' edges).
		restore := SetMinPieceBytes(1)
		for _, w := range []int{2, 3, 5} {
			for _, sh := range []Shuffle{ShuffleNone, ShuffleGlobal} {
				checkBatches(t, r, fx.Layout, BatchOptions{BatchSize: 3, Seed: 7, Epoch: 1, Shuffle: sh, Remainder: PadRemainder, Prefetch: 1, Workers: w})
			}
		}
		restore()
		r.Close()
	}
}

// checkBatches reads one epoch of r with opts and compares every batch with
// the plan and every row with the fixture's closed forms.
func checkBatches(t *testing.T, r *Reader, l shard.Layout, opts BatchOptions) {
	t.Helper()
	{
		plan, err := PlanBatches(r.Len(), r.ShardStarts(), opts)
		if err != nil {
			t.Fatal(err)
		}
		it, err := r.Batches(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if it.Len() != len(plan) {
			t.Fatalf("Len %d, plan %d", it.Len(), len(plan))
		}
		for n := 0; ; n++ {
			b, err := it.Next()
			if err == io.EOF {
				if n != len(plan) {
					t.Fatalf("EOF after %d batches, want %d", n, len(plan))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Number != n || b.Epoch != opts.Epoch || !slices.Equal(b.Indices, plan[n].Indices) || b.Repeats != plan[n].Repeats {
				t.Fatalf("batch %d: number %d epoch %d indices %v repeats %d; plan %+v", n, b.Number, b.Epoch, b.Indices, b.Repeats, plan[n])
			}
			for j, i := range b.Indices {
				img := int(l.ImageBytes())
				if !bytes.Equal(b.Images[j*img:(j+1)*img], warehousetest.WantImageBytes(l, i)) {
					t.Fatalf("batch %d row %d (sample %d): image differs", n, j, i)
				}
				s, _ := r.Sample(i)
				slot := b.Slot(j)
				if !bytes.Equal(slot.Boxes, s.BoxesRaw()) || !bytes.Equal(slot.Mask, s.MaskRaw()) {
					t.Fatalf("sample %d: boxes or mask differ", i)
				}
				classes := warehousetest.WantClasses(i, l.MaxBoxes)
				for len(classes) < l.MaxBoxes {
					classes = append(classes, -1)
				}
				if !slices.Equal(slot.ClassIndex, classes) || int(*slot.BoxCount) != len(warehousetest.WantBoxes(i, l.MaxBoxes)) || *slot.Meta != warehousetest.WantMeta(i) {
					t.Fatalf("sample %d: class %v count %d meta %+v", i, slot.ClassIndex, *slot.BoxCount, *slot.Meta)
				}
				if !slices.Equal(slot.Extras, warehousetest.WantExtras(i, l.ExtraF32)) {
					t.Fatalf("sample %d: extras %v", i, slot.Extras)
				}
				// Typed views agree with the closed form.
				per := l.Channels * l.Height * l.Width
				for k := range per {
					var v float32
					if l.DType == shard.F16 {
						v = float16.Frombits(b.ImagesF16()[j*per+k]).Float32()
					} else {
						v = b.ImagesF32()[j*per+k]
					}
					if v != warehousetest.WantImageValue(i, k) {
						t.Fatalf("sample %d element %d: %v, want %v", i, k, v, warehousetest.WantImageValue(i, k))
					}
				}
				boxes := b.BoxesF32()[j*l.MaxBoxes*4:]
				for bi, box := range warehousetest.WantBoxes(i, l.MaxBoxes) {
					if [4]float32(boxes[bi*4:bi*4+4]) != box {
						t.Fatalf("BoxesF32 sample %d box %d: %v, want %v", i, bi, boxes[bi*4:bi*4+4], box)
					}
				}
				if m := b.MaskF32()[j*l.MaxBoxes:]; l.MaxBoxes > 0 && (m[0] == 1) != (len(warehousetest.WantBoxes(i, l.MaxBoxes)) > 0) {
					t.Fatalf("MaskF32 sample %d: %v", i, m[:l.MaxBoxes])
				}
			}
		}
		if _, err := it.Next(); err != io.EOF {
			t.Fatalf("Next after EOF: %v", err)
		}
		it.Close()
	}
}

// failingSource fails at index failAt (and at also, when set) and counts
// concurrent fills.
type failingSource struct {
	n, failAt int
	also      map[int]bool
	layout    shard.Layout
	calls     atomic.Int64
	delay     time.Duration
}

func (f *failingSource) Len() int             { return f.n }
func (f *failingSource) Layout() shard.Layout { return f.layout }
func (f *failingSource) ShardStarts() []int   { return []int{0} }
func (f *failingSource) ReadSampleInto(i int, dst SampleSlot) error {
	f.calls.Add(1)
	time.Sleep(f.delay)
	if i == f.failAt || f.also[i] {
		return fmt.Errorf("sample %d: disk on fire", i)
	}
	dst.Image[0] = byte(i)
	return nil
}

func TestBatchPieces(t *testing.T) {
	big := shard.Layout{DType: shard.U8, Width: 384, Height: 384, Channels: 3} // 442,368 bytes: 3 rows make 1 MiB
	tiny := shard.Layout{DType: shard.F16, Width: 1, Height: 1, Channels: 1}
	for _, tc := range []struct {
		l             shard.Layout
		size, workers int
		want          [][2]int
	}{
		{big, 32, 1, [][2]int{{0, 32}}},
		{big, 32, 2, [][2]int{{0, 16}, {16, 32}}},
		{big, 32, 8, [][2]int{{0, 4}, {4, 8}, {8, 12}, {12, 16}, {16, 20}, {20, 24}, {24, 28}, {28, 32}}},
		{big, 32, 16, [][2]int{{0, 3}, {3, 6}, {6, 9}, {9, 12}, {12, 15}, {15, 18}, {18, 21}, {21, 24}, {24, 27}, {27, 30}, {30, 32}}},
		{big, 5, 8, [][2]int{{0, 3}, {3, 5}}},
		{big, 1, 8, [][2]int{{0, 1}}},
		{tiny, 256, 8, [][2]int{{0, 256}}},
	} {
		if got := BatchPieces(tc.l, tc.size, tc.workers); !slices.Equal(got, tc.want) {
			t.Errorf("%dx%d, %d rows, %d workers: pieces %v, want %v", tc.l.Width, tc.l.Height, tc.size, tc.workers, got, tc.want)
		}
	}
}

func TestBatchIteratorErrorsAndCancel(t *testing.T) {
	l := shard.Layout{DType: shard.F16, Width: 1, Height: 1, Channels: 1, MaxBoxes: 1}
	src := &failingSource{n: 20, failAt: 9, layout: l}
	it, err := NewBatchIterator(context.Background(), src, BatchOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for {
		b, err := it.Next()
		if err != nil {
			if err.Error() != "sample 9: disk on fire" {
				t.Fatalf("error %v", err)
			}
			break
		}
		got = append(got, int(b.Images[0]), int(b.Images[2]))
	}
	if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("rows before the failure: %v", got)
	}
	if _, err := it.Next(); err == nil || err.Error() != "sample 9: disk on fire" {
		t.Fatalf("error is not sticky: %v", err)
	}
	it.Close()

	// A batch in pieces: the error is the first failing row's, as when the
	// rows are filled in order, whichever piece fails first in time (the
	// later row fails at once, the earlier one after a delay).
	restore := SetMinPieceBytes(1)
	defer restore()
	for _, w := range []int{1, 2, 5} {
		src := &failingSource{n: 20, failAt: 3, also: map[int]bool{8: true}, layout: l, delay: time.Millisecond}
		it, err := NewBatchIterator(context.Background(), src, BatchOptions{BatchSize: 10, Prefetch: 1, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := it.Next(); err == nil || err.Error() != "sample 3: disk on fire" {
			t.Fatalf("%d workers: error %v, want sample 3's", w, err)
		}
		it.Close()
	}

	// Prefetch is bounded: a consumer that stops leaves at most
	// (Prefetch+1) batches filled.
	slow := &failingSource{n: 1000, failAt: -1, layout: l}
	it, err = NewBatchIterator(context.Background(), slow, BatchOptions{BatchSize: 10, Prefetch: 2, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if calls := slow.calls.Load(); calls > 3*10 {
		t.Fatalf("%d samples read ahead of a consumer holding one batch; prefetch 2 allows 30", calls)
	}
	it.Close()

	// Cancelling the context stops Next.
	ctx, cancel := context.WithCancel(context.Background())
	slow2 := &failingSource{n: 1000, failAt: -1, layout: l, delay: time.Millisecond}
	it, err = NewBatchIterator(ctx, slow2, BatchOptions{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err := it.Next(); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("after cancel: %v", err)
			}
			break
		}
	}
	it.Close()
}

// BenchmarkBatches reads epochs of a 50 MB warehouse in each order; its
// "cat" case reads the same shard files the way cat does (128 KiB reads
// into one buffer), the reference the read path is measured against:
// compare MB/s (cat counts every shard byte, the others the image bytes).
func BenchmarkBatches(b *testing.B) {
	fx := warehousetest.Write(b, warehousetest.Spec{DType: shard.F16, Width: 256, Height: 256, MaxBoxes: 16, ShardSizes: []int{32, 32, 32, 32}})
	b.Run("cat", func(b *testing.B) {
		buf := make([]byte, 128<<10)
		var total int64
		for k := range 4 {
			fi, err := os.Stat(fx.ShardPath(k))
			if err != nil {
				b.Fatal(err)
			}
			total += fi.Size()
		}
		b.SetBytes(total)
		for b.Loop() {
			for k := range 4 {
				f, err := os.Open(fx.ShardPath(k))
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := f.Read(buf); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
			}
		}
	})
	// Per shuffle: the default reader (each sample's CRC-32C checked on
	// its first read, so in the first timed epoch only), CRCs on every
	// read (RecheckSamples) and none (SkipSampleChecksums).
	checks := []struct {
		suffix string
		opts   OpenOptions
	}{
		{"", OpenOptions{}},
		{"-recheck", OpenOptions{RecheckSamples: true}},
		{"-unchecked", OpenOptions{SkipSampleChecksums: true}},
	}
	for _, mode := range []Shuffle{ShuffleNone, ShuffleShards, ShuffleGlobal} {
		for _, c := range checks {
			b.Run(mode.String()+c.suffix, func(b *testing.B) { benchmarkBatches(b, fx, mode, c.opts) })
		}
	}
	// The first epoch of a process: a new Reader per iteration, so shard
	// opens, fresh batch buffers and (checked) every sample's first check.
	for _, c := range []struct {
		suffix string
		opts   OpenOptions
	}{checks[0], checks[2]} {
		b.Run("first-none"+c.suffix, func(b *testing.B) { benchmarkFirstEpoch(b, fx, c.opts) })
	}
}

// benchmarkFirstEpoch reads one epoch, in order, per iteration from a new
// Reader.
func benchmarkFirstEpoch(b *testing.B, fx *warehousetest.Fixture, open OpenOptions) {
	b.SetBytes(int64(fx.M.Samples/16*16) * fx.Layout.ImageBytes())
	// CPU time and page faults beside the wall time: on a loaded machine the
	// wall time says little.
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	n := 0
	defer func() {
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
		b.ReportMetric(float64(cpu.Microseconds())/float64(max(n, 1)), "cpu-us/op")
		b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(max(n, 1)), "faults/op")
	}()
	for ; b.Loop(); n++ {
		r, err := Open(fx.Dir, open)
		if err != nil {
			b.Fatal(err)
		}
		it, err := r.Batches(context.Background(), BatchOptions{BatchSize: 16})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := it.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		it.Close()
		r.Close()
	}
}

// benchmarkBatches reads every batch of one epoch per iteration from one
// Reader.
func benchmarkBatches(b *testing.B, fx *warehousetest.Fixture, mode Shuffle, open OpenOptions) {
	r, err := Open(fx.Dir, open)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	opts := BatchOptions{BatchSize: 16, Shuffle: mode}
	b.SetBytes(int64(r.Len()/16*16) * r.Layout().ImageBytes())
	for n := 0; b.Loop(); n++ {
		opts.Epoch = n
		it, err := r.Batches(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := it.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		it.Close()
	}
}
