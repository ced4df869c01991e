package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"warehouse-etl/internal/progress"
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

// exportZarrOptions are export zarr's flags.
type exportZarrOptions struct {
	Path         string
	Out          string
	ZstdLevel    int
	ShardSamples int
	Verify       string
	Workers      int
	Log          logOptions
}

func (o *exportZarrOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&o.Out, "out", "", "the Zarr store directory to write")
	fs.IntVar(&o.ZstdLevel, "zstd-level", 0, fmt.Sprintf("0 stores inner chunks uncompressed; 1..%d compresses each with zstd", zarr.MaxZstdLevel))
	fs.IntVar(&o.ShardSamples, "shard-samples", 0, "samples per Zarr shard; 0 = the warehouse's samples per shard")
	fs.StringVar(&o.Verify, "verify", "full", "before exporting: full (re-hash every shard, read every value) or quick (manifest, sizes, headers)")
	fs.IntVar(&o.Workers, "workers", 0, "shard files written at once; 0 = one per CPU")
	o.Log.addFlags(fs)
}

// runExportZarr writes the version at opts.Path as the Zarr store
// opts.Out and prints the store.
func runExportZarr(ctx context.Context, opts exportZarrOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}, flagValue{"out", opts.Out}); err != nil {
		return err
	}
	switch {
	case opts.ZstdLevel < 0 || opts.ZstdLevel > zarr.MaxZstdLevel:
		return usageError{fmt.Errorf("--zstd-level %d: want 0..%d", opts.ZstdLevel, zarr.MaxZstdLevel)}
	case opts.ShardSamples < 0 || opts.ShardSamples > zarr.MaxChunksPerShard:
		return usageError{fmt.Errorf("--shard-samples %d: want 0..%d", opts.ShardSamples, zarr.MaxChunksPerShard)}
	case opts.Verify != "full" && opts.Verify != "quick":
		return usageError{fmt.Errorf("--verify %q: want full or quick", opts.Verify)}
	case opts.Workers < 0:
		return usageError{fmt.Errorf("--workers %d: want >= 0", opts.Workers)}
	}
	// The export reads the whole version twice (the verification, then
	// the copy): it shows its progress.
	counter := &progress.Bytes{}
	log, stop, err := showBytes(s, opts.Log, "export zarr", counter)
	if err != nil {
		return err
	}
	res, err := zarr.Export(ctx, opts.Path, opts.Out, zarr.ExportOptions{
		Options:    zarr.Options{ZstdLevel: opts.ZstdLevel, ShardSamples: opts.ShardSamples, Workers: opts.Workers, Logger: log, Progress: counter},
		VerifyFull: opts.Verify == "full",
	})
	stop()
	var findings *verify.FindingsError
	if errors.As(err, &findings) {
		for _, f := range findings.Findings {
			fmt.Fprintf(s.stderr, "  %s\n", f)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, res.Store)
	return nil
}
