package warehouse

import (
	"reflect"
	"testing"
)

// The read-ahead rule on counts the test sets: which batches a
// BatchIterator advises as it dispatches batch t, given the cold samples
// and samples read so far (readahead.go).
func TestReadAheadRule(t *testing.T) {
	// run dispatches batches 0..n-1 of an iterator with ReadAhead 2; before
	// dispatching batch t the counts are counts(t). It returns the batches
	// advised, in order.
	run := func(mem *adviceMemory, n int, counts func(t int) readCounts) []int {
		var advised []int
		var t int
		it := &BatchIterator{opts: BatchOptions{ReadAhead: 2}, plan: make([]PlannedBatch, n)}
		for u := range it.plan {
			it.plan[u].Indices = []int{u}
		}
		it.adviser = adviser{advise: func(idx []int) { advised = append(advised, idx[0]) },
			counts: func() readCounts { return counts(t) }, mem: mem}
		now := counts(0)
		it.adviser.advising = mem.start(now)
		it.adviser.marks = []readCounts{now}
		for t = 0; t < n; t++ {
			it.readAhead(t)
		}
		return advised
	}
	seq := func(lo, hi int) []int {
		var s []int
		for u := lo; u < hi; u++ {
			s = append(s, u)
		}
		return s
	}
	// Batches of 32; batch u's reads are counted by the time batch u+3 is
	// dispatched (two batches filled ahead). cold(u) is batch u's cold samples.
	epoch := func(base readCounts, cold func(u int) int64) func(t int) readCounts {
		return func(t int) readCounts {
			c := base
			for u := 0; u+3 <= t; u++ {
				c[0] += cold(u)
				c[1] += 32
			}
			return c
		}
	}
	var mem adviceMemory
	// An epoch's first two batches are advised whatever the counts (they
	// go to the workers before any read ends); then warm with a trickle, a
	// cold sample in every second batch (1.6%): no more.
	first := []int{1, 2}
	trickle := epoch(readCounts{}, func(u int) int64 { return int64(u % 2) })
	if got := run(&mem, 40, trickle); !reflect.DeepEqual(got, first) {
		t.Errorf("a trickle of cold samples: advised %v, want %v", got, first)
	}
	// Cold: batch 0's 32 cold samples are counted at t = 3, so batches 4
	// and 5 are advised then, and each t+2 after.
	start := trickle(40)
	cold := epoch(start, func(int) int64 { return 32 })
	if got, want := run(&mem, 20, cold), append(first, seq(4, 20)...); !reflect.DeepEqual(got, want) {
		t.Errorf("a cold epoch after a warm one: advised %v, want %v", got, want)
	}
	// The epoch after a cold one: from its first batch, 1 and 2 at t = 0.
	start = cold(20)
	warm := epoch(start, func(int) int64 { return 0 })
	if got, want := run(&mem, 20, warm), seq(1, 20); !reflect.DeepEqual(got, want) {
		t.Errorf("an epoch after a cold one: advised %v, want %v", got, want)
	}
	// After that warm epoch, none.
	start = warm(20)
	if got := run(&mem, 20, epoch(start, func(int) int64 { return 0 })); !reflect.DeepEqual(got, first) {
		t.Errorf("a warm epoch after a warm one: advised %v, want %v", got, first)
	}
	// A cache that stays cold, the advice keeping ahead of the reads: the
	// epoch after one whose reads turned its advice on is advised from its
	// start and finds 2 cold samples a batch (1 in 16); the next starts
	// unadvised, its first batches cold turn it on (at t = 3); and so on.
	start = epoch(start, func(int) int64 { return 0 })(20)
	kept := func(base readCounts, advisedFrom int) func(t int) readCounts {
		return epoch(base, func(u int) int64 {
			if u < advisedFrom {
				return 32
			}
			return 2
		})
	}
	for round := range 2 {
		e := kept(start, 3)
		if got, want := run(&mem, 20, e), append(first, seq(4, 20)...); !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: a cold epoch started unadvised: advised %v, want %v", round, got, want)
		}
		start = e(20)
		e = kept(start, 0)
		if got, want := run(&mem, 20, e), seq(1, 20); !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: the cold epoch after it: advised %v, want %v", round, got, want)
		}
		start = e(20)
	}
	// Half-cached, in order: batches 10 on are cold. The window sees batch
	// 10's reads at t = 13 (4 cold, 1 in 8, of the last 4 batches' 128).
	start = readCounts{}
	half := epoch(start, func(u int) int64 { return map[bool]int64{true: 32}[u >= 10] })
	if got, want := run(&adviceMemory{}, 30, half), append(first, seq(14, 30)...); !reflect.DeepEqual(got, want) {
		t.Errorf("the cold half of an epoch: advised %v, want %v", got, want)
	}
	// A sparse cold share (4 in each 8 batches of 32: 1.6%) never fills a
	// window; but 1 in 8 of an epoch's samples cold, in every batch (4 of
	// 32) does: coldMin in one batch, 16 in the window of 4.
	sparse := epoch(readCounts{}, func(u int) int64 { return int64(4 * (u % 8 / 7)) })
	if got := run(&adviceMemory{}, 30, sparse); !reflect.DeepEqual(got, first) {
		t.Errorf("4 cold samples in each 8 batches: advised %v, want %v", got, first)
	}
	share := epoch(readCounts{}, func(int) int64 { return 4 })
	if got, want := run(&adviceMemory{}, 12, share), append(first, seq(4, 12)...); !reflect.DeepEqual(got, want) {
		t.Errorf("1 in 8 cold in every batch: advised %v, want %v", got, want)
	}
	// ReadAhead 0: nothing, whatever the reads.
	if a := newAdviser(&Reader{}, BatchOptions{}); a.advise != nil {
		t.Error("ReadAhead 0 set up advice")
	}
}
