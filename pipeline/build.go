// Package pipeline builds a warehouse version: scan and validate the inputs
// (pass 1, streamed to a spill file), check thresholds, transform the kept
// samples in a worker pool and write them in plan order into shards (pass
// 2), then publish the version atomically.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"warehouse-etl/analytics"
	"warehouse-etl/config"
	"warehouse-etl/outputroot"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
	"warehouse-etl/zarr"
)

// Options configure one build.
type Options struct {
	Config   *config.Config
	Clear    bool                // WAREHOUSE_CLEAR=1: rebuild and replace an existing version
	Getenv   func(string) string // threshold overrides; nil means no overrides
	Logger   *slog.Logger        // nil discards
	Counters *Counters           // nil allocates private counters
	Now      func() time.Time    // nil means time.Now
	Workers  int                 // 0 means Config.WorkerCount()
	Source   sources.Source      // nil means the source the config names
	// LockWait is how long to wait for another build of the same version
	// to release its lock; 0 fails at once with outputroot.ErrLocked.
	LockWait time.Duration
}

// Status says what a successful Build did.
type Status int

const (
	StatusBuilt    Status = iota // a new version was published
	StatusRebuilt                // an existing version was rebuilt and replaced (WAREHOUSE_CLEAR=1)
	StatusUpToDate               // the version exists and its sources are unchanged: nothing written
)

func (s Status) String() string {
	return [...]string{"built", "rebuilt", "up to date"}[s]
}

// Result describes a successful build.
type Result struct {
	Status   Status
	Dir      string // the published version directory
	Manifest *warehouse.Manifest
	Report   *Report            // nil when up to date
	Warnings []validate.Finding // thresholds exceeded with action warn
}

// Build runs the whole pipeline. Errors are *ThresholdError (exit 3),
// *StaleError (exit 4), outputroot.ErrLocked (exit 5), context cancellation,
// or another error naming what failed.
func Build(ctx context.Context, opts Options) (*Result, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	defer b.close()
	return b.run(ctx)
}

// close releases a source the builder opened itself (files it holds open);
// a source passed in Options belongs to the caller.
func (b *builder) close() {
	if c, ok := b.src.(io.Closer); ok && b.opts.Source == nil {
		if err := c.Close(); err != nil {
			b.log.Warn("closing the source", "err", err)
		}
	}
}

// builder holds the state of one build.
type builder struct {
	opts       Options
	cfg        *config.Config
	log        *slog.Logger
	counters   *Counters
	src        sources.Source
	thresholds validate.Thresholds
	recipe     *warehouse.Recipe
	id         warehouse.ID
	outRoot    string
	workers    int
	extras     []sources.ExtraSpec // per-sample extras of the source, in order
	extraF32   int                 // float32 values of all extras per sample
	now        func() time.Time
}

