package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"warehouse-etl/outputroot"
)

// Partition is part Index of Count of a version's shards: the shards
// [Index*S/Count, (Index+1)*S/Count) of the S the plan makes. The first
// partition to start scans the whole input and stores the plan in the
// staging directory; the others check a listing of the sources against it
// and read it (plan.go). Each builds only its shards.
type Partition struct{ Index, Count int }

func (p Partition) String() string { return fmt.Sprintf("%d/%d", p.Index, p.Count) }

// shards is the partition's half-open range of shard numbers out of total.
func (p Partition) shards(total int) (lo, hi int) {
	return p.Index * total / p.Count, (p.Index + 1) * total / p.Count
}

// MaxPartitions bounds N in --partition i/N.
const MaxPartitions = 100000

// ParsePartition reads "i/N" (0 <= i < N).
func ParsePartition(s string) (Partition, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Partition{}, fmt.Errorf("partition %q: want i/N, e.g. 0/4, or auto", s)
	}
	return NewPartition(i, n)
}

// NewPartition is partition i of n, checked: 1 <= n <= MaxPartitions and
// 0 <= i < n.
func NewPartition(i, n int) (Partition, error) {
	if n < 1 || n > MaxPartitions {
		return Partition{}, fmt.Errorf("partition count %d: must be 1..%d", n, MaxPartitions)
	}
	if i < 0 || i >= n {
		return Partition{}, fmt.Errorf("partition index %d: must be 0..%d for %d partitions", i, n-1, n)
	}
	return Partition{i, n}, nil
}

// PartitionResult describes a finished partition.
type PartitionResult struct {
	Partition   Partition
	UpToDate    bool // the version is published and its sources unchanged: nothing to do
	ShardsTotal int
	ShardFirst  int
	ShardEnd    int
	Built       int // shards built by this run
	Kept        int // complete shards of an earlier run, checked and kept
	Samples     int64
	Staging     string
}

