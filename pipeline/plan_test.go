package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// countingSource counts the scans of the source it wraps.
type countingSource struct {
	*memSource
	scans *atomic.Int64
}

func (c countingSource) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	c.scans.Add(1)
	return c.memSource.Scan(ctx, fn)
}

// A partitioned build scans its sources once: the first partition stores
// the plan, the other partitions and the commit read it, and the version
// is byte-identical to a single-machine build's.
func TestPartitionsScanOnce(t *testing.T) {
	cfg := testConfig(t, 2)
	single, err := Build(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := versionBytes(t, single.Dir)
	for _, n := range []int{1, 3, 8} {
		c := *cfg
		c.OutputRoot = t.TempDir()
		var scans atomic.Int64
		for i := range n {
			// In reverse: any partition may be the first.
			p := Partition{n - 1 - i, n}
			if _, err := BuildPartition(context.Background(), Options{Config: &c, Source: countingSource{partitionSource(t), &scans}, Workers: 2}, p); err != nil {
				t.Fatalf("partition %s: %v", p, err)
			}
			if got := scans.Load(); got != 1 {
				t.Fatalf("%d partitions: %d scans after partition %s, want 1", n, got, p)
			}
		}
		res, err := Commit(context.Background(), CommitOptions{Options: Options{Config: &c, Source: countingSource{partitionSource(t), &scans}, Workers: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if got := scans.Load(); got != 1 {
			t.Errorf("%d partitions and the commit scanned %d times, want 1", n, got)
		}
		sameVersion(t, fmt.Sprintf("%d partitions, one plan", n), want, versionBytes(t, res.Dir))
	}
}

// statefulSource is a source whose kind is not in planKinds (as kdb's,
// whose ReadImage needs its scan's tables).
type statefulSource struct{ countingSource }

func (statefulSource) Kind() string { return "stateful" }

// Its partitions scan each on their own, as before one plan, and still
// give the single-machine bytes.
func TestPartitionsOfStatefulSourcesScan(t *testing.T) {
	cfg := testConfig(t, 2)
	single, err := Build(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := *cfg
	c.OutputRoot = t.TempDir()
	var scans atomic.Int64
	src := func() sources.Source { return statefulSource{countingSource{partitionSource(t), &scans}} }
	for i := range 3 {
		pr, err := BuildPartition(context.Background(), Options{Config: &c, Source: src(), Workers: 2}, Partition{i, 3})
		if err != nil {
			t.Fatal(err)
		}
		if fileExists(filepath.Join(pr.Staging, planDirName)) {
			t.Fatal("a plan was stored")
		}
	}
	res, err := Commit(context.Background(), CommitOptions{Options: Options{Config: &c, Source: src(), Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := scans.Load(); got != 4 {
		t.Errorf("3 partitions and the commit of a stateful source scanned %d times, want 4", got)
	}
	sameVersion(t, "stateful source", versionBytes(t, single.Dir), versionBytes(t, res.Dir))
}

// Inputs that change between the plan and a later partition are a clear
// error; WAREHOUSE_CLEAR=1 plans again.
func TestPlanChangedSources(t *testing.T) {
	cfg := testConfig(t, 2)
	if _, err := BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t)}, Partition{0, 2}); err != nil {
		t.Fatal(err)
	}
	changed := func() *memSource {
		s := partitionSource(t)
		s.images["img_04.png"] = pngBytes(t, 10, 10, 99)
		s.images["img_04.png"] = append(s.images["img_04.png"], 0) // another size
		return s
	}
	_, err := BuildPartition(context.Background(), Options{Config: cfg, Source: changed()}, Partition{1, 2})
	var pc *PlanChangedError
	if !errors.As(err, &pc) || !strings.Contains(err.Error(), "the sources changed since partition 0/2") ||
		!strings.Contains(err.Error(), "WAREHOUSE_CLEAR=1") {
		t.Fatalf("partition on changed sources: %v, want a PlanChangedError naming the plan's writer", err)
	}
	// The commit checks the listing too.
	if _, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: changed()}}); !errors.As(err, &pc) {
		t.Fatalf("commit on changed sources: %v, want a PlanChangedError", err)
	}
	var scans atomic.Int64
	for i := range 2 {
		if _, err := BuildPartition(context.Background(), Options{Config: cfg, Source: countingSource{changed(), &scans}, Clear: true}, Partition{i, 2}); err != nil {
			t.Fatalf("partition %d/2 with clear: %v", i, err)
		}
	}
	if got := scans.Load(); got != 1 {
		t.Errorf("the clear rerun scanned %d times, want 1 (a new plan, then read)", got)
	}
	if _, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: changed()}}); err != nil {
		t.Fatal(err)
	}
}

// A stored plan whose spill no longer hashes to plan.json is refused.
func TestPlanCorruptSpill(t *testing.T) {
	cfg := testConfig(t, 2)
	res, err := BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t)}, Partition{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	st := &staging{dir: res.Staging}
	flipByte(t, st.planSpillPath(), 10)
	_, err = BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t)}, Partition{1, 2})
	if err == nil || !strings.Contains(err.Error(), "the plan says") {
		t.Fatalf("partition on a corrupt plan: %v", err)
	}
}

