package main

import (
	"context"
	"fmt"

	"warehouse-etl/config"
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

func runCommit(ctx context.Context, env *environment, args []string) (err error) {
	fs := newFlagSet(env, "commit", commitSynopsis)
	configPath := fs.String("config", "", "build config file (JSON with comments): the one the partitions used")
	workers := fs.Int("workers", 0, "scan and re-hash workers; 0 uses the config's workers (0 there = one per CPU)")
	wait := fs.Duration("wait", 0, "wait up to this long for every partition to finish (a Kubernetes commit Job started beside the Indexed Job), e.g. 6h")
	metricsFile := fs.String("metrics-file", "", "write Prometheus text metrics of this run here (atomically, on failure too)")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *configPath == "" {
		fs.Usage()
		return usageError{fmt.Errorf("--config is required")}
	}
	if *wait < 0 {
		return usageError{fmt.Errorf("--wait %v: must be >= 0", *wait)}
	}
	var res *pipeline.Result
	if *metricsFile != "" {
		defer metricsOnExit(ctx, env, "commit", *metricsFile, *configPath, &res, &err)()
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return usageError{err}
	}
	log, err := lf.logger(env.stderr)
	if err != nil {
		return err
	}
	res, err = pipeline.Commit(ctx, pipeline.CommitOptions{
		Options: pipeline.Options{
			Config:  cfg,
			Clear:   clearRequested(env.getenv("WAREHOUSE_CLEAR")),
			Getenv:  env.getenv,
			Logger:  log,
			Workers: *workers,
		},
		Wait: *wait,
	})
	if err != nil {
		return diskFull(err, cfg)
	}
	printBuildSummary(env.stderr, res)
	fmt.Fprintln(env.stdout, res.Dir)
	return nil
}