func newBuilder(opts Options) (*builder, error) {
	cfg := opts.Config
	if cfg == nil {
		return nil, errors.New("pipeline: no config")
	}
	b := &builder{opts: opts, cfg: cfg, log: opts.Logger, counters: opts.Counters, now: opts.Now, workers: opts.Workers}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.counters == nil {
		b.counters = &Counters{}
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.workers <= 0 {
		b.workers = cfg.WorkerCount()
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	th, err := cfg.Thresholds.WithEnv(getenv)
	if err != nil {
		return nil, &ConfigError{err}
	}
	b.thresholds = th
	b.src = opts.Source
	if b.src == nil {
		src, err := openSource(cfg, b.log)
		if err != nil {
			return nil, &ConfigError{err}
		}
		b.src = src
	}
	b.extras = b.src.Extras()
	for _, e := range b.extras {
		b.extraF32 += e.Elements()
	}
	b.recipe = versionRecipe(cfg, b.extras)
	b.id = b.recipe.ID()
	b.outRoot = cfg.Resolve(cfg.OutputRoot)
	return b, nil
}

func (b *builder) run(ctx context.Context) (*Result, error) {
	start := b.now()
	lock, err := outputroot.LockVersionWait(ctx, b.outRoot, b.id.DirName(), b.opts.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	return b.publish(ctx, lock, start, true)
}

// publish makes and publishes the version under lock: scan, thresholds,
// the shards (build: built here, in the staging directory, keeping the
// complete shards of an interrupted earlier build; else: those the
// partitions built, each re-hashed against its record), then samples.jsonl,
// summary, manifest and exports from the shard records, and the atomic
// publication. Build and Commit both end here, so a partitioned build
// publishes exactly what a single-machine build does.
func (b *builder) publish(ctx context.Context, lock *outputroot.VersionLock, start time.Time, build bool) (*Result, error) {
	name := b.id.DirName()
	// Temporaries of other versions' builds that did not finish (killed,
	// out of disk): removed when their build lock is free, so a crashed
	// nightly build does not hold gigabytes until its version is rebuilt.
	freed, err := outputroot.CleanTemporary(b.outRoot, name, false)
	for _, r := range freed {
		b.log.Info("removed a temporary directory", "path", r.Path, "bytes", r.Bytes, "why", r.Why)
	}
	if err != nil {
		return nil, err
	}
	final := lock.FinalDir()

	existing, err := warehouse.ReadManifest(final)
	switch {
	case err == nil && !b.opts.Clear:
		return b.upToDate(ctx, lock, final, existing)
	case err == nil || errors.Is(err, fs.ErrNotExist):
	default:
		if !b.opts.Clear {
			return nil, fmt.Errorf("%w; rerun with WAREHOUSE_CLEAR=1 to rebuild it", err)
		}
	}
	replacing := err == nil
	if !replacing {
		if _, statErr := os.Stat(final); statErr == nil {
			replacing = true // a directory without a readable manifest: only reachable with Clear
		}
	}

	tmp, err := lock.CreateTemp()
	if err != nil {
		return nil, err
	}
	if build {
		b.log.Info("build started", "version", b.id.String(), "dir", final, "workers", b.workers)
	} else {
		b.log.Info("commit started", "version", b.id.String(), "dir", final, "workers", b.workers)
	}

	rep := newReport(b, start)
	scan, err := b.scanPass(ctx, tmp, rep)
	if err != nil {
		return nil, err
	}
	v0 := time.Now()
	failed, _ := splitFindings(b.thresholds.Evaluate(scan.summary.Result().Total))
	rep.Phases.Validate += time.Since(v0).Seconds()
	if len(failed) > 0 {
		return nil, &ThresholdError{Findings: failed}
	}
	sp := b.shardPlan(scan)
	var (
		st      *staging
		records map[int]*shardRecord
	)
	if build {
		if st, err = openStaging(b.outRoot, name, b.opts.Clear); err != nil {
			return nil, err
		}
		host, _ := os.Hostname()
		owner := fmt.Sprintf("build on %s pid %d", host, os.Getpid())
		res, err := b.buildShards(ctx, st, scan, sp, 0, sp.shards(), owner, rep)
		if err != nil {
			return nil, err
		}
		records = res.records
	} else {
		st = &staging{dir: stagingDir(b.outRoot, name)}
		all := make([]int, sp.shards())
		for k := range all {
			all[k] = k
		}
		h0 := b.now()
		done, problems, err := st.checkShards(ctx, all, sp, true, b.workers)
		if err != nil {
			return nil, err
		}
		// The partitions transformed and wrote; the commit's work here is
		// re-hashing, logged on its own (Write stays 0: no samples/s).
		hashSeconds := b.now().Sub(h0).Seconds()
		if len(problems) > 0 {
			e := &IncompleteError{Problems: problems, Total: sp.shards()}
			for k := range problems {
				e.Missing = append(e.Missing, k)
			}
			slices.Sort(e.Missing)
			e.Who = st.describeMissing(e.Missing, e.Total)
			return nil, e
		}
		records = done
		b.log.Info("partitions checked", "shards", len(done), "hash_seconds", hashSeconds)
	}
	written, err := b.assemble(ctx, tmp, st, scan, sp, records)
	if err != nil {
		return nil, err
	}
	summary := scan.summary.Result()
	failed, warned := splitFindings(b.thresholds.Evaluate(summary.Total))
	if len(failed) > 0 {
		return nil, &ThresholdError{Findings: failed}
	}
	if err := b.checkSourcesUnchanged(ctx, scan.fingerprint); err != nil {
		return nil, err
	}

	publishStart := b.now()
	m := b.manifest(scan, written, summary)
	m.CreatedAtMs = b.now().UnixMilli()
	rep.finish(m, written)
	// A first build report, for the Parquet export to read; the final one,
	// with the publish and total times, replaces it below.
	if err := writeJSONFile(filepath.Join(tmp, warehouse.BuildReportName), rep); err != nil {
		return nil, err
	}
	// The Parquet exports are derived from the files above and written
	// before the manifest, so a published version always has them.
	exported, err := analytics.Export(ctx, tmp, m, analytics.ExportOptions{Logger: b.log, BeforePublish: true})
	if err != nil {
		return nil, err
	}
	m.Files.Parquet = &exported.Files
	// The Zarr store, when configured, is also complete before the manifest.
	if z := b.cfg.Zarr; z.Enabled {
		opts := zarr.Options{ZstdLevel: z.ZstdLevel, ShardSamples: z.ShardSamples, Workers: b.workers, Logger: b.log}
		if _, err := zarr.Write(ctx, tmp, m, filepath.Join(tmp, zarr.StoreName), opts); err != nil {
			return nil, err
		}
	}
	// Every file is final now but the two that carry the timings: the
	// manifest records the size and sha256 of each (files.checksums).
	sums, err := b.checksums(ctx, tmp, m, warehouse.BuildReportName, warehouse.BuildParquetName)
	if err != nil {
		return nil, err
	}
	// The report is final before the manifest seals it: publish and total
	// end here, without the manifest write, the last fsync and the rename
	// (the "build published" log line carries those as commit_seconds).
	sealStart := b.now()
	rep.Phases.Publish = sealStart.Sub(publishStart).Seconds()
	rep.Phases.Total = sealStart.Sub(start).Seconds()
	if err := writeJSONFile(filepath.Join(tmp, warehouse.BuildReportName), rep); err != nil {
		return nil, err
	}
	if err := analytics.ExportBuild(ctx, tmp, m); err != nil {
		return nil, err
	}
	for _, name := range []string{warehouse.BuildReportName, warehouse.BuildParquetName} {
		sum, err := warehouse.FileSHA256(ctx, filepath.Join(tmp, name))
		if err != nil {
			return nil, err
		}
		sums[name] = sum
	}
	m.Files.Checksums = sums
	raw, err := m.Encode()
	if err != nil {
		return nil, err
	}
	// manifest.json.sha256, then manifest.json: the directory is renamed
	// into place whole, so a reader sees both or neither.
	if err := warehouse.WriteManifest(tmp, raw); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := lock.Publish(); err != nil {
		return nil, err
	}
	commitSeconds := b.now().Sub(sealStart).Seconds()
	// The staging directory's shards are the version's now (hard links);
	// the rest of it is spent.
	if err := os.RemoveAll(st.dir); err != nil {
		b.log.Warn("removing the staging directory", "dir", st.dir, "err", err)
	}
	for _, f := range warned {
		b.log.Warn("validation threshold exceeded (warn)", "finding", f.String())
	}
	status := StatusBuilt
	if replacing {
		status = StatusRebuilt
	}
	b.log.Info("build published", "status", status.String(), "dir", final, "samples", m.Samples, "shards", len(m.Shards),
		"commit_seconds", commitSeconds)
	return &Result{Status: status, Dir: final, Manifest: m, Report: rep, Warnings: warned}, nil
}

// upToDate handles a rerun against an existing version: unchanged sources
// mean nothing to do (but today's thresholds still apply to the recorded
// summary); changed sources are refused.
func (b *builder) upToDate(ctx context.Context, lock *outputroot.VersionLock, dir string, m *warehouse.Manifest) (*Result, error) {
	if err := b.checkPublished(ctx, dir, m); err != nil {
		return nil, err
	}
	_, warned := splitFindings(b.thresholds.Evaluate(m.Summary.Total))
	// A commit killed after publishing leaves the staging directory.
	if st := stagingDir(b.outRoot, b.id.DirName()); fileExists(st) {
		if err := os.RemoveAll(st); err != nil {
			return nil, err
		}
		b.log.Info("removed the staging directory of the published version", "dir", st)
	}
	// A build of this version killed after publishing may have left its
	// temporary directory and not swapped latest: finish its work.
	freed, err := lock.RemoveOwnTemporaries()
	for _, r := range freed {
		b.log.Info("removed a temporary directory", "path", r.Path, "bytes", r.Bytes, "why", r.Why)
	}
	if err != nil {
		return nil, err
	}
	if repaired, err := lock.RepairLatest(m.CreatedAtMs); err != nil {
		return nil, err
	} else if repaired {
		b.log.Warn("latest did not name this version, the newest: repaired (a build was interrupted while publishing)", "dir", dir)
	}
	b.log.Info("up to date", "dir", dir, "version", m.Version)
	return &Result{Status: StatusUpToDate, Dir: dir, Manifest: m, Warnings: warned}, nil
}

// checkPublished checks a published version against today's sources and
// thresholds: changed sources are a *StaleError, failed thresholds a
// *ThresholdError.
func (b *builder) checkPublished(ctx context.Context, dir string, m *warehouse.Manifest) error {
	fw := warehouse.NewFingerprintWriter(nil)
	if err := b.fingerprint(ctx, fw); err != nil {
		return err
	}
	if fw.Sum().SHA256 != m.SourceFingerprint.SHA256 {
		change, err := warehouse.FirstChange(filepath.Join(dir, m.Files.Fingerprint), func(fn func(warehouse.FileEntry) error) error {
			return b.src.Fingerprint(ctx, fn)
		})
		if err != nil {
			return err
		}
		if change == "" {
			change = "the file listing differs"
		}
		return &StaleError{Dir: dir, Change: change}
	}
	if failed, _ := splitFindings(b.thresholds.Evaluate(m.Summary.Total)); len(failed) > 0 {
		return &ThresholdError{Findings: failed}
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// fingerprint feeds every source file into fw.
func (b *builder) fingerprint(ctx context.Context, fw *warehouse.FingerprintWriter) error {
	return b.src.Fingerprint(ctx, fw.Add)
}

// checkSourcesUnchanged re-lists the inputs after the build: a file that
// changed while we read it would make the version lie about its inputs.
func (b *builder) checkSourcesUnchanged(ctx context.Context, before warehouse.Fingerprint) error {
	fw := warehouse.NewFingerprintWriter(nil)
	if err := b.fingerprint(ctx, fw); err != nil {
		return err
	}
	if fw.Sum() != before {
		return errors.New("sources changed while the build was running; nothing was published, rerun the build")
	}
	return nil
}

func splitFindings(all []validate.Finding) (failed, warned []validate.Finding) {
	for _, f := range all {
		if f.Action == validate.ActionWarn {
			warned = append(warned, f)
		} else {
			failed = append(failed, f)
		}
	}
	return failed, warned
}
