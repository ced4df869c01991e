package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"warehouse-etl/analytics"
	"warehouse-etl/warehouse"
)

const diffSynopsis = `--tensor-warehouse A --against B [flags]

Compares warehouse version A (the candidate) against B (the baseline):
sample counts, samples per reason code, boxes per class, box size
distributions, image statistics and changed config keys. Prints a table, or
JSON with --json, and writes diff.parquet with --parquet. Exits 6 when a
metric's drift is past its limit; a limit of "off" is not checked.

drift measures:
  samples, reasons  change of the share of input samples (total: relative change)
  classes           change of the class's share of all boxes
  box_size          Kolmogorov-Smirnov distance of the width/height/area distributions
  image             absolute change of the channel's mean or std`

// limitFlag is a drift limit on the command line: a number >= 0 or "off".
type limitFlag struct{ limit **float64 }

func (f limitFlag) String() string {
	if f.limit == nil || *f.limit == nil {
		return "off"
	}
	return strconv.FormatFloat(**f.limit, 'g', -1, 64)
}

func (f limitFlag) Set(s string) error {
	if strings.EqualFold(s, "off") {
		*f.limit = nil
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v != v {
		return fmt.Errorf("want a number >= 0 or off")
	}
	*f.limit = &v
	return nil
}

// diffOptions are diff's flags.
type diffOptions struct {
	Path    string // A, the candidate
	Against string // B, the baseline
	JSON    bool
	Parquet string
	Limits  analytics.Limits
	Log     logOptions
}

func (o *diffOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "version A, the candidate: a version directory or an output root with a latest pointer")
	fs.StringVar(&o.Against, "against", "", "version B, the baseline, same forms")
	fs.BoolVar(&o.JSON, "json", false, "print the comparison as JSON instead of a table")
	fs.StringVar(&o.Parquet, "parquet", "", "also write the comparison to this Parquet file (diff.parquet schema)")
	o.Log.addFlags(fs)
	o.Limits = analytics.DefaultLimits()
	fs.Var(limitFlag{&o.Limits.TotalChange}, "max-total-change", "limit on the relative change of input samples")
	fs.Var(limitFlag{&o.Limits.RatioChange}, "max-ratio-change", "limit on the change of the kept/skipped/empty/invalid/missing and per-reason shares")
	fs.Var(limitFlag{&o.Limits.ClassShareChange}, "max-class-share-change", "limit on the change of each class's share of boxes")
	fs.Var(limitFlag{&o.Limits.BoxSizeKS}, "max-box-size-ks", "limit on the KS distance of box width, height and area")
	fs.Var(limitFlag{&o.Limits.ImageStatChange}, "max-image-stat-change", "limit on the change of each channel's image mean and std")
}

// runDiff compares version opts.Path against opts.Against and prints the
// comparison; past a drift limit it returns an *analytics.DriftError.
func runDiff(ctx context.Context, opts diffOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}, flagValue{"against", opts.Against}); err != nil {
		return err
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	var dirs [2]string
	for i, p := range []string{opts.Path, opts.Against} {
		dir, err := warehouse.ResolveDir(p)
		if err != nil {
			return err
		}
		dirs[i] = dir
	}
	d, err := analytics.Compare(ctx, dirs[0], dirs[1], opts.Limits)
	if err != nil {
		return err
	}
	log.Info("compared", "a", dirs[0], "b", dirs[1], "metrics", len(d.Metrics), "exceeded", d.Exceeded)
	if opts.JSON {
		enc := json.NewEncoder(s.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return err
		}
	} else {
		printDiff(s.stdout, d)
	}
	if opts.Parquet != "" {
		if err := d.WriteParquet(opts.Parquet); err != nil {
			return err
		}
	}
	return d.Err()
}

// diffSectionTitles head the table's sections, saying what A and B hold.
var diffSectionTitles = []struct{ section, title string }{
	{analytics.SectionSamples, "samples (count; drift: share of input samples, total: relative)"},
	{analytics.SectionReasons, "reasons (samples carrying the code; drift: share of input samples)"},
	{analytics.SectionClasses, "classes (boxes; drift: share of boxes)"},
	{analytics.SectionBoxSize, "box size (median, normalized to the target; drift: KS distance)"},
	{analytics.SectionImage, "image (stored values; drift: absolute change)"},
}

// printDiff writes the human-readable comparison: per section a table with
// the metric names left-aligned and the numbers right-aligned.
func printDiff(w io.Writer, d *analytics.Diff) {
	fmt.Fprintf(w, "A  %.16s  %s\nB  %.16s  %s\n", d.A.Version, d.A.Dir, d.B.Version, d.B.Dir)
	for _, s := range diffSectionTitles {
		counts := s.section == analytics.SectionSamples || s.section == analytics.SectionReasons || s.section == analytics.SectionClasses
		rows := [][]string{{"", "A", "B", "delta", "drift", "limit", ""}}
		for _, m := range d.Metrics {
			if m.Section != s.section {
				continue
			}
			status := ""
			if m.Exceeded {
				status = "EXCEEDED"
			}
			if counts {
				rows = append(rows, []string{m.Name, fmt.Sprint(int64(m.A)), fmt.Sprint(int64(m.B)), fmt.Sprintf("%+d", int64(m.Delta)), optFloat(m.Drift), optFloat(m.Limit), status})
			} else {
				rows = append(rows, []string{m.Name, fmt.Sprintf("%.4f", m.A), fmt.Sprintf("%.4f", m.B), fmt.Sprintf("%+.4f", m.Delta), optFloat(m.Drift), optFloat(m.Limit), status})
			}
		}
		widths := make([]int, len(rows[0]))
		for _, r := range rows {
			for i, cell := range r {
				widths[i] = max(widths[i], len(cell))
			}
		}
		fmt.Fprintf(w, "\n%s\n", s.title)
		for _, r := range rows {
			line := fmt.Sprintf("  %-*s", widths[0], r[0])
			for i := 1; i < len(r)-1; i++ {
				line += fmt.Sprintf("  %*s", widths[i], r[i])
			}
			line += "  " + r[len(r)-1]
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
	fmt.Fprintf(w, "\nconfig changes (version recipe and thresholds; B -> A)\n")
	if len(d.ConfigChanges) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, c := range d.ConfigChanges {
		fmt.Fprintf(w, "  %s: %s -> %s\n", c.Key, optString(c.B), optString(c.A))
	}
	if d.Exceeded == 0 {
		fmt.Fprintf(w, "\nno drift limit exceeded\n")
	} else {
		fmt.Fprintf(w, "\n%d drift limit(s) exceeded\n", d.Exceeded)
	}
}

func optFloat(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 4, 64)
}

func optString(v *string) string {
	if v == nil {
		return "(absent)"
	}
	return strconv.Quote(*v)
}
