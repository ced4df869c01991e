package main

import (
	"context"
	"flag"
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
	Path        string
	Out         string
	Against     string
	DatasetRoot string
	PerReason   int
	Kept        int
	Log         logOptions
}

func (o *reportOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&o.Out, "out", "", "directory to write the report into (created)")
	fs.StringVar(&o.Against, "against", "", "a second version to compare with (the drift page), same forms")
	fs.StringVar(&o.DatasetRoot, "dataset-root", "", "where rejected samples' source images are (default: the manifest's dataset_root when absolute)")
	fs.IntVar(&o.PerReason, "per-reason", 20, "samples shown per reason code")
	fs.IntVar(&o.Kept, "kept", 48, "kept samples shown")
	o.Log.addFlags(fs)
}

// runReport writes the static report and prints its index page's path.
func runReport(ctx context.Context, opts reportOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}, flagValue{"out", opts.Out}); err != nil {
		return err
	}
	if opts.PerReason < 1 || opts.Kept < 1 {
		return usageError{fmt.Errorf("--per-reason and --kept must be at least 1")}
	}
	v, log, err := openViewer(s.stderr, opts.Log, opts.Path, viewer.Options{DatasetRoot: opts.DatasetRoot, Against: opts.Against})
	if err != nil {
		return err
	}
	defer v.Close()
	res, err := v.WriteReport(ctx, opts.Out, viewer.ReportOptions{PerReason: opts.PerReason, Kept: opts.Kept})
	if err != nil {
		return err
	}
	log.Info("report written", "dir", res.Dir, "pages", res.Pages, "images", res.Images, "sample_pages", res.Samples)
	fmt.Fprintf(s.stdout, "%s/index.html\n", res.Dir)
	return nil
}
