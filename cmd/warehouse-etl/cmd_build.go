package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"warehouse-etl/config"
	"warehouse-etl/pipeline"
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
  SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN/MAX or _COUNT   --partition auto on Slurm
  JOB_COMPLETION_INDEX, WAREHOUSE_PARTITIONS               --partition auto on Kubernetes
  WAREHOUSE_MAX_{INVALID,MISSING,EMPTY}        override a threshold's max_count ("off" removes it)
  WAREHOUSE_MAX_{INVALID,MISSING,EMPTY}_RATIO  override a threshold's max_ratio ("off" removes it)
  WAREHOUSE_{INVALID,MISSING,EMPTY}_ACTION     fail or warn`

func runBuild(ctx context.Context, env *environment, args []string) (err error) {
	fs := newFlagSet(env, "build", buildSynopsis)
	configPath := fs.String("config", "", "build config file (JSON with comments)")
	workers := fs.Int("workers", 0, "worker count; 0 uses the config's workers (0 there = one per CPU)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the build to this file (go tool pprof)")
	metricsFile := fs.String("metrics-file", "", "write Prometheus text metrics of this run here (atomically, on failure too): for node_exporter's textfile collector")
	lockWait := fs.Duration("lock-wait", 0, "wait up to this long for another build of the same version to finish instead of exiting 5 (e.g. 30m)")
	partition := fs.String("partition", "", "build only partition i/N of the version's shards (e.g. 2/8), or auto: from Slurm or Kubernetes; publish with commit")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *configPath == "" {
		fs.Usage()
		return usageError{fmt.Errorf("--config is required")}
	}
	if *lockWait < 0 {
		return usageError{fmt.Errorf("--lock-wait %v: must be >= 0", *lockWait)}
	}
	var res *pipeline.Result
	if *metricsFile != "" {
		// Written whatever happens next, config errors included, so a
		// monitoring system sees every failed night.
		defer metricsOnExit(ctx, env, "build", *metricsFile, *configPath, &res, &err)()
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return usageError{err}
	}
	var part pipeline.Partition
	if *partition != "" {
		if *metricsFile != "" {
			return usageError{errors.New("--metrics-file: not with --partition (monitor the commit)")}
		}
		if *partition == "auto" {
			part, err = pipeline.AutoPartition(env.getenv, cfg.Partitions)
		} else {
			part, err = pipeline.ParsePartition(*partition)
		}
		if err != nil {
			return usageError{err}
		}
	}
	logw := env.stderr
	var bar *progressBar
	counters := &pipeline.Counters{}
	if env.stderrIsTTY && !lf.quiet && lf.format == "text" {
		// On a terminal the bar shows progress; logs keep to warnings.
		lf.quiet = true
		bar = startProgress(env.stderr, counters)
	}
	log, err := lf.logger(logw)
	if err != nil {
		return err
	}
	if bar == nil && !lf.quiet {
		stop := logProgress(log, counters, 10*time.Second)
		defer stop()
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return usageError{err}
		}
		defer stop()
	}
	opts := pipeline.Options{
		Config:   cfg,
		Clear:    clearRequested(env.getenv("WAREHOUSE_CLEAR")),
		Getenv:   env.getenv,
		Logger:   log,
		Counters: counters,
		Workers:  *workers,
		LockWait: *lockWait,
	}
	if *partition != "" {
		pres, err := pipeline.BuildPartition(ctx, opts, part)
		if bar != nil {
			bar.stop()
		}
		if err != nil {
			return diskFull(err, cfg)
		}
		if pres.UpToDate {
			fmt.Fprintf(env.stderr, "up to date: partition %s has nothing to do\n", part)
			return nil
		}
		fmt.Fprintf(env.stderr, "partition %s: shards %d-%d of %d: built %d, kept %d complete from an earlier run\n",
			part, pres.ShardFirst, pres.ShardEnd-1, pres.ShardsTotal, pres.Built, pres.Kept)
		fmt.Fprintln(env.stdout, pres.Staging)
		return nil
	}
	res, err = pipeline.Build(ctx, opts)
	if bar != nil {
		bar.stop()
	}
	if err != nil {
		return diskFull(err, cfg)
	}
	printBuildSummary(env.stderr, res)
	fmt.Fprintln(env.stdout, res.Dir)
	return nil
}

// metricsOnExit returns the deferred call that writes --metrics-file for
// the run of command that ends with *res and *err (a write failure becomes
// the error of a run that had none).
func metricsOnExit(ctx context.Context, env *environment, command, path, configPath string, res **pipeline.Result, err *error) func() {
	start := time.Now()
	return func() {
		m := buildMetrics{config: configPath, start: start, end: time.Now(), exitCode: exitCode(ctx, *err), res: *res}
		if werr := writeBuildMetrics(path, m); werr != nil {
			fmt.Fprintf(env.stderr, "warehouse-etl %s: --metrics-file: %v\n", command, werr)
			if *err == nil {
				*err = werr
			}
		}
	}
}

// diskFull adds what to do to an out-of-space error.
func diskFull(err error, cfg *config.Config) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w\nthe filesystem of output_root %s is full: nothing was published and the build's temporary directory was removed (complete staged shards are kept for the rerun); free space (warehouse-etl gc) or point output_root elsewhere", err, cfg.Resolve(cfg.OutputRoot))
	}
	return err
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
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				log.Info("progress", "scanned", c.Scanned.Load(), "planned", c.Planned.Load(), "written", c.Written.Load(), "bytes", c.BytesWritten.Load())
			}
		}
	}()
	return func() { close(done) }
}
