package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"warehouse-etl/config"
	"warehouse-etl/internal/membudget"
	"warehouse-etl/outputroot"
	"warehouse-etl/pipeline"
	"warehouse-etl/warehouse"
)

const buildSynopsis = `--config FILE [flags]

Builds the warehouse version that FILE describes under its output_root and
prints the version directory on stdout. A rerun with unchanged sources
prints "up to date" and writes nothing.

With --partition i/N (or auto) it builds only partition i of N of the
version's shards into the version's staging directory under output_root
(a filesystem every machine shares) and prints that directory; once all N
have finished, "warehouse-etl commit --config FILE" publishes the version,
byte for byte what one machine would have built. Rerunning a partition, or
a build killed part way, keeps its complete shards and builds the rest.

environment:
  WAREHOUSE_CLEAR=1                rebuild an existing version and replace it atomically
                                   (with --partition: rebuild this partition's staged shards)
  WAREHOUSE_CLEAR=changed          rebuild and replace it only when its sources changed (the
                                   nightly's choice: unchanged samples are copied, not decoded)
  SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN/MAX or _COUNT   --partition auto on Slurm
  JOB_COMPLETION_INDEX, WAREHOUSE_PARTITIONS               --partition auto on Kubernetes
  WAREHOUSE_MAX_{INVALID,MISSING,EMPTY}        override a threshold's max_count ("off" removes it)
  WAREHOUSE_MAX_{INVALID,MISSING,EMPTY}_RATIO  override a threshold's max_ratio ("off" removes it)
  WAREHOUSE_{INVALID,MISSING,EMPTY}_ACTION     fail or warn`

// buildEnv is what build and commit read from the process environment.
type buildEnv struct {
	// Clear is WAREHOUSE_CLEAR.
	Clear bool
	// ClearChanged is WAREHOUSE_CLEAR=changed: rebuild (reusing the
	// unchanged samples) only when the sources changed, else up to date.
	ClearChanged bool
	// Getenv reads the threshold overrides (WAREHOUSE_MAX_*,
	// WAREHOUSE_*_ACTION: thresholdsFromEnv) and, for build --partition
	// auto, the job engine's variables (partitionFromEnv).
	Getenv func(string) string
}

func (e *buildEnv) readEnv(getenv func(string) string) {
	e.Clear = clearRequested(getenv("WAREHOUSE_CLEAR"))
	e.ClearChanged = strings.EqualFold(strings.TrimSpace(getenv("WAREHOUSE_CLEAR")), "changed")
	e.Getenv = getenv
}

// buildOptions are what build runs with: its flags and its environment.
type buildOptions struct {
	Config      string
	Workers     int
	CPUProfile  string
	MetricsFile string
	LockWait    time.Duration
	Partition   string
	MemoryLimit string
	NoReuse     bool
	ReuseFrom   pathList
	Log         logOptions
	buildEnv
}

func (o *buildOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Config, "config", "", "build config file (JSON with comments)")
	fs.IntVar(&o.Workers, "workers", 0, "worker count; 0 uses the config's workers (0 there = one per CPU)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the build to this file (go tool pprof)")
	fs.StringVar(&o.MetricsFile, "metrics-file", "", "write Prometheus text metrics of this run here (atomically, on failure too): for node_exporter's textfile collector")
	fs.DurationVar(&o.LockWait, "lock-wait", 0, "wait up to this long for another build of the same version to finish instead of exiting 5 (e.g. 30m)")
	fs.StringVar(&o.MemoryLimit, "memory-limit", "", "keep the build's memory under this size, e.g. 2GiB, 1500MB (default: 3/4 of the cgroup's memory.max or of physical memory); decodes that do not fit together wait for each other")
	fs.StringVar(&o.Partition, "partition", "", "build only partition i/N of the version's shards (e.g. 2/8), or auto: from Slurm or Kubernetes; publish with commit")
	fs.BoolVar(&o.NoReuse, "no-reuse", false, "decode every sample; by default a sample whose input identity matches a sample of a version published under output_root has its image copied from it (docs/reuse.md)")
	fs.Var(&o.ReuseFrom, "reuse-from", "also reuse samples of the versions under this output root, or of this version directory (repeatable)")
	o.Log.addFlags(fs)
}

