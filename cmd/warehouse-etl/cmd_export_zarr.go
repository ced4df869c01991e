package main

import (
	"context"
	"errors"
	"fmt"

	"warehouse-etl/verify"
	"warehouse-etl/zarr"
)

const exportZarrSynopsis = `--tensor-warehouse PATH --out STORE [flags]

Writes a warehouse version as a Zarr v3 store (docs/format/zarr.md) that
zarr-python, TensorStore, zarrita.js and zarrs open: a root group carrying
the manifest, and arrays images, boxes, box_mask, class_index, box_count,
the per-sample metadata and the extras, each sharded with sharding_indexed
(one inner chunk per sample). PATH is a version directory or an output root
with a "latest" pointer. The version is verified first and refused with its
findings. STORE is written beside itself and renamed into place; an existing
STORE must be a Zarr store and is replaced only when the new one is complete.
Prints STORE.`

func runExportZarr(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "export zarr", exportZarrSynopsis)
	path := fs.String("tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	out := fs.String("out", "", "the Zarr store directory to write")
	zstdLevel := fs.Int("zstd-level", 0, fmt.Sprintf("0 stores inner chunks uncompressed; 1..%d compresses each with zstd", zarr.MaxZstdLevel))
	shardSamples := fs.Int("shard-samples", 0, "samples per Zarr shard; 0 = the warehouse's samples per shard")
	verifyMode := fs.String("verify", "full", "before exporting: full (re-hash every shard, read every value) or quick (manifest, sizes, headers)")
	workers := fs.Int("workers", 0, "shard files written at once; 0 = one per CPU")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *path == "" || *out == "":
		fs.Usage()
		return usageError{fmt.Errorf("--tensor-warehouse and --out are required")}
	case *zstdLevel < 0 || *zstdLevel > zarr.MaxZstdLevel:
		return usageError{fmt.Errorf("--zstd-level %d: want 0..%d", *zstdLevel, zarr.MaxZstdLevel)}
	case *shardSamples < 0 || *shardSamples > zarr.MaxChunksPerShard:
		return usageError{fmt.Errorf("--shard-samples %d: want 0..%d", *shardSamples, zarr.MaxChunksPerShard)}
	case *verifyMode != "full" && *verifyMode != "quick":
		return usageError{fmt.Errorf("--verify %q: want full or quick", *verifyMode)}
	case *workers < 0:
		return usageError{fmt.Errorf("--workers %d: want >= 0", *workers)}
	}
	log, err := lf.logger(env.stderr)
	if err != nil {
		return err
	}
	res, err := zarr.Export(ctx, *path, *out, zarr.ExportOptions{
		Options:    zarr.Options{ZstdLevel: *zstdLevel, ShardSamples: *shardSamples, Workers: *workers, Logger: log},
		VerifyFull: *verifyMode == "full",
	})
	var findings *verify.FindingsError
	if errors.As(err, &findings) {
		for _, f := range findings.Findings {
			fmt.Fprintf(env.stderr, "  %s\n", f)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, res.Store)
	return nil
}
