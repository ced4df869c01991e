package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"warehouse-etl/internal/progress"
	"warehouse-etl/verify"
	"warehouse-etl/warehouse"
)

const verifySynopsis = `--tensor-warehouse PATH [--full] [flags]

Checks a warehouse version (a version directory, or an output root with a
"latest" pointer): the manifest against its digest (manifest.json.sha256),
the manifest's schema and consistency, the recorded thresholds against the
recorded summary, the size and sha256 of every other file the manifest
lists (samples.jsonl, fingerprint.jsonl, build_report.json, the Parquet
exports, the Zarr store's metadata; its chunk files by size), and every
shard's presence, size and header against the manifest.
--full also re-hashes every shard and Zarr chunk file (sha256) and reads
every value: finite images, boxes, masks and extras; masks, boxes and class
indices consistent. Prints each finding naming its file, and the command to
run next; exits 7 when anything was found. A version built before manifests
recorded these checksums is verified as before, with a note.`

// verifyOptions are verify's flags.
type verifyOptions struct {
	Path    string
	Full    bool
	JSON    bool
	Workers int
	Log     logOptions
}

func (o *verifyOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.BoolVar(&o.Full, "full", false, "re-hash every shard and Zarr chunk file and check every value")
	fs.BoolVar(&o.JSON, "json", false, "print the findings as one JSON object on stdout")
	fs.IntVar(&o.Workers, "workers", 0, "shards and files checked at once; 0 = one per CPU")
	o.Log.addFlags(fs)
}

// runVerify checks the version at opts.Path and prints its findings; a
// finding is a *verify.FindingsError.
func runVerify(ctx context.Context, opts verifyOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}); err != nil {
		return err
	}
	// --full reads every byte of the version: it shows its progress.
	var counter *progress.Bytes
	var log *slog.Logger
	stop := func() {}
	if opts.Full {
		counter = &progress.Bytes{}
		var err error
		if log, stop, err = showBytes(s, opts.Log, "verify --full", counter); err != nil {
			return err
		}
		defer stop()
	} else {
		var err error
		if log, err = opts.Log.logger(s.stderr); err != nil {
			return err
		}
	}
	dir, err := warehouse.ResolveDir(opts.Path)
	if err != nil {
		return err
	}
	vopts := verify.Options{Full: opts.Full, Workers: opts.Workers, Logger: log}
	if counter != nil {
		vopts.Progress = counter
	}
	res, err := verify.Run(ctx, dir, vopts)
	stop()
	if err != nil {
		return err
	}
	findings := res.Findings
	next := verifyNext(dir, opts.Full, findings)
	if opts.JSON {
		out := struct {
			Dir      string           `json:"dir"`
			Full     bool             `json:"full"`
			Count    int              `json:"count"`
			Findings []verify.Finding `json:"findings"`
			Notes    []string         `json:"notes"`
			Next     string           `json:"next"`
		}{dir, opts.Full, len(findings), findings, res.Notes, next}
		if out.Findings == nil {
			out.Findings = []verify.Finding{}
		}
		if out.Notes == nil {
			out.Notes = []string{}
		}
		enc := json.NewEncoder(s.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printFindings(s.stdout, dir, opts.Full, findings, res.Notes, next)
	}
	if len(findings) > 0 {
		return &verify.FindingsError{Dir: dir, Findings: findings}
	}
	return nil
}

func printFindings(w io.Writer, dir string, full bool, findings []verify.Finding, notes []string, next string) {
	mode := "quick: manifest and its digest, thresholds, every other file's sha256, shard presence, sizes and headers"
	if full {
		mode = "full: also every shard's and Zarr chunk's sha256 and every value"
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(findings) == 0 {
		fmt.Fprintf(w, "ok: %s (%s)\n", dir, mode)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tFILE\tSAMPLE\tDETAIL")
		for _, f := range findings {
			file, sample := f.Shard, "-"
			if file == "" {
				file = f.File
			}
			if file == "" {
				file = "-"
			}
			if f.Sample >= 0 {
				sample = fmt.Sprint(f.Sample)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Kind, file, sample, f.Detail)
		}
		tw.Flush()
		fmt.Fprintf(w, "%d finding(s) in %s (%s)\n", len(findings), dir, mode)
	}
	fmt.Fprintf(w, "next: %s\n", next)
}

// verifyNext is the command a person should run after this verification.
func verifyNext(dir string, full bool, findings []verify.Finding) string {
	if len(findings) == 0 {
		if !full {
			return fmt.Sprintf("warehouse-etl verify --tensor-warehouse %s --full   (re-hash every shard and read every value)", dir)
		}
		// load's default batch, unless the warehouse cannot fill one: a
		// hint must run as printed.
		batch := ""
		if m, err := warehouse.ReadManifest(dir); err == nil && m.Samples > 0 && m.Samples < defaultLoadBatch {
			batch = fmt.Sprintf(" --batch %d", m.Samples)
		}
		return fmt.Sprintf("warehouse-etl load --tensor-warehouse %s%s   (or start training with --tensor-warehouse %s)", dir, batch, dir)
	}
	onlyThresholds := true
	for _, f := range findings {
		onlyThresholds = onlyThresholds && f.Kind == verify.FindingThreshold
	}
	if onlyThresholds {
		return fmt.Sprintf("warehouse-etl inspect --tensor-warehouse %s   (the data is intact but its validation summary exceeds the recorded limits: fix the inputs and rebuild, or read it anyway with load --ignore-thresholds)", dir)
	}
	return fmt.Sprintf("WAREHOUSE_CLEAR=1 warehouse-etl build --config CONFIG   (rebuild this version from the config whose recipe is version_recipe in %s/manifest.json; do not train on it)", dir)
}
