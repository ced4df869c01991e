package warehouse

import (
	"os"

	"warehouse-etl/shard"
)

// Read-ahead for cold reads (issue 29): a batch iterator tells the kernel
// which byte ranges the batches a few steps ahead will read, so that, where
// the shards are not in the page cache, the disk works on them while the
// current batches are copied, instead of waiting for each pread in turn
// (a queue depth of Workers). On a warm page cache the advice costs a
// system call per run and changes nothing.

// It is off by default (BatchOptions.ReadAhead 0) until it is measured
// to help: on the shared 2-core machine where it was written every reader
// was CPU-bound, cold or warm, and the advice showed no gain
// (docs/performance.md, "Compact images and cold reads").

// readAheadBatches resolves BatchOptions.ReadAhead: 0 or negative is off.
func readAheadBatches(o BatchOptions) int {
	return max(o.ReadAhead, 0)
}

// readAhead advises the page ranges of the batches the iterator will need
// after batch t: batch t+ahead (and at t == 0 every batch up to it). A
// *Mixture forwards the advice to its parts that are *Readers; other
// sources (live decoding) have no shard files and get none.
func (it *BatchIterator) readAhead(t int) {
	ahead := readAheadBatches(it.opts)
	if ahead == 0 {
		return
	}
	var advise func([]int)
	switch src := it.src.(type) {
	case *Reader:
		advise = src.adviseWillNeed
	case *Mixture:
		advise = src.adviseWillNeed
	default:
		return
	}
	lo := t + ahead
	if t == 0 {
		lo = 1
	}
	for u := lo; u <= t+ahead && u < len(it.plan); u++ {
		advise(it.plan[u].Indices)
	}
}

// adviseWillNeed splits mixture indices idx by part (in their order) and
// advises each part that is a *Reader of its own samples.
func (m *Mixture) adviseWillNeed(idx []int) {
	local := make([][]int, len(m.parts))
	for _, i := range idx {
		if i < 0 || i >= m.Len() {
			continue
		}
		k, s := m.Locate(i)
		local[k] = append(local[k], s)
	}
	for k, p := range m.parts {
		if r, ok := p.(*Reader); ok && len(local[k]) > 0 {
			r.adviseWillNeed(local[k])
		}
	}
}

// adviseWillNeed tells the kernel that the images of samples idx will be
// read soon: per maximal run of consecutive samples in one shard, one
// advice for the run's image bytes (the regions of a compact shard). A
// shard not opened yet is opened (it would be by the read that follows);
// errors are left to that read.
func (r *Reader) adviseWillNeed(idx []int) {
	for j := 0; j < len(idx); {
		k, local, err := r.locate(idx[j])
		if err != nil {
			return
		}
		sr, err := r.shard(k, local, false)
		if err != nil {
			return
		}
		n := 1
		for j+n < len(idx) && idx[j+n] == idx[j]+n && local+n < sr.Len() {
			n++
		}
		var off int64
		var length int
		if sr.IsCompact() {
			off, length = sr.RegionSpan(local, n)
		} else {
			off, length = sr.ImageSpan(local, n)
		}
		if f, ok := r.shards[k].file.(*os.File); ok { // not the in-memory files of FuzzOpen
			shard.WillNeed(f, off, int64(length))
		}
		j += n
	}
}
