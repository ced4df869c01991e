package warehouse

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ShardLoad is how long one shard took to become readable: Checksum is the
// sha256 pass (OpenOptions.VerifyChecksums only); Open covers open, mmap and
// header validation; FirstTouch is the time to fault in the first sample
// that was asked for (one byte per page of its image), so a cold page cache
// or a slow filesystem shows up here and not in the training step after.
// Only a shard first used through Sample's mapped views has one: batches
// read images with pread, and a shard they open first records 0.
type ShardLoad struct {
	ID         string        `json:"id"`
	Bytes      int64         `json:"bytes"`
	Checksum   time.Duration `json:"checksum_ns"`
	Open       time.Duration `json:"open_ns"`
	FirstTouch time.Duration `json:"first_touch_ns"`
}

// Total is the whole load time of the shard.
func (l ShardLoad) Total() time.Duration { return l.Checksum + l.Open + l.FirstTouch }

// LoadStats summarise what a Reader loaded since Open. Samples/s is measured
// over Elapsed, the wall time since Open, so it includes the consumer's own
// time: it is the rate the training job actually got.
type LoadStats struct {
	ShardsOpened int   `json:"shards_opened"`
	ShardsTotal  int   `json:"shards_total"`
	BytesMapped  int64 `json:"bytes_mapped"`
	SamplesRead  int64 `json:"samples_read"`
	// ColdSamples are the samples of batches (ReadRunInto) whose images
	// were read from disk, not all in the page cache, or where the kernel
	// cannot tell (not Linux, no RWF_NOWAIT: every one).
	ColdSamples int64         `json:"cold_samples"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	// LoadP50, LoadP99 and LoadMax are percentiles (nearest rank) of
	// ShardLoad.Total over the opened shards; zero when none was opened.
	LoadP50 time.Duration `json:"load_p50_ns"`
	LoadP99 time.Duration `json:"load_p99_ns"`
	LoadMax time.Duration `json:"load_max_ns"`
}

// SamplesPerSecond is SamplesRead over Elapsed, 0 before any time passed.
func (s LoadStats) SamplesPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.SamplesRead) / s.Elapsed.Seconds()
}

// String is the one-line summary the CLI prints, e.g.
// "shards 3/5 opened, 10.6 MB mapped, 12 samples in 1.2s (10.0 samples/s), shard load p50 1.1ms p99 2ms max 2ms".
func (s LoadStats) String() string {
	return fmt.Sprintf("shards %d/%d opened, %.1f MB mapped, %d samples in %s (%.1f samples/s), shard load p50 %s p99 %s max %s",
		s.ShardsOpened, s.ShardsTotal, float64(s.BytesMapped)/1e6, s.SamplesRead, s.Elapsed.Round(time.Millisecond),
		s.SamplesPerSecond(), s.LoadP50.Round(time.Microsecond), s.LoadP99.Round(time.Microsecond), s.LoadMax.Round(time.Microsecond))
}

// LogValue lets a logger print the summary as attributes.
func (s LoadStats) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("shards_opened", s.ShardsOpened), slog.Int("shards_total", s.ShardsTotal),
		slog.Int64("bytes_mapped", s.BytesMapped), slog.Int64("samples_read", s.SamplesRead),
		slog.Duration("elapsed", s.Elapsed), slog.Float64("samples_per_second", s.SamplesPerSecond()),
		slog.Duration("load_p50", s.LoadP50), slog.Duration("load_p99", s.LoadP99), slog.Duration("load_max", s.LoadMax))
}

// loadRecorder collects ShardLoads from concurrent lazy opens.
type loadRecorder struct {
	mu    sync.Mutex
	loads []ShardLoad
}

func (r *loadRecorder) add(l ShardLoad) {
	r.mu.Lock()
	r.loads = append(r.loads, l)
	r.mu.Unlock()
}

// snapshot returns the loads so far, in the order they happened.
func (r *loadRecorder) snapshot() []ShardLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.loads)
}

// summarizeLoads fills the shard fields of LoadStats from loads.
func summarizeLoads(loads []ShardLoad) (opened int, bytes int64, p50, p99, maxLoad time.Duration) {
	totals := make([]time.Duration, len(loads))
	for i, l := range loads {
		totals[i] = l.Total()
		bytes += l.Bytes
	}
	slices.Sort(totals)
	return len(loads), bytes, percentile(totals, 50), percentile(totals, 99), percentile(totals, 100)
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value with at least p% of the values at or below it.
// It returns 0 for an empty slice.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
