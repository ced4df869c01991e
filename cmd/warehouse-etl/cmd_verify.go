package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"warehouse-etl/warehouse"
)

const verifySynopsis = `--tensor-warehouse PATH [--full] [flags]

Checks a warehouse version (a version directory, or an output root with a
"latest" pointer): the manifest's schema and consistency, the recorded
thresholds against the recorded summary, and every shard's presence, size
and header against the manifest. --full also re-hashes every shard (sha256)
and reads every value: finite images, boxes, masks and extras; masks, boxes
and class indices consistent. Prints each finding and the command to run
next; exits 7 when anything was found.`

func runVerify(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "verify", verifySynopsis)
	path := fs.String("tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	full := fs.Bool("full", false, "re-hash every shard and check every value")
	asJSON := fs.Bool("json", false, "print the findings as one JSON object on stdout")
	workers := fs.Int("workers", 0, "shards checked at once; 0 = one per CPU")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		fs.Usage()
		return usageError{fmt.Errorf("--tensor-warehouse is required")}
	}
	log, err := lf.logger(env.stderr)
	if err != nil {
		return err
	}
	dir, err := warehouse.ResolveDir(*path)
	if err != nil {
		return err
	}
	findings, err := warehouse.Verify(ctx, dir, warehouse.VerifyOptions{Full: *full, Workers: *workers, Logger: log})
	if err != nil {
		return err
	}
	next := verifyNext(dir, *full, findings)
	if *asJSON {
		out := struct {
			Dir      string              `json:"dir"`
			Full     bool                `json:"full"`
			Count    int                 `json:"count"`
			Findings []warehouse.Finding `json:"findings"`
			Next     string              `json:"next"`
		}{dir, *full, len(findings), findings, next}
		if out.Findings == nil {
			out.Findings = []warehouse.Finding{}
		}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printFindings(env.stdout, dir, *full, findings, next)
	}
	if len(findings) > 0 {
		return &warehouse.FindingsError{Dir: dir, Findings: findings}
	}
	return nil
}

func printFindings(w io.Writer, dir string, full bool, findings []warehouse.Finding, next string) {
	mode := "quick: manifest, thresholds, shard presence, sizes and headers"
	if full {
		mode = "full: also every shard's sha256 and every value"
	}
	if len(findings) == 0 {
		fmt.Fprintf(w, "ok: %s (%s)\n", dir, mode)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tSHARD\tSAMPLE\tDETAIL")
		for _, f := range findings {
			shardName, sample := f.Shard, "-"
			if shardName == "" {
				shardName = "-"
			}
			if f.Sample >= 0 {
				sample = fmt.Sprint(f.Sample)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Kind, shardName, sample, f.Detail)
		}
		tw.Flush()
		fmt.Fprintf(w, "%d finding(s) in %s (%s)\n", len(findings), dir, mode)
	}
	fmt.Fprintf(w, "next: %s\n", next)
}

// verifyNext is the command a person should run after this verification.
func verifyNext(dir string, full bool, findings []warehouse.Finding) string {
	if len(findings) == 0 {
		if !full {
			return fmt.Sprintf("warehouse-etl verify --tensor-warehouse %s --full   (re-hash every shard and read every value)", dir)
		}
		return fmt.Sprintf("warehouse-etl load --tensor-warehouse %s   (or start training with --tensor-warehouse %s)", dir, dir)
	}
	onlyThresholds := true
	for _, f := range findings {
		onlyThresholds = onlyThresholds && f.Kind == warehouse.FindingThreshold
	}
	if onlyThresholds {
		return fmt.Sprintf("warehouse-etl inspect --tensor-warehouse %s   (the data is intact but its validation summary exceeds the recorded limits: fix the inputs and rebuild, or read it anyway with load --ignore-thresholds)", dir)
	}
	return fmt.Sprintf("WAREHOUSE_CLEAR=1 warehouse-etl build --config CONFIG   (rebuild this version from the config whose recipe is version_recipe in %s/manifest.json; do not train on it)", dir)
}
