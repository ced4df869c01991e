package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"warehouse-etl/analytics"
	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// exportFormats are the formats `export` writes, one subcommand each.
var exportFormats = []struct {
	name, summary string
	run           func(ctx context.Context, env *environment, args []string) error
}{
	{"parquet", "samples.parquet, runs.parquet, build.parquet for DuckDB/Polars (docs/format/parquet.md)", flagStep("export parquet", exportParquetSynopsis, runExportParquet)},
	{"zarr", "a Zarr v3 store, sharding_indexed, for zarr-python/TensorStore/zarrita (docs/format/zarr.md)", flagStep("export zarr", exportZarrSynopsis, runExportZarr)},
}

func exportUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: warehouse-etl export <format> --tensor-warehouse PATH [flags]\n\nformats:\n")
	for _, f := range exportFormats {
		fmt.Fprintf(w, "  %-9s %s\n", f.name, f.summary)
	}
	fmt.Fprintf(w, "\nRun 'warehouse-etl export <format> -h' for a format's flags.\n")
}

// exportCommand dispatches `export <format>` to the format's flag step.
func exportCommand(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		exportUsage(env.stderr)
		return usageError{fmt.Errorf("export needs a format")}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		exportUsage(env.stderr)
		return flag.ErrHelp
	}
	for _, f := range exportFormats {
		if f.name == args[0] {
			return f.run(ctx, env, args[1:])
		}
	}
	names := make([]string, len(exportFormats))
	for i, f := range exportFormats {
		names[i] = f.name
	}
	return usageError{fmt.Errorf("unknown export format %q (known: %s)", args[0], strings.Join(names, ", "))}
}

const exportParquetSynopsis = `--tensor-warehouse PATH [flags]

Rewrites the Parquet exports of an existing warehouse version from its
manifest, samples.jsonl, build report and shards, and prints the files
written. PATH is a version directory or an output root with a "latest"
pointer. Builds write the same files; this refreshes a version built before
they existed or after the export changed. Each file is replaced atomically,
and only when all three were written. Holds the version's build lock.`

// exportParquetOptions are export parquet's flags.
type exportParquetOptions struct {
	Path string
	Log  logOptions
}

func (o *exportParquetOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	o.Log.addFlags(fs)
}

// runExportParquet rewrites the Parquet exports of the version at
// opts.Path and prints the files written.
func runExportParquet(ctx context.Context, opts exportParquetOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}); err != nil {
		return err
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	dir, err := warehouse.ResolveDir(opts.Path)
	if err != nil {
		return err
	}
	// The build lock keeps a WAREHOUSE_CLEAR rebuild from swapping the
	// directory while we write into it.
	lock, err := outputroot.LockVersion(filepath.Dir(dir), filepath.Base(dir))
	if err != nil {
		return err
	}
	defer lock.Release()
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		return err
	}
	res, err := analytics.Export(ctx, dir, m, analytics.ExportOptions{Logger: log})
	if err != nil {
		return err
	}
	for _, name := range []string{res.Files.Samples, res.Files.Runs, res.Files.Build} {
		fmt.Fprintln(s.stdout, filepath.Join(dir, name))
	}
	return nil
}
