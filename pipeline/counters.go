package pipeline

import "sync/atomic"

// Counters are updated by the pipeline's goroutines and read by whoever
// draws progress (restic's progress-counter pattern: atomics written by
// workers, one ticker that reads them).
type Counters struct {
	Scanned      atomic.Int64 // input samples scanned (pass 1)
	Planned      atomic.Int64 // samples planned to be kept after pass 1
	Transformed  atomic.Int64 // samples decoded and transformed
	Written      atomic.Int64 // samples written to shards
	BytesWritten atomic.Int64 // shard bytes written
	// Reuse (reuse.go): samples whose image was copied from a published
	// version, those decoded (Transformed counts both), matched samples
	// that fell back to decoding (old sample unreadable or failing its
	// CRC-32C), and the image bytes copied.
	Reused         atomic.Int64
	Decoded        atomic.Int64
	ReuseFallbacks atomic.Int64
	ReuseBytes     atomic.Int64
}
