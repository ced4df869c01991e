package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

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

func runGC(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "gc", gcSynopsis)
	root := fs.String("output-root", "", "the output root whose versions to collect")
	keep := fs.Int("keep", 0, "how many of the newest versions to keep (>= 1)")
	keepDays := fs.Float64("keep-days", 0, "also keep every version younger than this many days")
	dryRun := fs.Bool("dry-run", false, "say what would be removed, remove nothing")
	asJSON := fs.Bool("json", false, "print the report as one JSON object on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *root == "":
		fs.Usage()
		return usageError{fmt.Errorf("--output-root is required")}
	case *keep < 1:
		return usageError{fmt.Errorf("--keep %d: keep at least 1 version", *keep)}
	case *keepDays < 0:
		return usageError{fmt.Errorf("--keep-days %v: must be >= 0", *keepDays)}
	}
	rep, err := outputroot.GC(*root, outputroot.GCOptions{Keep: *keep, KeepFor: time.Duration(*keepDays * float64(24*time.Hour)), DryRun: *dryRun})
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(env.stdout)
			enc.SetIndent("", "  ")
			out := struct {
				Root   string `json:"root"`
				DryRun bool   `json:"dry_run"`
				Freed  int64  `json:"freed_bytes"`
				*outputroot.GCReport
			}{*root, *dryRun, freedBytes(rep), rep}
			if jerr := enc.Encode(out); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			verb := "removed"
			if *dryRun {
				verb = "would remove"
			}
			for _, r := range rep.Removed {
				fmt.Fprintf(env.stdout, "%s %s (%.1f MB): %s\n", verb, r.Path, float64(r.Bytes)/1e6, r.Why)
			}
			for _, k := range rep.Kept {
				fmt.Fprintf(env.stdout, "kept %s: %s\n", k.Name, k.Why)
			}
			fmt.Fprintf(env.stdout, "%s %d directories, %.1f MB\n", verb, len(rep.Removed), float64(freedBytes(rep))/1e6)
		}
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