// BenchmarkPlanPartitions100k: N partitions of 100,000 tiny samples run
// one after the other, then the commit; s/partition is a partition's whole
// run (listing and plan read, or the one scan; 100,000 / 256 = 391 shards
// divided among the N), scans counts the scans of the sources in all
// (go test -run '^$' -bench PlanPartitions100k -benchtime 1x ./pipeline).
func BenchmarkPlanPartitions100k(b *testing.B) {
	const n = 100_000
	png := pngBytes(b, 10, 10, 1)
	for _, parts := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("N=%d", parts), func(b *testing.B) {
			for range b.N {
				cfg := testConfig(b, 256)
				cfg.OutputRoot = b.TempDir()
				var scans atomic.Int64
				src := func() sources.Source { return countingGen{&genSource{n: n, png: png}, &scans} }
				var first, rest float64
				for i := range parts {
					t0 := time.Now()
					if _, err := BuildPartition(context.Background(), Options{Config: cfg, Source: src(), Workers: 2}, Partition{i, parts}); err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						first = time.Since(t0).Seconds()
					} else {
						rest += time.Since(t0).Seconds()
					}
				}
				t0 := time.Now()
				res, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: src(), Workers: 2}})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(first, "s/first-partition")
				if parts > 1 {
					b.ReportMetric(rest/float64(parts-1), "s/other-partition")
				}
				b.ReportMetric(time.Since(t0).Seconds(), "s/commit")
				b.ReportMetric(res.Report.Phases.Scan+res.Report.Phases.Validate, "s/commit-scan")
				b.ReportMetric(float64(scans.Load()), "scans")
				if _, err := os.Stat(filepath.Join(res.Dir, "shards")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type countingGen struct {
	*genSource
	scans *atomic.Int64
}

func (c countingGen) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	c.scans.Add(1)
	return c.genSource.Scan(ctx, fn)
}

// The summary, class table and counts a partition rebuilds from the stored
// plan equal the scan's, on samples of several runs with every kind of
// reason, empty samples and class keys with and without ids.
func TestPlanReplayEqualsScan(t *testing.T) {
	src := newMemSource(t, 60)
	reasons := []validate.Reason{validate.ReasonMissingFile, validate.ReasonMissingImage, validate.ReasonDecodeError, validate.ReasonNonFinite}
	for i := range src.samples {
		s := &src.samples[i]
		s.SourceIndex, s.Source = int32(i/25), fmt.Sprintf("run_%d", i/25+1)
		switch i % 7 {
		case 1:
			s.Reasons = []validate.Reason{reasons[i%len(reasons)]}
		case 2:
			s.Boxes = nil // empty
		case 3:
			s.Boxes[0].Class = sources.ClassKey{ID: int64(i % 4), HasID: true, Name: "n"}
		case 4:
			s.Boxes[0].Class = sources.ClassKey{Name: fmt.Sprintf("c%d", i%3)}
		case 5:
			s.Boxes = append(s.Boxes, sources.Box{X0: 0, Y0: 0, X1: 0, Y1: 0}) // degenerate: dropped
		}
		s.ValidBoxes = len(s.Boxes)
	}
	cfg := testConfig(t, 4)
	b, err := newBuilder(Options{Config: cfg, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tally := &planTally{}
	fp := warehouse.Fingerprint{Files: 1}
	scanned, err := b.scanSources(context.Background(), filepath.Join(dir, "spill"), fp, newReport(b, time.Now()), tally)
	if err != nil {
		t.Fatal(err)
	}
	if len(tally.runs) != 3 {
		t.Fatalf("tally of %d runs, want 3", len(tally.runs))
	}
	sp := &storedPlan{PlanSHA256: scanned.planSHA, Inputs: scanned.inputs, Planned: scanned.planned, Runs: tally.runs,
		Classes: classKeys(scanned.classes), Sources: src.Entries()}
	b.staged = &planUse{}
	// Through JSON, as plan.json stores it.
	raw, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	var back storedPlan
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	replayed, err := b.replayPlan(context.Background(), scanned.spill, &back, fp)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(replayed.summary.Result(), scanned.summary.Result()) {
		t.Errorf("summary:\nreplayed %+v\nscanned  %+v", replayed.summary.Result(), scanned.summary.Result())
	}
	if !reflect.DeepEqual(replayed.classes, scanned.classes) || len(scanned.classes.classes) < 5 {
		t.Errorf("classes:\nreplayed %+v\nscanned  %+v", replayed.classes, scanned.classes)
	}
	if replayed.inputs != 60 || replayed.planned != scanned.planned || replayed.planSHA != scanned.planSHA {
		t.Errorf("replayed %d inputs %d planned %s, scanned %d %d %s", replayed.inputs, replayed.planned, replayed.planSHA,
			scanned.inputs, scanned.planned, scanned.planSHA)
	}
	sum := scanned.summary.Result().Total
	if sum.Skipped == 0 || sum.Empty == 0 || len(sum.ByReason) < 4 {
		t.Errorf("the samples do not exercise the summary: %+v", sum)
	}
}

func init() {
	// The test sources read images by path, as capture does.
	planKinds["mem"], planKinds["gen"] = true, true
}
