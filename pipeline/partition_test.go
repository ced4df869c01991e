package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"warehouse-etl/config"
	"warehouse-etl/outputroot"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// partitionSource is 23 samples of which 2, 6, 7, 13 and 21 fail to decode
// only at transform time (after the scan planned them): with 2 samples per
// shard, shards 1, 6 and 10 end one short and shard 3 loses both.
func partitionSource(t *testing.T) *memSource { return newMemSource(t, 23, 2, 6, 7, 13, 21) }

// buildPartitions runs partitions 0..n-1 of cfg at once (each with its own
// source, as separate processes would) and commits.
func buildPartitions(t *testing.T, cfg *config.Config, n int) *Result {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2}, Partition{i, n})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("partitions of %d: %v", n, err)
	}
	res, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: partitionSource(t), Workers: 2}})
	if err != nil {
		t.Fatalf("commit of %d partitions: %v", n, err)
	}
	return res
}

// versionBytes is what must be byte-identical between two builds of one
// version: every shard, samples.jsonl and fingerprint.jsonl, and the
// manifest less created_at_ms and the checksums of the timed files.
func versionBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	names := []string{warehouse.SamplesName, warehouse.FingerprintName, "samples.parquet"}
	for _, s := range m.Shards {
		names = append(names, s.RelativePath)
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	raw, err := os.ReadFile(filepath.Join(dir, warehouse.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	raw = regexp.MustCompile(`"created_at_ms": \d+`).ReplaceAll(raw, nil)
	raw = regexp.MustCompile(`\n\s*"(build_report\.json|build\.parquet|runs\.parquet)": \{\s*"bytes": \d+,\s*"sha256": "[0-9a-f]{64}"\s*\},?`).ReplaceAll(raw, nil)
	out[warehouse.ManifestName] = raw
	return out
}

func sameVersion(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d files, single machine %d", what, len(got), len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || !bytes.Equal(w, g) {
			t.Errorf("%s: %s differs from the single-machine build (%d vs %d bytes)", what, name, len(g), len(w))
		}
	}
}

// N = 1, 2, 3, 7 partitions publish the single-machine bytes, with late
// decode failures in several shards (one shard loses both its samples).
func TestPartitionsGiveTheSingleMachineBytes(t *testing.T) {
	cfg := testConfig(t, 2)
	// The Zarr store too: its chunk files' checksums are in the manifest
	// compared below, and its shards do not line up with short ones.
	cfg.Zarr.Enabled = true
	single, err := Build(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := single.Manifest
	// 23 planned samples make 12 shards of 2; shard 3 (seqs 6, 7) lost
	// both and has no file.
	if m.Samples != 18 || len(m.Shards) != 11 || m.Summary.Total.ByReason["decode_error"] != 5 {
		t.Fatalf("single machine: %d samples in %d shards, summary %+v", m.Samples, len(m.Shards), m.Summary.Total)
	}
	zarrFiles := 0
	for name := range m.Files.Checksums {
		if strings.HasPrefix(name, "warehouse.zarr/") {
			zarrFiles++
		}
	}
	if zarrFiles == 0 {
		t.Fatal("no Zarr store in the manifest's checksums")
	}
	want := versionBytes(t, single.Dir)
	if fileExists(stagingDir(cfg.OutputRoot, filepath.Base(single.Dir))) {
		t.Error("the staging directory outlived the publication")
	}
	for _, n := range []int{1, 2, 3, 7} {
		c := *cfg
		c.OutputRoot = t.TempDir()
		res := buildPartitions(t, &c, n)
		if filepath.Base(res.Dir) != filepath.Base(single.Dir) {
			t.Fatalf("%d partitions: version %s, single machine %s", n, filepath.Base(res.Dir), filepath.Base(single.Dir))
		}
		sameVersion(t, fmt.Sprintf("%d partitions", n), want, versionBytes(t, res.Dir))
		if fileExists(stagingDir(c.OutputRoot, filepath.Base(res.Dir))) {
			t.Errorf("%d partitions: the staging directory outlived the commit", n)
		}
		if r, err := warehouse.Open(res.Dir, warehouse.OpenOptions{}); err != nil {
			t.Errorf("%d partitions: %v", n, err)
		} else {
			r.Close()
		}
	}
}

// Commit before every partition finished names the missing shards and
// partitions and publishes nothing; after the last partition it publishes.
func TestCommitNamesMissingPartitions(t *testing.T) {
	cfg := testConfig(t, 2)
	opts := func() Options { return Options{Config: cfg, Source: partitionSource(t), Workers: 2} }
	for _, i := range []int{0, 2} {
		if _, err := BuildPartition(context.Background(), opts(), Partition{i, 3}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Commit(context.Background(), CommitOptions{Options: opts()})
	var inc *IncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("commit: %v, want an IncompleteError", err)
	}
	want := "cannot commit: 4 of 12 shards are not complete (shards 4-7); partition 1/3 (shards 4-7) has not started; nothing was published"
	if err.Error() != want {
		t.Fatalf("commit:\n got %s\nwant %s", err, want)
	}
	entries, _ := os.ReadDir(cfg.OutputRoot)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("a failed commit left %s", e.Name())
		}
	}
	if _, err := BuildPartition(context.Background(), opts(), Partition{1, 3}); err != nil {
		t.Fatal(err)
	}
	res, err := Commit(context.Background(), CommitOptions{Options: opts()})
	if err != nil {
		t.Fatal(err)
	}
	// Rerunning the commit, or a partition, of a published version: up to date.
	if again, err := Commit(context.Background(), CommitOptions{Options: opts()}); err != nil || again.Status != StatusUpToDate {
		t.Fatalf("second commit: %v, status %v", err, again)
	}
	if p, err := BuildPartition(context.Background(), opts(), Partition{1, 3}); err != nil || !p.UpToDate {
		t.Fatalf("partition after commit: %v %+v", err, p)
	}
	if res.Manifest.Samples != 18 {
		t.Fatalf("%d samples", res.Manifest.Samples)
	}
}