// pathList is a repeatable path flag.
type pathList []string

func (p *pathList) String() string { return strings.Join(*p, ",") }
func (p *pathList) Set(v string) error {
	if v == "" {
		return errors.New("an empty path")
	}
	*p = append(*p, v)
	return nil
}

// runBuild builds the version opts.Config describes, or with
// opts.Partition one partition of its shards.
func runBuild(ctx context.Context, opts buildOptions, s streams) (err error) {
	if err := requireFlags(flagValue{"config", opts.Config}); err != nil {
		return err
	}
	if opts.LockWait < 0 {
		return usageError{fmt.Errorf("--lock-wait %v: must be >= 0", opts.LockWait)}
	}
	if err := checkReuseFrom(opts.ReuseFrom); err != nil { // reuse_from.go
		return err
	}
	var res *pipeline.Result
	if opts.MetricsFile != "" {
		// Written whatever happens next, config errors included, so a
		// monitoring system sees every failed night.
		defer metricsOnExit(ctx, s.stderr, "build", opts.MetricsFile, opts.Config, &res, &err)()
	}
	cfg, err := loadConfig(opts.Config, opts.Getenv)
	if err != nil {
		return err
	}
	// output_root s3://...: the build runs on a local mirror (s3.go).
	s3r, err := openS3Root(ctx, cfg.OutputRoot, opts.Getenv, opts.LockWait, false)
	if err != nil {
		return err
	}
	defer s3r.close()
	if s3r != nil {
		s3r.forConfig(cfg)
	}
	var part pipeline.Partition
	if opts.Partition != "" {
		if opts.MetricsFile != "" {
			return usageError{errors.New("--metrics-file: not with --partition (monitor the commit)")}
		}
		if opts.Partition == "auto" {
			part, err = partitionFromEnv(opts.Getenv, cfg.Partitions)
		} else {
			part, err = pipeline.ParsePartition(opts.Partition)
		}
		if err != nil {
			return usageError{err}
		}
	}
	lf := opts.Log
	var bar *progressBar
	counters := &pipeline.Counters{}
	if s.stderrIsTTY && !lf.Quiet && lf.Format == "text" {
		// On a terminal the bar shows progress; logs keep to warnings.
		lf.Quiet = true
		bar = startProgress(s.stderr, counters)
	}
	log, err := lf.logger(s.stderr)
	if err != nil {
		return err
	}
	if bar == nil && !lf.Quiet {
		stop := logProgress(log, counters, progressEvery)
		defer stop()
	}
	if opts.CPUProfile != "" {
		stop, err := startCPUProfile(opts.CPUProfile)
		if err != nil {
			return usageError{err}
		}
		defer stop()
	}
	limit, err := memoryLimit(opts.MemoryLimit, log)
	if err != nil {
		return err
	}
	popts := pipeline.Options{
		Config:      cfg,
		Clear:       opts.Clear,
		Logger:      log,
		Counters:    counters,
		Workers:     opts.Workers,
		LockWait:    opts.LockWait,
		MemoryLimit: limit,
		Reuse:       pipeline.ReuseOptions{Off: opts.NoReuse, From: opts.ReuseFrom},
	}
	if opts.Partition != "" {
		if opts.ClearChanged {
			return usageError{errors.New("WAREHOUSE_CLEAR=changed: not with --partition (use 1 on the partitions and the commit)")}
		}
		pres, err := pipeline.BuildPartition(ctx, popts, part)
		if bar != nil {
			bar.stop()
		}
		if err != nil {
			return interrupted(ctx, diskFull(err, cfg), cfg)
		}
		if pres.UpToDate {
			fmt.Fprintf(s.stderr, "up to date: partition %s has nothing to do\n", part)
			return nil
		}
		fmt.Fprintf(s.stderr, "partition %s: shards %d-%d of %d: built %d, kept %d complete from an earlier run\n",
			part, pres.ShardFirst, pres.ShardEnd-1, pres.ShardsTotal, pres.Built, pres.Kept)
		if s3r != nil {
			if err := s3r.push(ctx, log); err != nil {
				return err
			}
			fmt.Fprintln(s.stdout, s3r.url(pres.Staging))
			return nil
		}
		fmt.Fprintln(s.stdout, pres.Staging)
		return nil
	}
	if opts.ClearChanged {
		// Unchanged: up to date, as without it. Changed: say what
		// changed, then rebuild over it, reusing what did not.
		popts.NoStaleEstimate = true
		res, err = pipeline.Build(ctx, popts)
		if stale := (*pipeline.StaleError)(nil); errors.As(err, &stale) {
			log.Warn("sources changed: rebuilding with reuse (WAREHOUSE_CLEAR=changed)", "dir", stale.Dir, "change", stale.Change)
			popts.Clear = true
			res, err = pipeline.Build(ctx, popts)
		}
	} else {
		res, err = pipeline.Build(ctx, popts)
	}
	if bar != nil {
		bar.stop()
	}
	if rejected := (*pipeline.RejectedError)(nil); errors.As(err, &rejected) {
		printRejected(s.stderr, rejected, "nothing was published")
	}
	if err != nil {
		return interrupted(ctx, diskFull(err, cfg), cfg)
	}
	if s3r != nil {
		if err := s3r.push(ctx, log); err != nil {
			return err
		}
		res.Dir = s3r.url(res.Dir)
		printBuildSummary(s.stderr, res)
		fmt.Fprintln(s.stdout, res.Dir)
		return nil
	}
	printBuildSummary(s.stderr, res)
	fmt.Fprintln(s.stdout, res.Dir)
	return nil
}

