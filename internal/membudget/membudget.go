// Package membudget is a build's one memory budget: the bytes that decodes
// and decompressed blocks may hold at once, shared by every worker. A
// decode reserves its bytes, computed from its header, before it
// allocates, and gives them back when it is done, so N workers whose
// images do not fit together wait for each other instead of multiplying
// the peak. A reservation larger than the whole budget fails at once with
// ErrOverBudget: it could never be granted, and waiting for it would hang
// the build.
//
// Caches that keep decoded bytes between uses (the WShard camera blocks)
// reserve them too, and register a reclaimer that drops what nobody is
// using when a reservation would otherwise wait.
//
// A nil *Budget is unlimited: every method is a no-op that succeeds.
package membudget

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// ErrOverBudget is wrapped by Acquire when one reservation is larger than
// the whole budget.
var ErrOverBudget = errors.New("larger than the whole memory budget")

// Budget is a weighted semaphore over bytes. Waiters are served in
// arrival order, so a large reservation is not starved by small ones.
type Budget struct {
	limit int64

	mu        sync.Mutex
	used      int64
	garbage   int64 // of used: dropped, waiting for the garbage collector
	peak      int64
	waiters   []*waiter
	reclaim   []func()
	reclaimMu sync.Mutex // serialises reclaimers; never held with mu
}

type waiter struct {
	n     int64
	ready chan struct{}
}

// New returns a budget of limit bytes (> 0).
func New(limit int64) *Budget {
	if limit <= 0 {
		panic(fmt.Sprintf("membudget: limit %d", limit))
	}
	return &Budget{limit: limit}
}

// Limit is the budget in bytes; 0 for a nil (unlimited) Budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// OnPressure registers fn, called (without any lock of b held) when a
// reservation cannot be granted at once, before it waits. fn releases
// what its owner holds and does not need (unused cached blocks).
func (b *Budget) OnPressure(fn func()) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.reclaim = append(b.reclaim, fn)
	b.mu.Unlock()
}

// Acquire reserves n bytes, waiting until they are free or ctx is done.
// n larger than the limit fails at once with ErrOverBudget.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	if n > b.limit {
		return fmt.Errorf("%w: needs %s, the budget is %s", ErrOverBudget, FormatBytes(n), FormatBytes(b.limit))
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.limit {
		b.grant(n)
		b.mu.Unlock()
		return nil
	}
	// Queue first, then ask the caches: a cache entry released after this
	// point sees Waiting and gives its bytes back itself.
	w := &waiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	b.pressure()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we gave up: hand it back.
			b.mu.Unlock()
			b.Release(n)
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.wake()
			b.mu.Unlock()
		}
		return ctx.Err()
	}
}

func (b *Budget) grant(n int64) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// pressure runs the reclaimers, then, when dropped bytes wait for the
// garbage collector, runs it and gives them back.
func (b *Budget) pressure() {
	b.mu.Lock()
	fns := b.reclaim
	b.mu.Unlock()
	b.reclaimMu.Lock()
	defer b.reclaimMu.Unlock()
	for _, fn := range fns {
		fn()
	}
	b.collect()
}

// collect runs the garbage collector (and returns the freed pages to the
// operating system) when dropped bytes wait for it, and gives them back.
func (b *Budget) collect() {
	b.mu.Lock()
	garbage := b.garbage
	b.mu.Unlock()
	if garbage == 0 {
		return
	}
	// A collection frees the buffers, but their pages stay resident
	// until the runtime's scavenger returns them, and a new buffer of
	// the same size need not land on them: return them now, so that the
	// resident set follows what is reserved.
	debug.FreeOSMemory()
	b.mu.Lock()
	// Another collect (a waiter's pressure and a ReleaseGarbage run at
	// once) may have given these bytes back already: only what is still
	// counted as garbage is.
	garbage = min(garbage, b.garbage)
	b.used -= garbage
	b.garbage -= garbage
	b.wake()
	b.mu.Unlock()
}

// Release gives back n bytes of an earlier Acquire.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("membudget: released more than acquired")
	}
	b.wake()
	b.mu.Unlock()
}

// ReleaseGarbage gives back n bytes of an earlier Acquire whose buffers
// were dropped but may not have been collected yet: they count against
// the budget until a reservation that does not fit runs the garbage
// collector (at once when one is waiting). Without it the heap would hold a finished decode's
// garbage and the next decode's buffers at once.
func (b *Budget) ReleaseGarbage(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.garbage += n
	waiting := len(b.waiters) > 0
	b.mu.Unlock()
	if waiting {
		// A reservation waits for these bytes; it asked the reclaimers
		// before it queued, so it is up to us to collect them.
		b.collect()
	}
}

// wake grants waiters in order while the first fits. Called with mu held.
func (b *Budget) wake() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.limit {
			return
		}
		b.grant(w.n)
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// Waiting reports whether a reservation is waiting: a cache that holds
// unused bytes should give them back now.
func (b *Budget) Waiting() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) > 0
}

// Stats is what a Budget has granted.
type Stats struct {
	Limit   int64 // the budget
	Used    int64 // reserved now, garbage included
	Garbage int64 // of Used: dropped, not yet collected
	Peak    int64 // the most reserved at once
}

// Stats returns the budget's current and peak reservations.
func (b *Budget) Stats() Stats {
	if b == nil {
		return Stats{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Limit: b.limit, Used: b.used, Garbage: b.garbage, Peak: b.peak}
}