// A rerun keeps the complete shards (checked against their records) and
// rebuilds only the missing or damaged ones; a single-machine build over
// the same staging directory does the same (shard-level resume after a
// crash), and the result is still the single-machine bytes.
func TestResumeKeepsCompleteShards(t *testing.T) {
	ref := testConfig(t, 2)
	single, err := Build(context.Background(), Options{Config: ref, Source: partitionSource(t), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := versionBytes(t, single.Dir)
	name := filepath.Base(single.Dir)

	cfg := testConfig(t, 2)
	p, err := BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2}, Partition{0, 1})
	if err != nil || p.Built != 12 || p.Kept != 0 {
		t.Fatalf("first run: %v %+v", err, p)
	}
	st := &staging{dir: stagingDir(cfg.OutputRoot, name)}
	// As a kill would leave them: shard 5 without its record, shard 8
	// torn (one byte short), shard 9 with a flipped byte.
	if err := os.Remove(st.receiptPath(5)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(st.shardPath(8), fileSize(t, st.shardPath(8))-1); err != nil {
		t.Fatal(err)
	}
	flipByte(t, st.shardPath(9), 100)
	counters := &Counters{}
	p, err = BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2, Counters: counters}, Partition{0, 1})
	if err != nil || p.Built != 3 || p.Kept != 9 {
		t.Fatalf("rerun: %v %+v, want 3 built, 9 kept", err, p)
	}
	if got := counters.Transformed.Load(); got != 6 {
		t.Errorf("rerun transformed %d samples, want the 6 of shards 5, 8, 9", got)
	}
	// A single-machine build finds the staged shards and keeps them all.
	counters = &Counters{}
	res, err := Build(context.Background(), Options{Config: cfg, Source: partitionSource(t), Workers: 2, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	if got := counters.Transformed.Load(); got != 0 {
		t.Errorf("the build over a complete staging directory transformed %d samples", got)
	}
	sameVersion(t, "resumed", want, versionBytes(t, res.Dir))
}

// A second process on the same shards is refused by their locks, naming
// the holder.
func TestPartitionRunTwiceIsRefused(t *testing.T) {
	cfg := testConfig(t, 2)
	single, err := Build(context.Background(), Options{Config: testConfig(t, 2), Source: partitionSource(t)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStaging(cfg.OutputRoot, filepath.Base(single.Dir), false)
	if err != nil {
		t.Fatal(err)
	}
	held, err := outputroot.LockOwned(st.lockPath(5), "partition 1/3 on node7 pid 4242")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = BuildPartition(context.Background(), Options{Config: cfg, Source: partitionSource(t)}, Partition{1, 3})
	if !errors.Is(err, outputroot.ErrLocked) || !strings.Contains(err.Error(), "shard-00005.lock is held by partition 1/3 on node7 pid 4242") {
		t.Fatalf("err %v, want ErrLocked naming the holder", err)
	}
	// A commit meanwhile is refused too, and a single-machine build
	// waits for partitions (they hold the version lock shared).
	p0, err := outputroot.LockVersionShared(context.Background(), cfg.OutputRoot, filepath.Base(single.Dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p0.Release()
	if _, err := Build(context.Background(), Options{Config: cfg, Source: partitionSource(t)}); !errors.Is(err, outputroot.ErrLocked) {
		t.Fatalf("build during partitions: %v, want ErrLocked", err)
	}
	var inc *IncompleteError
	if _, err := Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: partitionSource(t)}}); !errors.As(err, &inc) || !inc.Running {
		t.Fatalf("commit during partitions: %v, want an IncompleteError (running)", err)
	}
}

// A failing threshold fails every partition before any shard is written.
func TestPartitionThresholdFailsEveryPartition(t *testing.T) {
	cfg := testConfig(t, 2)
	src := func() *memSource {
		s := partitionSource(t)
		s.samples[4].Reasons = []validate.Reason{validate.ReasonMissingFile} // as a source reports it at scan
		return s
	}
	max0 := int64(0)
	cfg.Thresholds.Missing.MaxCount = &max0
	for i := range 3 {
		_, err := BuildPartition(context.Background(), Options{Config: cfg, Source: src()}, Partition{i, 3})
		var th *validate.ThresholdError
		if !errors.As(err, &th) {
			t.Fatalf("partition %d/3: %v, want a ThresholdError", i, err)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(cfg.OutputRoot, ".*.staging", "shards", "*"))
	if len(matches) != 0 {
		t.Fatalf("failed partitions wrote %v", matches)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