// memoryLimit is the build's memory limit: --memory-limit, or by default
// membudget.DefaultFraction of what the cgroup or the machine allows (0,
// no limit, when neither can be read). The Go runtime's soft limit is
// lowered to it too (never raised above GOMEMLIMIT), so that the garbage
// collector returns a finished decode's memory before the next one grows
// the heap past it.
func memoryLimit(flagValue string, log *slog.Logger) (int64, error) {
	var limit int64
	if flagValue != "" {
		n, err := membudget.ParseBytes(flagValue)
		if err != nil {
			return 0, usageError{fmt.Errorf("--memory-limit: %w", err)}
		}
		limit = n
	} else {
		system, from := membudget.SystemMemory()
		limit = membudget.DefaultLimit(system)
		if limit > 0 {
			log.Debug("default memory limit", "bytes", limit, "from", from)
		}
	}
	if limit > 0 && limit < debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(limit)
	}
	return limit, nil
}

// metricsOnExit returns the deferred call that writes --metrics-file for
// the run of command that ends with *res and *err (a write failure becomes
// the error of a run that had none).
func metricsOnExit(ctx context.Context, stderr io.Writer, command, path, configPath string, res **pipeline.Result, err *error) func() {
	start := time.Now()
	return func() {
		m := buildMetrics{config: configPath, start: start, end: time.Now(), exitCode: exitCode(ctx, *err), res: *res}
		errors.As(*err, &m.rejected)
		if werr := writeBuildMetrics(path, m); werr != nil {
			fmt.Fprintf(stderr, "warehouse-etl %s: --metrics-file: %v\n", command, werr)
			if *err == nil {
				*err = werr
			}
		}
	}
}

// diskFull adds what to do to an out-of-space error, saying exactly what
// gc does with what the build left: the staging directories keep their
// complete shards for the rerun, and gc removes one only once untouched
// for --keep-days (outputroot.GC).
func diskFull(err error, cfg *config.Config) error {
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	root := cfg.Resolve(cfg.OutputRoot)
	staged, _ := filepath.Glob(filepath.Join(root, ".v*"+outputroot.StagingSuffix))
	kept := []string{"complete staged shards are kept for the rerun"}
	if len(staged) > 0 {
		kept = kept[:0]
	}
	for _, st := range staged {
		version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(st), "."), outputroot.StagingSuffix)
		if _, err := os.Stat(filepath.Join(root, version, warehouse.ManifestName)); err == nil {
			kept = append(kept, fmt.Sprintf("the staging directory %s: gc removes it (its version is published; a WAREHOUSE_CLEAR=1 rerun starts it afresh)", st))
		} else {
			kept = append(kept, fmt.Sprintf("the staging directory %s (its complete shards make the rerun cheaper): gc removes it only once untouched for --keep-days", st))
		}
	}
	return fmt.Errorf("%w\nthe filesystem of output_root %s is full: nothing was published and the build's temporary directory was removed; %s. Free space (warehouse-etl gc --output-root %s --keep N removes old versions) or point output_root elsewhere", err, root, strings.Join(kept, "; "), root)
}

