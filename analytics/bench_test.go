package analytics

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// peakHeap samples the live heap (as of the last GC: garbage waiting for
// collection is not memory the code needs) every few milliseconds until
// stop is called and returns the largest value seen, in bytes.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var (
		peak uint64
		wg   sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux), so
// the peak measured after it belongs to the code that runs after it.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns VmHWM from /proc/self/status in bytes, or 0.
func peakRSS() uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkExport1M exports a synthetic version of 1,000,000 input samples
// (900,000 kept in 9 shards, 1.35 boxes per kept sample). It reports rows
// per second, the peak live heap and the peak RSS of the export alone:
//
//	go test ./analytics -run '^$' -bench Export1M -benchtime 1x
func BenchmarkExport1M(b *testing.B) {
	dir := b.TempDir()
	m := synthWarehouse(b, dir, 1_000_000, 100_000)
	runtime.GC()
	debug.FreeOSMemory() // the generator's garbage would count in RSS
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		rssOK := resetPeakRSS()
		stop := peakHeap()
		start := time.Now()
		res, err := Export(ctx, dir, m, ExportOptions{})
		secs := time.Since(start).Seconds()
		heap := stop()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.SampleRows)/secs, "rows/s")
		b.ReportMetric(secs, "s/export")
		b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
		if rssOK {
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
		}
		if st, err := os.Stat(dir + "/samples.parquet"); err == nil {
			b.ReportMetric(float64(st.Size())/(1<<20), "samples.parquet-MiB")
		}
	}
}
