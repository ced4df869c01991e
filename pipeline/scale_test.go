package pipeline

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"warehouse-etl/sources"
	"warehouse-etl/warehouse"
)

// genSource is n synthetic samples made on the fly (nothing per sample is
// held), all showing one tiny PNG: a dataset of any size for scale tests.
type genSource struct {
	n   int
	png []byte
}

func (g *genSource) Kind() string { return "gen" }

func (g *genSource) sample(i int) sources.Sample {
	return sources.Sample{
		Seq: int64(i), Source: "run_1", Frame: uint64(i), ImagePath: fmt.Sprintf("frames/%07d.png", i),
		LabelPath: fmt.Sprintf("labels/%07d.json", i), Width: 10, Height: 10,
		Boxes: []sources.Box{{X0: 1, Y0: 2, X1: 6, Y1: 8, Class: sources.ClassKey{Name: fmt.Sprintf("c%d", i%7)}}},
	}
}

func (g *genSource) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	for i := range g.n {
		s := g.sample(i)
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}

func (g *genSource) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	for i := range g.n {
		if err := fn(warehouse.FileEntry{Path: fmt.Sprintf("frames/%07d.png", i), Size: int64(len(g.png)), MtimeNs: 1}); err != nil {
			return err
		}
	}
	return nil
}

func (g *genSource) ReadImage(*sources.Sample) (sources.Image, error) {
	return sources.Image{Encoded: g.png}, nil
}
func (g *genSource) Extras() []sources.ExtraSpec { return nil }
func (g *genSource) Entries() []warehouse.SourceEntry {
	return []warehouse.SourceEntry{{Index: 0, Name: "run_1"}}
}

// peakHeap runs fn while sampling the live heap every 2 ms, and returns
// the largest value seen above the heap before fn. The live heap is what
// the last collection marked (/gc/heap/live:bytes), not the heap's objects
// with the garbage made since (/memory/classes/heap/objects:bytes): that
// one depends on when the collector last ran, and two runs holding the
// same memory measured up to 20 MiB apart with it.
func peakHeap(fn func()) (peak uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var max atomic.Uint64
	done := make(chan struct{})
	go func() {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				metrics.Read(s)
				if v := s[0].Value.Uint64(); v > max.Load() {
					max.Store(v)
				}
			}
		}
	}()
	fn()
	close(done)
	if m := max.Load(); m > base {
		return m - base
	}
	return 0
}

// Scan and plan of 100,000 samples: the live heap stays within a fixed
// bound (it does not grow with the dataset: the plan streams to the spill
// file), and the time per sample is logged for README's arithmetic
// (bench: go test -run TestScanPlanScales -v ./pipeline).
func TestScanPlanScales(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 125,000 samples")
	}
	png := pngBytes(t, 10, 10, 1)
	type run struct {
		n     int
		heap  uint64
		spent time.Duration
	}
	var runs []run
	for _, n := range []int{25_000, 100_000} {
		cfg := testConfig(t, 64)
		var res *PartitionResult
		var err error
		start := time.Now()
		heap := peakHeap(func() {
			// The last of MaxPartitions partitions: the whole scan and plan,
			// and (with fewer shards than partitions) no shard to build.
			res, err = BuildPartition(context.Background(), Options{Config: cfg, Source: &genSource{n: n, png: png}, Workers: 1}, Partition{0, MaxPartitions})
		})
		spent := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if want := (n + 63) / 64; res.ShardsTotal != want || res.Built != 0 {
			t.Fatalf("%d samples: %d shards (want %d), built %d", n, res.ShardsTotal, want, res.Built)
		}
		runs = append(runs, run{n, heap, spent})
		t.Logf("scan+plan of %7d samples: %v (%.1f µs/sample), peak live heap +%.1f MiB", n, spent.Round(time.Millisecond),
			float64(spent.Microseconds())/float64(n), float64(heap)/(1<<20))
	}
	// 4x the samples: the heap may not grow with them (16 MiB of slack for
	// GC timing), which also bounds the commit's streaming assembly.
	if small, big := runs[0].heap, runs[1].heap; big > small+16<<20 {
		t.Errorf("peak live heap grew from %.1f MiB (25k samples) to %.1f MiB (100k): the scan holds per-sample state",
			float64(small)/(1<<20), float64(big)/(1<<20))
	}
}

// BenchmarkPartitionedBuild100k: 100,000 tiny samples in 4 partitions run
// one after the other, then the commit; reports seconds per step for
// README's arithmetic; the commit's re-hash time is in its log (go test -run '^$' -bench PartitionedBuild100k -benchtime 1x ./pipeline).
func BenchmarkPartitionedBuild100k(b *testing.B) {
	const n, parts = 100_000, 4
	png := pngBytes(b, 10, 10, 1)
	for range b.N {
		cfg := testConfig(b, 256)
		cfg.OutputRoot = b.TempDir()
		var partSecs float64
		for i := range parts {
			t0 := time.Now()
			if _, err := BuildPartition(context.Background(), Options{Config: cfg, Source: &genSource{n: n, png: png}, Workers: 2}, Partition{i, parts}); err != nil {
				b.Fatal(err)
			}
			partSecs += time.Since(t0).Seconds()
		}
		t0 := time.Now()
		res, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: &genSource{n: n, png: png}, Workers: 2}})
		if err != nil {
			b.Fatal(err)
		}
		commit := time.Since(t0).Seconds()
		r := res.Report
		b.ReportMetric(partSecs/parts, "s/partition")
		b.ReportMetric(commit, "s/commit")
		b.ReportMetric(r.Phases.Scan+r.Phases.Validate, "s/commit-scan")
		b.ReportMetric(r.Phases.Publish, "s/commit-publish")
		b.ReportMetric(float64(len(res.Manifest.Shards)), "shards")
	}
}