// BuildPartition builds one partition of the version into its staging
// directory (errors as Build's; a failing threshold fails every partition
// alike, before any shard is written). A rerun keeps the partition's
// complete shards; Options.Clear rebuilds them.
func BuildPartition(ctx context.Context, opts Options, part Partition) (*PartitionResult, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	defer b.close()
	start := b.now()
	name := b.id.DirName()
	lock, err := outputroot.LockVersionShared(ctx, b.outRoot, name, b.opts.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	res := &PartitionResult{Partition: part}
	if m, err := b.published(lock.FinalDir()); err != nil {
		return nil, err
	} else if m != nil {
		if err := b.checkPublished(ctx, lock.FinalDir(), m); err != nil {
			// A changed source: say what a rebuild would cost, as build
			// does (a private temporary: other partitions hold the lock).
			// Partition 0 alone: the estimate scans and hashes every input,
			// and N partitions would do it N times over to say the same.
			if se := (*StaleError)(nil); errors.As(err, &se) {
				switch {
				case b.opts.Reuse.Off || b.opts.NoStaleEstimate:
				case part.Index != 0:
					se.EstimatedBy = fmt.Sprintf("partition 0/%d", part.Count)
				default:
					if tmp, terr := os.MkdirTemp(b.outRoot, outputroot.TempPrefix(name)+"estimate-"); terr == nil {
						b.estimateStale(ctx, tmp, se)
					}
				}
			}
			return nil, err
		}
		b.log.Info("up to date", "dir", lock.FinalDir(), "version", m.Version, "partition", part.String())
		res.UpToDate = true
		return res, nil
	}
	st, err := openStaging(b.outRoot, name, false)
	if err != nil {
		return nil, err
	}
	res.Staging = st.dir
	b.usePlan(st, true, "partition "+part.String())
	tmp, err := os.MkdirTemp(st.dir, "scan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b.log.Info("partition started", "version", b.id.String(), "partition", part.String(), "staging", st.dir, "workers", b.workers)

	rep := newReport(b, start)
	scan, sp, err := b.prepare(ctx, tmp, rep)
	if err != nil {
		return nil, err
	}
	res.ShardsTotal = sp.shards()
	res.ShardFirst, res.ShardEnd = part.shards(res.ShardsTotal)
	host, _ := os.Hostname()
	run := &partitionRun{
		Partition: part.String(), Index: part.Index, Count: part.Count, Version: b.id.String(), PlanSHA256: sp.planSHA,
		ShardsTotal: res.ShardsTotal, ShardFirst: res.ShardFirst, ShardEnd: res.ShardEnd,
		Host: host, PID: os.Getpid(), StartedAtMs: start.UnixMilli(),
	}
	if err := st.writePartition(run); err != nil {
		return nil, err
	}
	owner := fmt.Sprintf("partition %s on %s pid %d", part, host, os.Getpid())
	built, err := b.shards(ctx, st, scan, sp, res.ShardFirst, res.ShardEnd, owner, rep)
	if err != nil {
		return nil, err
	}
	if err := b.checkSourcesUnchanged(ctx, scan.fingerprint); err != nil {
		return nil, err
	}
	res.Built, res.Kept, res.Samples = built.built, built.kept, built.samples
	run.Built, run.Kept, run.FinishedAtMs = built.built, built.kept, b.now().UnixMilli()
	if err := st.writePartition(run); err != nil {
		return nil, err
	}
	b.log.Info("partition done", "partition", part.String(), "shards", fmt.Sprintf("%d-%d of %d", res.ShardFirst, res.ShardEnd-1, res.ShardsTotal),
		"built", res.Built, "kept", res.Kept, "seconds", b.now().Sub(start).Seconds())
	return res, nil
}

// IncompleteError is a commit that finds shards missing or unusable: it
// names them and the partitions that should have built them. Nothing is
// published; rerunning those partitions fixes it.
type IncompleteError struct {
	Missing  []int         // shard numbers
	Problems map[int]error // why each missing shard cannot be used
	Total    int
	Who      []string // the partitions that own them, and what is known of their runs
	Running  bool     // partitions still hold the version's lock
}

func (e *IncompleteError) Error() string {
	var b strings.Builder
	if e.Running && e.Total == 0 {
		b.WriteString("cannot commit yet: partitions of this version are still running (or another build or commit of it holds its lock)")
	} else {
		fmt.Fprintf(&b, "cannot commit: %d of %d shards are not complete (shards %s)", len(e.Missing), e.Total, shardRanges(e.Missing))
	}
	notFinished := 0
	for _, k := range e.Missing {
		if errors.Is(e.Problems[k], fs.ErrNotExist) {
			notFinished++
		}
	}
	if n := len(e.Missing) - notFinished; n > 0 {
		for _, k := range e.Missing {
			if err := e.Problems[k]; err != nil && !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(&b, "; %s: %v", shardID(k), err)
				break
			}
		}
	}
	if len(e.Who) > 0 {
		b.WriteString("; ")
		b.WriteString(strings.Join(e.Who, "; "))
	} else if !e.Running {
		b.WriteString("; no partition of this version has run")
	}
	b.WriteString("; nothing was published")
	return b.String()
}

// CommitOptions configure a commit.
type CommitOptions struct {
	Options
	// Wait keeps retrying for up to this long while partitions are still
	// running or have not all finished (Kubernetes starts the commit Job
	// beside the Indexed Job); 0 checks once.
	Wait time.Duration
}

// Commit checks that every shard of the version is complete and intact
// (each shard file re-hashed against its receipt) and publishes the
// version exactly as a single-machine build would: samples.jsonl, summary,
// manifest, exports. Errors are Build's and *IncompleteError.
func Commit(ctx context.Context, opts CommitOptions) (*Result, error) {
	b, err := newBuilder(opts.Options)
	if err != nil {
		return nil, err
	}
	defer b.close()
	start := b.now()
	name := b.id.DirName()
	st := &staging{dir: stagingDir(b.outRoot, name)}
	b.usePlan(st, false, "commit")
	deadline := time.Now().Add(opts.Wait)
	for {
		lock, err := outputroot.LockVersion(b.outRoot, name)
		switch {
		case err == nil:
			_, statErr := os.Stat(lock.FinalDir())
			if opts.Wait == 0 || !time.Now().Before(deadline) || statErr == nil || st.finishedPlan() {
				defer lock.Release()
				return b.version(ctx, lock, start, "commit", b.checkStaged)
			}
			lock.Release() // partitions have not all finished: wait for them
		case !errors.Is(err, outputroot.ErrLocked):
			return nil, err
		case !time.Now().Before(deadline):
			// Partitions hold the lock shared; a build or another commit
			// holds it exclusively, and that is exit 5, not "partitions
			// still running".
			shared, serr := outputroot.LockVersionShared(ctx, b.outRoot, name, 0)
			if serr != nil {
				return nil, serr
			}
			shared.Release()
			return nil, &IncompleteError{Running: true, Who: st.describeRunning()}
		}
		t := time.NewTimer(min(2*time.Second, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// checkStaged is Commit's shards stage: every shard of plan sp that the
// partitions built, re-hashed against its receipt. A shard missing or
// unusable is an *IncompleteError naming the partitions that own it.
func (b *builder) checkStaged(ctx context.Context, _ *scanResult, sp shardPlan, _ *Report) (*staging, map[int]*shardReceipt, error) {
	st := &staging{dir: stagingDir(b.outRoot, b.id.DirName())}
	if err := outputroot.CheckEntry(st.dir); err != nil {
		return nil, nil, err
	}
	all := make([]int, sp.shards())
	for k := range all {
		all[k] = k
	}
	h0 := b.now()
	done, problems, err := st.checkShards(ctx, all, sp, true, b.workers)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		e := &IncompleteError{Problems: problems, Total: sp.shards()}
		for k := range problems {
			e.Missing = append(e.Missing, k)
		}
		slices.Sort(e.Missing)
		e.Who = st.describeMissing(e.Missing, e.Total)
		return nil, nil, e
	}
	// The partitions transformed and wrote; the commit's work here is
	// re-hashing, logged on its own (Write stays 0: no samples/s).
	b.log.Info("partitions checked", "shards", len(done), "hash_seconds", b.now().Sub(h0).Seconds())
	return st, done, nil
}

// describeRunning lists the partitions that have not finished, from their
// runs.
func (st *staging) describeRunning() []string {
	var out []string
	for _, r := range st.partitions() {
		if r.FinishedAtMs == 0 {
			out = append(out, fmt.Sprintf("partition %s started on %s (pid %d) and has not finished", r.Partition, r.Host, r.PID))
		}
	}
	return out
}
