package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"warehouse-etl/pipeline"
)

const commitSynopsis = `--config FILE [flags]

Publishes the version FILE describes from the shards that
"warehouse-etl build --partition i/N" built in its staging directory:
scans the sources as each partition did, checks that every shard is
complete, was built from the same plan and is intact (each shard file is
re-hashed against its record), then writes samples.jsonl, the summary, the
manifest and the exports and publishes the version atomically, byte for
byte what a single-machine build writes. It prints the version directory.

A shard that is missing or does not check out exits 8, naming the shards
and the partitions that should have built them; nothing is published.
Committing a published version with unchanged sources prints "up to date".

environment:
  WAREHOUSE_CLEAR=1   replace an existing version with the staged shards
  WAREHOUSE_MAX_*, WAREHOUSE_*_ACTION   threshold overrides, as for build`

// commitOptions are what commit runs with: its flags and its environment.
type commitOptions struct {
	Config      string
	Workers     int
	Wait        time.Duration
	MetricsFile string
	Log         logOptions
	buildEnv
}

func (o *commitOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Config, "config", "", "build config file (JSON with comments): the one the partitions used")
	fs.IntVar(&o.Workers, "workers", 0, "scan and re-hash workers; 0 uses the config's workers (0 there = one per CPU)")
	fs.DurationVar(&o.Wait, "wait", 0, "wait up to this long for every partition to finish (a Kubernetes commit Job started beside the Indexed Job), e.g. 6h")
	fs.StringVar(&o.MetricsFile, "metrics-file", "", "write Prometheus text metrics of this run here (atomically, on failure too)")
	o.Log.addFlags(fs)
}

// runCommit publishes the version opts.Config describes from its
// partitions' staged shards.
func runCommit(ctx context.Context, opts commitOptions, s streams) (err error) {
	if err := requireFlags(flagValue{"config", opts.Config}); err != nil {
		return err
	}
	if opts.Wait < 0 {
		return usageError{fmt.Errorf("--wait %v: must be >= 0", opts.Wait)}
	}
	var res *pipeline.Result
	if opts.MetricsFile != "" {
		defer metricsOnExit(ctx, s.stderr, "commit", opts.MetricsFile, opts.Config, &res, &err)()
	}
	cfg, err := loadConfig(opts.Config, opts.Getenv)
	if err != nil {
		return err
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	// output_root s3://...: the partitions' uploads are pulled into a
	// local mirror and committed there (s3.go).
	s3r, err := openS3Root(ctx, cfg.OutputRoot, opts.Getenv, 0, true)
	if err != nil {
		return err
	}
	defer s3r.close()
	if s3r != nil {
		s3r.forConfig(cfg)
		res, err = commitS3(ctx, s3r, pipeline.CommitOptions{
			Options: pipeline.Options{Config: cfg, Clear: opts.Clear, Logger: log, Workers: opts.Workers},
		}, opts.Wait, log)
		if rejected := (*pipeline.RejectedError)(nil); errors.As(err, &rejected) {
			printRejected(s.stderr, rejected, "nothing was published")
		}
		if err != nil {
			return err
		}
		res.Dir = s3r.url(res.Dir)
		printBuildSummary(s.stderr, res)
		fmt.Fprintln(s.stdout, res.Dir)
		return nil
	}
	res, err = pipeline.Commit(ctx, pipeline.CommitOptions{
		Options: pipeline.Options{
			Config:  cfg,
			Clear:   opts.Clear,
			Logger:  log,
			Workers: opts.Workers,
		},
		Wait: opts.Wait,
	})
	if rejected := (*pipeline.RejectedError)(nil); errors.As(err, &rejected) {
		printRejected(s.stderr, rejected, "nothing was published")
	}
	if err != nil {
		return diskFull(err, cfg)
	}
	printBuildSummary(s.stderr, res)
	fmt.Fprintln(s.stdout, res.Dir)
	return nil
}
