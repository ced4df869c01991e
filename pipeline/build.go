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
// *StaleError (exit 4), warehouse.ErrLocked (exit 5), context cancellation,
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
	name := b.id.DirName()
	lock, err := warehouse.Acquire(b.outRoot, name)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	final := lock.FinalDir()

	existing, err := warehouse.ReadManifest(final)
	switch {
	case err == nil && !b.opts.Clear:
		return b.upToDate(ctx, final, existing)
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

	tmp, err := lock.Begin()
	if err != nil {
		return nil, err
	}
	b.log.Info("build started", "version", b.id.String(), "dir", final, "workers", b.workers)

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
	written, err := b.writePass(ctx, tmp, scan, rep)
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
	if err := writeJSONFile(filepath.Join(tmp, warehouse.BuildReportName), rep); err != nil {
		return nil, err
	}
	// The Parquet exports are derived from the files above and written
	// before the manifest, so a published version always has them. The
	// publish and total times are not known yet (build.parquet omits them).
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
	raw, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(tmp, warehouse.ManifestName), raw); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := lock.Commit(); err != nil {
		return nil, err
	}
	rep.Phases.Publish = b.now().Sub(publishStart).Seconds()
	rep.Phases.Total = b.now().Sub(start).Seconds()
	// The report is rewritten after publish to carry the publish time; it
	// is not covered by any checksum and not read by the training reader.
	if err := writeJSONFile(filepath.Join(final, warehouse.BuildReportName), rep); err != nil {
		b.log.Warn("could not update the build report", "err", err)
	}
	for _, f := range warned {
		b.log.Warn("validation threshold exceeded (warn)", "finding", f.String())
	}
	status := StatusBuilt
	if replacing {
		status = StatusRebuilt
	}
	b.log.Info("build published", "status", status.String(), "dir", final, "samples", m.Samples, "shards", len(m.Shards))
	return &Result{Status: status, Dir: final, Manifest: m, Report: rep, Warnings: warned}, nil
}

// upToDate handles a rerun against an existing version: unchanged sources
// mean nothing to do (but today's thresholds still apply to the recorded
// summary); changed sources are refused.
func (b *builder) upToDate(ctx context.Context, dir string, m *warehouse.Manifest) (*Result, error) {
	fw := warehouse.NewFingerprintWriter(nil)
	if err := b.fingerprint(ctx, fw); err != nil {
		return nil, err
	}
	if fw.Sum().SHA256 != m.SourceFingerprint.SHA256 {
		change, err := warehouse.FirstChange(filepath.Join(dir, m.Files.Fingerprint), func(fn func(warehouse.FileEntry) error) error {
			return b.src.Fingerprint(ctx, func(fi sources.FileInfo) error { return fn(warehouse.FileEntry(fi)) })
		})
		if err != nil {
			return nil, err
		}
		if change == "" {
			change = "the file listing differs"
		}
		return nil, &StaleError{Dir: dir, Change: change}
	}
	failed, warned := splitFindings(b.thresholds.Evaluate(m.Summary.Total))
	if len(failed) > 0 {
		return nil, &ThresholdError{Findings: failed}
	}
	b.log.Info("up to date", "dir", dir, "version", m.Version)
	return &Result{Status: StatusUpToDate, Dir: dir, Manifest: m, Warnings: warned}, nil
}

// fingerprint feeds every source file into fw.
func (b *builder) fingerprint(ctx context.Context, fw *warehouse.FingerprintWriter) error {
	return b.src.Fingerprint(ctx, func(fi sources.FileInfo) error { return fw.Add(warehouse.FileEntry(fi)) })
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
