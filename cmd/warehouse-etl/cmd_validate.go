package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"warehouse-etl/analytics/records"
	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
)

const validateSynopsis = `--config FILE [--decode] [--report DIR] [flags]

Runs what build runs before it writes a shard: the scan, every label and
image-header check, the plan and the thresholds (with --decode also every
image decode, as the transform stage would). It writes nothing under
output_root and prints the report a failed build prints: the samples by
reason code, the first offending samples with their files and causes.
With --report DIR it also writes the plan's samples.jsonl and
samples.parquet (every input sample, its reasons and their causes) into DIR.

Exit codes are build's: 0 the thresholds pass, 2 a usage or configuration
error, 3 a threshold with action fail is exceeded.

environment: the WAREHOUSE_MAX_* and WAREHOUSE_*_ACTION overrides of build.`

// validateOptions are validate's flags and environment.
type validateOptions struct {
	Config    string
	Decode    bool
	ReportDir string
	Workers   int
	Log       logOptions
	buildEnv
}

func (o *validateOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Config, "config", "", "build config file (JSON with comments)")
	fs.BoolVar(&o.Decode, "decode", false, "also decode every kept image, as the build's transform stage does")
	fs.StringVar(&o.ReportDir, "report", "", "write the plan's samples.jsonl and samples.parquet into this directory (created if needed)")
	fs.IntVar(&o.Workers, "workers", 0, "decode workers with --decode; 0 uses the config's workers (0 there = one per CPU)")
	o.Log.addFlags(fs)
}

// runValidate checks the config's inputs against its thresholds without
// building.
func runValidate(ctx context.Context, opts validateOptions, s streams) error {
	if err := requireFlags(flagValue{"config", opts.Config}); err != nil {
		return err
	}
	cfg, err := loadConfig(opts.Config, opts.Getenv)
	if err != nil {
		return err
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	if opts.ReportDir != "" {
		if err := os.MkdirAll(opts.ReportDir, 0o777); err != nil {
			return usageError{fmt.Errorf("--report: %w", err)}
		}
	}
	res, err := pipeline.Validate(ctx, pipeline.ValidateOptions{
		Options:   pipeline.Options{Config: cfg, Logger: log, Workers: opts.Workers},
		Decode:    opts.Decode,
		ReportDir: opts.ReportDir,
	})
	if rejected := (*pipeline.RejectedError)(nil); errors.As(err, &rejected) {
		printRejected(s.stdout, rejected, "nothing was built (validate builds nothing)")
		return err
	}
	if err != nil {
		return err
	}
	w := s.stdout
	fmt.Fprintf(w, "thresholds pass: version %s\n", res.Version)
	printCounts(w, res.Summary.Total)
	if opts.Decode {
		fmt.Fprintf(w, "  decoded   %d images\n", res.Decoded)
	}
	for _, f := range res.Warnings {
		fmt.Fprintf(w, "  warning   %s\n", f.String())
	}
	printExamples(w, res.Examples, res.Offending, "skipped")
	if opts.ReportDir != "" {
		printReportDir(w, opts.ReportDir)
	}
	return nil
}

// printRejected is what a build or validate that failed a threshold
// prints before the error line: the counts by reason, the first offending
// samples with their files and causes, where the full report is, and what
// happened to the output (outcome).
func printRejected(w io.Writer, e *pipeline.RejectedError, outcome string) {
	for _, f := range e.Threshold.Findings {
		fmt.Fprintf(w, "failed    %s\n", f.String())
	}
	printCounts(w, e.Summary.Total)
	printExamples(w, e.Examples, e.Offending, "offending")
	if e.ReportDir != "" {
		printReportDir(w, e.ReportDir)
	}
	if e.Published {
		outcome = "the version was published earlier and stays; today's thresholds refuse its recorded summary"
	}
	fmt.Fprintf(w, "  %s; fix the inputs, or raise the threshold in the config (or WAREHOUSE_MAX_*) if these samples may be skipped\n", outcome)
}

// printCounts prints the sample counts and one line per reason code, in
// the stable reason order, with its class.
func printCounts(w io.Writer, t validate.Counts) {
	fmt.Fprintf(w, "  samples   %d input: %d kept, %d skipped (invalid %d, missing %d), empty %d\n",
		t.Total, t.Kept, t.Skipped, t.Invalid, t.Missing(), t.Empty)
	if len(t.ByReason) == 0 {
		return
	}
	fmt.Fprintf(w, "  by reason\n")
	for _, r := range validate.Normalize(sortedReasons(t.ByReason)) {
		fmt.Fprintf(w, "    %-26s %8d  %s\n", r, t.ByReason[r], r.Class())
	}
}

// printExamples prints the first samples of a kind (what) with their
// files and causes.
func printExamples(w io.Writer, examples []records.SampleLine, total int64, what string) {
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "  first %s samples (%d of %d):\n", what, len(examples), total)
	for _, s := range examples {
		fmt.Fprintf(w, "    %s frame %d", s.Source, s.Frame)
		if s.LabelPath != "" {
			fmt.Fprintf(w, "  label %s", s.LabelPath)
		}
		if s.ImagePath != "" {
			fmt.Fprintf(w, "  image %s", s.ImagePath)
		}
		fmt.Fprintf(w, "\n      %s\n", s.Detail)
	}
}

// printReportDir names the report: dir's samples.jsonl and samples.parquet.
func printReportDir(w io.Writer, dir string) {
	fmt.Fprintf(w, "  report    %s/samples.jsonl and samples.parquet: every input sample with its reasons and their causes\n", dir)
}
