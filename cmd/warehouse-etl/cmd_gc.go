package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"warehouse-etl/objstore"
	"warehouse-etl/outputroot"
)

const gcSynopsis = `--output-root DIR --keep N [--keep-days D] [--dry-run] [--json]

Removes old versions under an output root: it keeps the newest N (by the
manifest's created_at_ms), every version younger than D days, the target of
"latest", a version being built and a version a reader has open (readers
hold a shared lock on it; gc skips what it cannot lock). It also removes the
temporary directories of builds that did not finish, never those of a
running build. Prints what it removed, how much it freed and what it kept
and why; --dry-run only says.`

// gcOptions are gc's flags.
type gcOptions struct {
	OutputRoot string
	Keep       int
	KeepDays   float64
	DryRun     bool
	JSON       bool
	Log        logOptions
	// keepGiven is whether --keep was on the command line: without it gc
	// says that --keep is required rather than that 0 is too few.
	keepGiven bool
	// Getenv reads the object store settings (s3.go) for an s3:// root.
	Getenv func(string) string
}

func (o *gcOptions) readEnv(getenv func(string) string) { o.Getenv = getenv }

func (o *gcOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.OutputRoot, "output-root", "", "the output root whose versions to collect")
	fs.Func("keep", "how many of the newest versions to keep (>= 1; required)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("not a whole number")
		}
		o.Keep, o.keepGiven = n, true
		return nil
	})
	fs.Float64Var(&o.KeepDays, "keep-days", 0, "also keep every version younger than this many days")
	fs.BoolVar(&o.DryRun, "dry-run", false, "say what would be removed, remove nothing")
	fs.BoolVar(&o.JSON, "json", false, "print the report as one JSON object on stdout")
	o.Log.addFlags(fs)
}

// runGC collects old versions and stale temporaries under opts.OutputRoot
// and prints what it removed and kept.
func runGC(ctx context.Context, opts gcOptions, s streams) error {
	keep := ""
	if opts.Keep != 0 || opts.keepGiven {
		keep = strconv.Itoa(opts.Keep)
	}
	if err := requireFlags(flagValue{"output-root", opts.OutputRoot}); err != nil {
		return err
	}
	if err := requireFlags(flagValue{"keep", keep}); err != nil {
		return err
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	switch {
	case opts.Keep < 1:
		return usageError{fmt.Errorf("--keep %d: keep at least 1 version", opts.Keep)}
	case opts.KeepDays < 0:
		return usageError{fmt.Errorf("--keep-days %v: must be >= 0", opts.KeepDays)}
	}
	gopts := outputroot.GCOptions{Keep: opts.Keep, KeepFor: time.Duration(opts.KeepDays * float64(24*time.Hour)), DryRun: opts.DryRun}
	var rep *outputroot.GCReport
	if objstore.IsLocation(opts.OutputRoot) {
		rep, err = gcS3(ctx, opts.OutputRoot, opts.Getenv, gopts)
	} else {
		rep, err = outputroot.GC(opts.OutputRoot, gopts)
	}
	if rep != nil {
		if opts.JSON {
			enc := json.NewEncoder(s.stdout)
			enc.SetIndent("", "  ")
			out := struct {
				Root   string `json:"root"`
				DryRun bool   `json:"dry_run"`
				Freed  int64  `json:"freed_bytes"`
				*outputroot.GCReport
			}{opts.OutputRoot, opts.DryRun, freedBytes(rep), rep}
			if jerr := enc.Encode(out); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			verb := "removed"
			if opts.DryRun {
				verb = "would remove"
			}
			for _, r := range rep.Removed {
				fmt.Fprintf(s.stdout, "%s %s (%.1f MB): %s\n", verb, r.Path, float64(r.Bytes)/1e6, r.Why)
			}
			for _, k := range rep.Kept {
				fmt.Fprintf(s.stdout, "kept %s: %s\n", k.Name, k.Why)
			}
			fmt.Fprintf(s.stdout, "%s %d directories, %.1f MB\n", verb, len(rep.Removed), float64(freedBytes(rep))/1e6)
		}
	}
	if rep != nil {
		log.Info("gc done", "root", opts.OutputRoot, "dry_run", opts.DryRun, "removed", len(rep.Removed), "kept", len(rep.Kept), "freed_bytes", freedBytes(rep))
	}
	return err
}

func freedBytes(rep *outputroot.GCReport) int64 {
	var n int64
	for _, r := range rep.Removed {
		n += r.Bytes
	}
	return n
}
