package warehouse

import (
	"os"
	"sync"

	"warehouse-etl/shard"
)

// Read-ahead for cold reads (issue 29): a batch iterator tells the kernel
// which byte ranges the batches a few steps ahead will read, so that, where
// the shards are not in the page cache, the disk works on them while the
// current batches are copied, instead of waiting for each pread in turn
// (a queue depth of Workers).
//
// On a warm page cache the advice only costs (a system call per run), so
// it follows the reads: the Reader counts the samples whose pread was not
// all cached (preadv2 with RWF_NOWAIT first, shard.ReadCached;
// Reader.readAt). An iterator advises its first ReadAhead batches whatever
// the cache (they go to the workers before any read could tell; a fraction
// of a millisecond on a warm one), and the rest once coldMin or more and 1
// in coldShare of the samples read while its last coldWindow batches were
// dispatched were cold; from its first batch on when the iterator before
// it on the same source (the epoch before) turned its advice on so, or
// read 1 in coldShare of its samples cold. A share, not one cold sample: a
// page cache with memory to spare still drops a page now and then. An
// epoch advised from its start whose advice kept ahead of the reads finds
// few samples cold, and the next starts unadvised: on a cache that stays
// cold its first batches turn the advice on again; on one that has become
// warm it stays off. The torch loader has the same rule but for the first
// batches (python/warehouse_etl/torch.py, _ReadAhead).
//
// BatchOptions.ReadAhead 0 is off; `load --read-ahead` defaults to 2.

const (
	coldShare  = 8
	coldMin    = 4
	coldWindow = 4
)

// readCounts are (cold samples, samples read) of a source whose reads are
// counted: a *Reader, or a *Mixture of them.
type readCounts [2]int64

// mostlyCold reports whether the reads between two counts found at least
// least and 1 in coldShare of their samples out of the page cache.
func mostlyCold(before, now readCounts, least int64) bool {
	cold, read := now[0]-before[0], now[1]-before[1]
	return cold >= least && cold*coldShare >= read
}

// adviceMemory keeps what the last batch iterator of a source found, for
// the next one's choice to advise from its first batch.
type adviceMemory struct {
	mu     sync.Mutex
	at     readCounts // when it started
	set    bool       // there was one
	turned bool       // its reads turned its advice on
}

// start records now and reports whether the last iterator's reads turned
// its advice on or were mostly cold.
func (m *adviceMemory) start(now readCounts) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cold := m.set && (m.turned || mostlyCold(m.at, now, 1))
	m.at, m.set, m.turned = now, true, false
	return cold
}

// turnedOn notes that the current iterator's reads turned its advice on.
func (m *adviceMemory) turnedOn() {
	m.mu.Lock()
	m.turned = true
	m.mu.Unlock()
}

func (r *Reader) readCounts() readCounts { return readCounts{r.cold.Load(), r.samples.Load()} }

func (m *Mixture) readCounts() readCounts {
	var c readCounts
	for _, p := range m.parts {
		if r, ok := p.(*Reader); ok {
			pc := r.readCounts()
			c[0], c[1] = c[0]+pc[0], c[1]+pc[1]
		}
	}
	return c
}

// readAheadBatches resolves BatchOptions.ReadAhead: 0 or negative is off.
func readAheadBatches(o BatchOptions) int {
	return max(o.ReadAhead, 0)
}

// adviser is the read-ahead state of one batch iterator.
type adviser struct {
	advise   func([]int) // nil: no read-ahead
	counts   func() readCounts
	mem      *adviceMemory
	advising bool
	marks    []readCounts // counts as the last coldWindow+1 batches were dispatched
	advised  int          // batches advised, for the tests
}

// newAdviser sets up read-ahead for src (a *Reader or a *Mixture: other
// sources, live decoding, have no shard files and get none).
func newAdviser(src BatchSource, opts BatchOptions) adviser {
	if readAheadBatches(opts) == 0 {
		return adviser{}
	}
	var a adviser
	var mem *adviceMemory
	switch s := src.(type) {
	case *Reader:
		a.advise, a.counts, mem = s.adviseWillNeed, s.readCounts, &s.advice
	case *Mixture:
		a.advise, a.counts, mem = s.adviseWillNeed, s.readCounts, &s.advice
	default:
		return adviser{}
	}
	now := a.counts()
	a.mem, a.advising = mem, mem.start(now)
	a.marks = append(make([]readCounts, 0, coldWindow+1), now)
	return a
}

// readAhead advises the page ranges of the batches the iterator will need
// after batch t: at t = 0 batches 1..ahead; later, once advising, batch
// t+ahead, and on the batch where the reads turned it on every batch
// after t up to it.
func (it *BatchIterator) readAhead(t int) {
	a := &it.adviser
	if a.advise == nil {
		return
	}
	ahead := readAheadBatches(it.opts)
	lo := t + ahead
	if t == 0 {
		// An epoch's first batches are advised whatever the cache: the
		// reads that could tell a cold one end only after those batches are
		// handed to the workers, and on a warm one their advice costs a
		// fraction of a millisecond.
		lo = 1
	}
	if !a.advising && t > 0 {
		if len(a.marks) == coldWindow+1 {
			a.marks = append(a.marks[:0], a.marks[1:]...)
		}
		a.marks = append(a.marks, a.counts())
		if !mostlyCold(a.marks[0], a.marks[len(a.marks)-1], coldMin) {
			return
		}
		a.advising, lo = true, t+1
		a.mem.turnedOn()
	}
	for u := lo; u <= t+ahead && u < len(it.plan); u++ {
		a.advise(it.plan[u].Indices)
		a.advised++
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
