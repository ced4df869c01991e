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
	"time"

	"warehouse-etl/analytics"
	"warehouse-etl/config"
	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/outputroot"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
	"warehouse-etl/zarr"
)

// Options configure one build.
type Options struct {
	Config   *config.Config
	Clear    bool             // WAREHOUSE_CLEAR=1: rebuild and replace an existing version
	Logger   *slog.Logger     // nil discards
	Counters *Counters        // nil allocates private counters
	Now      func() time.Time // nil means time.Now
	Workers  int              // 0 means Config.WorkerCount()
	Source   sources.Source   // nil means the source the config names
	// LockWait is how long to wait for another build of the same version
	// to release its lock; 0 fails at once with outputroot.ErrLocked.
	LockWait time.Duration
	// MemoryLimit bounds what the build holds (bytes): decodes reserve
	// their bytes from what is left of it once the transform stage starts
	// and wait for each other rather than go beyond it (memory.go). 0
	// means no limit; the CLI derives a default from the machine
	// (membudget.SystemMemory).
	MemoryLimit int64
	// Reuse says where to find samples to copy instead of decoding
	// (reuse.go); the zero value reuses from output_root's versions.
	Reuse ReuseOptions
	// NoStaleEstimate: a changed source is refused (*StaleError) without
	// first scanning it to say how much a rebuild would reuse.
	NoStaleEstimate bool
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
	staged     *planUse // partitions and commits: the version's stored plan (plan.go)
	// withIdentity: the scan records each kept sample's input identity
	// (a version build's, not validate's or live's); reuse the samples of
	// published versions (reuse.go).
	withIdentity bool
	// inputs is the input cache of the scan that computes identities
	// (reuse_inputs.go), nil when off.
	inputs *inputCache
	reuse  *reuseStats
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
	b.thresholds = cfg.Thresholds
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

// The stages of a version, each a method of builder: prepare (the scan,
// the plan, the thresholds), shards (transform and write a range of shards
// into the staging directory), assemble (samples.jsonl, the summary and the
// manifest from the plan and the shard receipts), seal (the exports, the
// checksums, the report, the manifest and its digest) and publish (the
// rename into place and latest). Build runs them all on one machine;
// BuildPartition runs prepare and shards for its range; Commit runs them
// all with the partitions' shards in place of its own.

// Build runs the whole pipeline. Errors are *RejectedError (a
// *validate.ThresholdError, exit 3, with its report), *StaleError (exit 4), outputroot.ErrLocked (exit 5), context
// cancellation, or another error naming what failed.
func Build(ctx context.Context, opts Options) (*Result, error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	defer b.close()
	start := b.now()
	lock, err := outputroot.LockVersionWait(ctx, b.outRoot, b.id.DirName(), b.opts.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	host, _ := os.Hostname()
	owner := fmt.Sprintf("build on %s pid %d", host, os.Getpid())
	return b.version(ctx, lock, start, "build", func(ctx context.Context, scan *scanResult, sp shardPlan, rep *Report) (*staging, map[int]*shardReceipt, error) {
		st, err := openStaging(b.outRoot, b.id.DirName(), b.opts.Clear)
		if err != nil {
			return nil, nil, err
		}
		res, err := b.shards(ctx, st, scan, sp, 0, sp.shards(), owner, rep)
		if err != nil {
			return nil, nil, err
		}
		return st, res.receipts, nil
	})
}

// shardsStage yields every shard of plan sp in a staging directory, with
// its receipt: Build builds them (builder.shards), Commit checks those the
// partitions built (builder.checkStaged).
type shardsStage func(ctx context.Context, scan *scanResult, sp shardPlan, rep *Report) (*staging, map[int]*shardReceipt, error)

// version makes and publishes the version under lock, its shards from
// shards; what ("build", "commit") names the run in the log. A version
// already published is up to date (or refused as stale) unless
// WAREHOUSE_CLEAR=1 replaces it. Build and Commit both end here, so a
// partitioned build publishes exactly what a single-machine build does.
func (b *builder) version(ctx context.Context, lock *outputroot.VersionLock, start time.Time, what string, shards shardsStage) (*Result, error) {
	if err := lock.ForConfig(b.cfg.ConfigName()); err != nil {
		return nil, &ConfigError{err}
	}
	// Temporaries of other versions' builds that did not finish (killed,
	// out of disk): removed when their build lock is free, so a crashed
	// nightly build does not hold gigabytes until its version is rebuilt.
	freed, err := outputroot.CleanTemporary(b.outRoot, b.id.DirName(), false)
	for _, r := range freed {
		b.log.Info("removed a temporary directory", "path", r.Path, "bytes", r.Bytes, "why", r.Why)
	}
	if err != nil {
		return nil, err
	}
	final := lock.FinalDir()
	if m, err := b.published(final); err != nil {
		return nil, err
	} else if m != nil {
		res, err := b.upToDate(ctx, lock, final, m)
		if se := (*StaleError)(nil); errors.As(err, &se) {
			if tmp, terr := lock.CreateTemp(); terr == nil {
				b.estimateStale(ctx, tmp, se)
			}
		}
		return res, err
	}
	replacing := fileExists(final)
	tmp, err := lock.CreateTemp()
	if err != nil {
		return nil, err
	}
	b.log.Info(what+" started", "version", b.id.String(), "dir", final, "workers", b.workers)
	rep := newReport(b, start)
	scan, sp, err := b.prepare(ctx, tmp, rep)
	if te := (*validate.ThresholdError)(nil); errors.As(err, &te) && scan != nil {
		return nil, b.reject(ctx, scan, te.Findings)
	}
	if err != nil {
		return nil, err
	}
	st, receipts, err := shards(ctx, scan, sp, rep)
	if err != nil {
		return nil, err
	}
	m, written, err := b.assemble(ctx, tmp, st, scan, sp, receipts)
	if err != nil {
		return nil, err
	}
	sealed, err := b.seal(ctx, tmp, m, written, rep)
	if err != nil {
		return nil, err
	}
	return b.publish(lock, st, m, rep, replacing, sealed)
}

// published reads the version already at final: its manifest when a rerun
// keeps it (nil with WAREHOUSE_CLEAR=1, or when there is none). A manifest
// that cannot be read is an error unless WAREHOUSE_CLEAR=1 replaces it.
func (b *builder) published(final string) (*warehouse.Manifest, error) {
	// A version name that is a symbolic link is refused, not followed.
	if err := outputroot.CheckEntry(final); err != nil {
		return nil, err
	}
	m, err := warehouse.ReadManifest(final)
	switch {
	case err == nil && !b.opts.Clear:
		return m, nil
	case err == nil || errors.Is(err, fs.ErrNotExist) || b.opts.Clear:
		return nil, nil
	}
	return nil, fmt.Errorf("%w; rerun with WAREHOUSE_CLEAR=1 to rebuild it", err)
}

// prepare is the first stage: it scans the source into dir (the spill and
// the source fingerprint), checks the thresholds on the scan's summary (a
// failing limit is a *validate.ThresholdError before any shard is written,
// returned with the scan, from which version writes the report) and divides
// the plan into shards. The config, the thresholds with their
// overrides and the source are the builder's (newBuilder).
func (b *builder) prepare(ctx context.Context, dir string, rep *Report) (*scanResult, shardPlan, error) {
	b.withIdentity = true
	scan, err := b.scanPass(ctx, dir, rep)
	if err != nil {
		return nil, shardPlan{}, err
	}
	v0 := time.Now()
	failed, _ := b.thresholds.Check(scan.summary.Result().Total)
	rep.Phases.Validate += time.Since(v0).Seconds()
	if len(failed) > 0 {
		return scan, shardPlan{}, &validate.ThresholdError{Findings: failed}
	}
	return scan, b.shardPlan(scan), nil
}

// seal finishes the version in tmp whose manifest m assemble made: the
// Parquet exports and the Zarr store, the checksums of every file, the
// build report (written once, with its final times, and exported to
// build.parquet from memory), then the manifest and its digest. rep's
// publish and total times end at sealed, before the report is written: the
// manifest write, the last fsync and the rename follow (publish logs them
// as commit_seconds).
func (b *builder) seal(ctx context.Context, tmp string, m *warehouse.Manifest, written *writeResult, rep *Report) (sealed time.Time, err error) {
	sealStart := b.now()
	m.CreatedAtMs = sealStart.UnixMilli()
	rep.finish(m, written)
	rep.Reuse = b.reuseReport(written)
	// The exports are derived from the files above and written before the
	// manifest, so a published version always has them.
	exported, err := analytics.Export(ctx, tmp, m, analytics.ExportOptions{Logger: b.log, SkipBuild: true})
	if err != nil {
		return time.Time{}, err
	}
	m.Files.Parquet = &exported.Files
	if z := b.cfg.Zarr; z.Enabled {
		opts := zarr.Options{ZstdLevel: z.ZstdLevel, ShardSamples: z.ShardSamples, Workers: b.workers, Logger: b.log}
		if _, err := zarr.Write(ctx, tmp, m, filepath.Join(tmp, zarr.StoreName), opts); err != nil {
			return time.Time{}, err
		}
	}
	// Every file is final now but the two that carry the timings: the
	// manifest records the size and sha256 of each (files.checksums).
	sums, err := b.checksums(ctx, tmp, m, warehouse.BuildReportName, warehouse.BuildParquetName)
	if err != nil {
		return time.Time{}, err
	}
	sealed = b.now()
	rep.Phases.Publish = sealed.Sub(sealStart).Seconds()
	rep.Phases.Total = sealed.Sub(rep.start).Seconds()
	raw, err := encodeJSON(rep)
	if err != nil {
		return time.Time{}, err
	}
	if err := atomicfile.WriteSynced(filepath.Join(tmp, warehouse.BuildReportName), raw); err != nil {
		return time.Time{}, err
	}
	if err := analytics.ExportBuildReport(ctx, tmp, m, raw); err != nil {
		return time.Time{}, err
	}
	for _, name := range []string{warehouse.BuildReportName, warehouse.BuildParquetName} {
		sum, err := warehouse.FileSHA256(ctx, filepath.Join(tmp, name))
		if err != nil {
			return time.Time{}, err
		}
		sums[name] = sum
	}
	m.Files.Checksums = sums
	enc, err := m.Encode()
	if err != nil {
		return time.Time{}, err
	}
	// manifest.json.sha256, then manifest.json: the directory is renamed
	// into place whole, so a reader sees both or neither.
	if err := warehouse.WriteManifest(tmp, enc); err != nil {
		return time.Time{}, err
	}
	return sealed, ctx.Err()
}

// publish is the last stage: it renames the sealed version into place and
// points latest at it (lock.Publish), then removes the staging directory,
// whose shards the version now holds as hard links.
func (b *builder) publish(lock *outputroot.VersionLock, st *staging, m *warehouse.Manifest, rep *Report, replacing bool, sealed time.Time) (*Result, error) {
	if err := lock.Publish(); err != nil {
		return nil, err
	}
	commitSeconds := b.now().Sub(sealed).Seconds()
	if err := os.RemoveAll(st.dir); err != nil {
		b.log.Warn("removing the staging directory", "dir", st.dir, "err", err)
	}
	// The report of an earlier failed build of this version is spent.
	if err := os.RemoveAll(filepath.Join(b.outRoot, outputroot.FailedDir(b.id.DirName()))); err != nil {
		b.log.Warn("removing the report of an earlier failed build", "err", err)
	}
	_, warned := b.thresholds.Check(m.Summary.Total)
	for _, f := range warned {
		b.log.Warn("validation threshold exceeded (warn)", "finding", f.String())
	}
	status := StatusBuilt
	if replacing {
		status = StatusRebuilt
	}
	final := lock.FinalDir()
	b.log.Info("build published", "status", status.String(), "dir", final, "samples", m.Samples, "shards", len(m.Shards),
		"commit_seconds", commitSeconds)
	b.logPointers(final)
	return &Result{Status: status, Dir: final, Manifest: m, Report: rep, Warnings: warned}, nil
}

// upToDate handles a rerun against an existing version: unchanged sources
// mean nothing to do (but today's thresholds still apply to the recorded
// summary); changed sources are refused.
func (b *builder) upToDate(ctx context.Context, lock *outputroot.VersionLock, dir string, m *warehouse.Manifest) (*Result, error) {
	if err := b.checkPublished(ctx, dir, m); err != nil {
		return nil, err
	}
	_, warned := b.thresholds.Check(m.Summary.Total)
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
	b.logPointers(dir)
	return &Result{Status: StatusUpToDate, Dir: dir, Manifest: m, Warnings: warned}, nil
}

// checkPublished checks a published version against today's sources and
// thresholds: changed sources are a *StaleError, failed thresholds a
// *RejectedError (a *validate.ThresholdError) whose report is the version.
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
	if failed, _ := b.thresholds.Check(m.Summary.Total); len(failed) > 0 {
		return b.rejectPublished(dir, m, failed)
	}
	return nil
}

// logPointers says where this config's pointer is, and when latest names
// another config's version (outputroot/pointers.go): a trainer reading
// the output root reads that one.
func (b *builder) logPointers(dir string) {
	name := b.cfg.ConfigName()
	if name == "" {
		return
	}
	pointer := filepath.Join(b.outRoot, warehouse.LatestNameFor(name))
	if target, err := os.Readlink(filepath.Join(b.outRoot, warehouse.LatestName)); err == nil && target != filepath.Base(dir) {
		b.log.Info("latest names another config's version: read this config's with its own pointer",
			"latest", target, "pointer", pointer)
		return
	}
	b.log.Debug("pointers", "latest", filepath.Base(dir), "pointer", pointer)
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