// interrupted adds to the error of a build stopped by SIGINT/SIGTERM that
// nothing was published, where the shards it finished are kept and that
// the same command resumes from them.
func interrupted(ctx context.Context, err error, cfg *config.Config) error {
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	outRoot := cfg.Resolve(cfg.OutputRoot)
	dir, verr := pipeline.VersionDir(cfg)
	if verr != nil {
		return fmt.Errorf("interrupted (%w): nothing was published; the shards it finished are kept in the version's .v<hex>%s directory under %s, and rerunning the same command resumes from them", err, outputroot.StagingSuffix, outRoot)
	}
	staging := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+outputroot.StagingSuffix)
	receipts, _ := filepath.Glob(filepath.Join(staging, "shards", "shard-*.json"))
	return fmt.Errorf("interrupted (%w): nothing was published; %d complete shard(s) are kept in %s and rerunning the same command resumes from them (warehouse-etl gc --keep-days D removes them once older than D days)", err, len(receipts), staging)
}

// startCPUProfile profiles the process into path until the returned stop
// is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// clearRequested reads WAREHOUSE_CLEAR: 1, true, yes (any case) ask for a rebuild.
func clearRequested(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

func printBuildSummary(w io.Writer, res *pipeline.Result) {
	m := res.Manifest
	t := m.Summary.Total
	fmt.Fprintf(w, "%s: %s\n", res.Status, res.Dir)
	fmt.Fprintf(w, "  version   %s\n", m.Version)
	fmt.Fprintf(w, "  samples   %d kept of %d (empty %d, invalid %d, missing %d)\n", t.Kept, t.Total, t.Empty, t.Invalid, t.MissingImage+t.MissingFile)
	fmt.Fprintf(w, "  shards    %d x up to %d samples, %s %dx%d\n", len(m.Shards), m.SamplesPerShard, m.DefaultDType, m.Transform.TargetWidth, m.Transform.TargetHeight)
	if r := res.Report; r != nil {
		p := r.Phases
		fmt.Fprintf(w, "  time      %.2fs total (scan %.2fs, validate %.2fs, transform+write %.2fs, publish %.2fs), %.1f samples/s, %.1f MB/s\n",
			p.Total, p.Scan, p.Validate, p.Write, p.Publish, r.SamplesPerSecond, r.MBPerSecond)
		fmt.Fprintf(w, "  workers   %d: read %.2fs, decode %.2fs, resize %.2fs, normalize %.2fs (summed over workers)\n",
			r.Workers, p.Read, p.Decode, p.Resize, p.Normalize)
		if u := r.Reuse; u.Enabled {
			fmt.Fprintf(w, "  reuse     %d copied from published versions (%.1f MB, %d whole shards), %d decoded, %d fell back to decoding\n",
				u.Reused, float64(u.BytesCopied)/1e6, u.ShardsLinked, u.Decoded, u.FellBack)
		}
	}
	if len(t.ByReason) > 0 {
		fmt.Fprintf(w, "  reasons  ")
		for _, reason := range sortedReasons(t.ByReason) {
			fmt.Fprintf(w, " %s=%d", reason, t.ByReason[reason])
		}
		fmt.Fprintln(w)
	}
	for _, f := range res.Warnings {
		fmt.Fprintf(w, "  warning   %s\n", f.String())
	}
}

// logProgress logs counters periodically when stderr is not a terminal.
func logProgress(log *slog.Logger, c *pipeline.Counters, every time.Duration) (stop func()) {
	return tick(every, func(last bool) {
		if !last {
			log.Info("progress", "scanned", c.Scanned.Load(), "planned", c.Planned.Load(), "written", c.Written.Load(), "bytes", c.BytesWritten.Load(),
				"reused", c.Reused.Load(), "decoded", c.Decoded.Load(), "fell_back", c.ReuseFallbacks.Load())
		}
	})
}
