package warehouse

import (
	"errors"
	"fmt"
)

// This file holds the resumable part of the batch plan: an epoch that starts
// at a global position of its order instead of at 0, with any world size
// (docs/format/reading.md, "Resuming").

// epochOrderer is a BatchSource with an epoch order of its own: a Mixture.
// Its order's entries are indices of the source (0 <= i < Len()); the
// order's length is the epoch's length, which need not be Len().
type epochOrderer interface {
	EpochOrder(shuffle Shuffle, seed uint64, epoch int) []int
}

// planFor plans opts' batches of src: from src's own epoch order when it
// has one (a Mixture), else from EpochOrder.
func planFor(src BatchSource, opts BatchOptions) ([]PlannedBatch, error) {
	if o, ok := src.(epochOrderer); ok {
		if err := opts.resolve(); err != nil {
			return nil, err
		}
		return PlanOrder(o.EpochOrder(opts.Shuffle, opts.Seed, opts.Epoch), opts)
	}
	return PlanBatches(src.Len(), src.ShardStarts(), opts)
}

// PlanOrder cuts an epoch's order into this rank's batches, starting at
// opts.StartPosition: global batch u holds positions [P+u*B, P+(u+1)*B) and
// goes to rank u mod W. Every rank gets the same count of batches:
// floor((N-P)/(W*B)) with DropRemainder, ceil((N-P)/(W*B)) with
// PadRemainder (none when P >= N: the epoch is over), where N is
// len(order) and a position p >= N reads order[p mod N]. With P = 0 this
// is PlanBatches.
func PlanOrder(order []int, opts BatchOptions) ([]PlannedBatch, error) {
	if err := opts.resolve(); err != nil {
		return nil, err
	}
	n := len(order)
	if n == 0 {
		return nil, errors.New("the warehouse has no samples")
	}
	count := BatchesPerRank(n, opts)
	if count == 0 && opts.StartPosition == 0 {
		return nil, fmt.Errorf("%d samples cannot fill one batch of %d on each of %d ranks; use a smaller batch or pad the remainder", n, opts.BatchSize, opts.WorldSize)
	}
	batches := make([]PlannedBatch, count)
	for t := range batches {
		start := opts.StartPosition + (t*opts.WorldSize+opts.Rank)*opts.BatchSize
		idx := make([]int, opts.BatchSize)
		for j := range idx {
			idx[j] = order[(start+j)%n]
		}
		batches[t] = PlannedBatch{Indices: idx, Repeats: max(0, start+opts.BatchSize-max(start, n))}
	}
	return batches, nil
}

// BatchesPerRank is how many batches each rank gets of an epoch of n
// positions from opts.StartPosition on (opts resolved: WorldSize >= 1).
func BatchesPerRank(n int, opts BatchOptions) int {
	w := max(opts.WorldSize, 1)
	per := opts.BatchSize * w
	rest := max(0, n-opts.StartPosition)
	if opts.Remainder == PadRemainder {
		return (rest + per - 1) / per
	}
	return rest / per
}

// Position is the global position of the epoch order after every one of
// world ranks took steps batches of batchSize from start: the first
// start+steps*world*batchSize positions are consumed, whatever the world
// size was (reading.md, "Resuming"). A job saves it with its checkpoint and
// resumes with BatchOptions.StartPosition set to it.
func Position(start, steps, world, batchSize int) int {
	return start + steps*world*batchSize
}
