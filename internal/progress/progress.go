// Package progress is how a library package reports the progress of a
// long run without printing: it adds to a Counter its caller passed, and
// the caller (cmd/warehouse-etl) shows the sums, as a bar on a terminal or
// as log lines.
package progress

import "sync/atomic"

// Counter receives a run's progress. Add adds to the work planned (total)
// and to the work done, both in bytes; calls may come from several
// goroutines at once, and total may grow while the run learns its work.
type Counter interface {
	Add(total, done int64)
}

// Add calls c.Add, unless c is nil (a caller that wants no progress).
func Add(c Counter, total, done int64) {
	if c != nil {
		c.Add(total, done)
	}
}

// Bytes is a Counter that keeps the sums; safe for concurrent use.
type Bytes struct{ total, done atomic.Int64 }

// Add implements Counter.
func (b *Bytes) Add(total, done int64) {
	b.total.Add(total)
	b.done.Add(done)
}

// Load returns the work planned and done so far.
func (b *Bytes) Load() (total, done int64) {
	return b.total.Load(), b.done.Load()
}
