package main

import (
	"context"
	"fmt"

	"warehouse-etl/viewer"
)

const reportSynopsis = `--tensor-warehouse PATH --out DIR [--against OTHER] [--per-reason N] [--kept N] [--dataset-root DIR]

Writes serve's pages as static HTML with their PNGs into DIR, for a CI
artifact or a nightly email: the overview, up to --per-reason samples of
each reason code (and the rejected ones together), --kept kept samples
spread evenly over the version, a page for each of those samples and, with
--against, the drift page. Open DIR/index.html. DIR may not be inside the
version directory; nothing in the warehouse is written.`

// reportOptions are report's flags.
type reportOptions struct {
	path        string
	out         string
	against     string
	datasetRoot string
	perReason   int
	kept        int
	log         logFlags
}

func reportCommand(ctx context.Context, env *environment, args []string) error {
	var opts reportOptions
	fs := newFlagSet(env, "report", reportSynopsis)
	fs.StringVar(&opts.path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&opts.out, "out", "", "directory to write the report into (created)")
	fs.StringVar(&opts.against, "against", "", "a second version to compare with (the drift page), same forms")
	fs.StringVar(&opts.datasetRoot, "dataset-root", "", "where rejected samples' source images are (default: the manifest's dataset_root when absolute)")
	fs.IntVar(&opts.perReason, "per-reason", 20, "samples shown per reason code")
	fs.IntVar(&opts.kept, "kept", 48, "kept samples shown")
	opts.log.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if opts.path == "" || opts.out == "" {
		fs.Usage()
		return usageError{fmt.Errorf("--tensor-warehouse and --out are required")}
	}
	if opts.perReason < 1 || opts.kept < 1 {
		return usageError{fmt.Errorf("--per-reason and --kept must be at least 1")}
	}
	return runReport(ctx, env, opts)
}

// runReport writes the static report and prints its index page's path.
func runReport(ctx context.Context, env *environment, opts reportOptions) error {
	v, log, err := openViewer(env, opts.log, opts.path, viewer.Options{DatasetRoot: opts.datasetRoot, Against: opts.against})
	if err != nil {
		return err
	}
	defer v.Close()
	res, err := v.WriteReport(ctx, opts.out, viewer.ReportOptions{PerReason: opts.perReason, Kept: opts.kept})
	if err != nil {
		return err
	}
	log.Info("report written", "dir", res.Dir, "pages", res.Pages, "images", res.Images, "sample_pages", res.Samples)
	fmt.Fprintf(env.stdout, "%s/index.html\n", res.Dir)
	return nil
}
