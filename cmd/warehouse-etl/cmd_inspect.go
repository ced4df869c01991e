package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
	"warehouse-etl/warehouse"
)

const inspectSynopsis = `--tensor-warehouse PATH [--json] [--sample N [--png FILE]]

Prints a summary of a warehouse version: version, recipe, transform, sizes,
classes, validation summary, thresholds and the shard table (with each
file's presence and size). --sample N adds sample N's record and boxes;
with --png FILE it also renders sample N back to an RGB picture (the stored
tensor de-normalized, boxes drawn in their class colour, the letterbox
content outlined in grey) so a person can see that boxes and image line up.`

// inspectOptions are inspect's flags.
type inspectOptions struct {
	Path   string
	JSON   bool
	Sample int // -1: none
	PNG    string
	Log    logOptions
}

func (o *inspectOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object on stdout instead of the summary")
	fs.IntVar(&o.Sample, "sample", -1, "also show this sample (global index)")
	fs.StringVar(&o.PNG, "png", "", "with --sample: render the sample with its boxes to this PNG file")
	o.Log.addFlags(fs)
}

// runInspect prints the summary of the version at opts.Path, and with
// opts.Sample one sample (rendered to opts.PNG).
func runInspect(ctx context.Context, opts inspectOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}); err != nil {
		return err
	}
	if opts.PNG != "" && opts.Sample < 0 {
		return usageError{fmt.Errorf("--png needs --sample N")}
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	dir, err := warehouse.ResolveDir(opts.Path)
	if err != nil {
		return err
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		return err
	}
	report := inspectReport{Dir: dir, Manifest: m, ThresholdFindings: m.Thresholds.Evaluate(m.Summary.Total)}
	if report.ThresholdFindings == nil {
		report.ThresholdFindings = []validate.Finding{}
	}
	for _, sh := range m.Shards {
		report.ShardFiles = append(report.ShardFiles, shardFileStatus(dir, sh))
	}
	if checked, err := warehouse.ShardsWithSampleChecksums(m); err != nil {
		report.SampleChecksums = "unknown: " + err.Error()
	} else {
		report.SampleChecksums = sampleChecksumsText(checked, len(m.Shards))
	}
	if int64(opts.Sample) >= m.Samples {
		return usageError{fmt.Errorf("--sample %d: %s has %d samples (0 to %d)", opts.Sample, dir, m.Samples, m.Samples-1)}
	}
	if opts.Sample >= 0 {
		// Inspection is not training: a warehouse over its thresholds is
		// still shown.
		r, err := warehouse.Open(dir, warehouse.OpenOptions{IgnoreThresholds: true, Logger: log})
		if err != nil {
			return err
		}
		defer r.Close()
		sample, err := r.Sample(opts.Sample)
		if err != nil {
			return err
		}
		report.Sample = describeSample(m, sample)
		if opts.PNG != "" {
			if err := writePNG(opts.PNG, render.Sample(m, sample)); err != nil {
				return err
			}
			report.Sample.PNG = opts.PNG
		}
	}
	log.Info("inspected", "dir", dir, "samples", m.Samples, "shards", len(m.Shards), "sample", opts.Sample)
	if opts.JSON {
		enc := json.NewEncoder(s.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	printInspect(s.stdout, &report)
	return nil
}

// inspectReport is what --json prints.
type inspectReport struct {
	Dir               string              `json:"dir"`
	Manifest          *warehouse.Manifest `json:"manifest"`
	ThresholdFindings []validate.Finding  `json:"threshold_findings"`
	ShardFiles        []shardFile         `json:"shard_files"`
	// SampleChecksums says whether the shards carry per-sample CRC-32Cs
	// (sampleChecksumsText), from the manifest's shard sizes.
	SampleChecksums string        `json:"sample_checksums"`
	Sample          *sampleReport `json:"sample,omitempty"`
}

type shardFile struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "ok", "missing", or what is wrong
}

// shardFileStatus is a cheap look at one shard file: presence and size
// (verify checks the rest).
func shardFileStatus(dir string, s warehouse.Shard) shardFile {
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(s.RelativePath)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return shardFile{s.ID, "missing"}
	case err != nil:
		return shardFile{s.ID, err.Error()}
	case fi.Size() != s.Bytes:
		return shardFile{s.ID, fmt.Sprintf("%d bytes, manifest says %d", fi.Size(), s.Bytes)}
	}
	return shardFile{s.ID, "ok"}
}

type sampleReport struct {
	Index      int          `json:"index"`
	Shard      string       `json:"shard"`
	ShardIndex int          `json:"shard_index"`
	Source     string       `json:"source"`
	Meta       shard.Meta   `json:"meta"`
	Boxes      []sampleBox  `json:"boxes"`
	Extras     []namedExtra `json:"extras,omitempty"`
	PNG        string       `json:"png,omitempty"`
}

type sampleBox struct {
	Box        [4]float32 `json:"box"` // x0, y0, x1, y1 normalized
	ClassIndex int32      `json:"class_index"`
	Class      string     `json:"class"`
}

type namedExtra struct {
	Name   string    `json:"name"`
	Shape  []int     `json:"shape"`
	Values []float32 `json:"values"`
}

func describeSample(m *warehouse.Manifest, s warehouse.Sample) *sampleReport {
	meta := s.Meta()
	rep := &sampleReport{Index: s.Index, Shard: s.Shard, ShardIndex: s.ShardIndex, Meta: meta, Boxes: []sampleBox{}}
	for _, src := range m.Sources {
		if src.Index == int(meta.SourceIndex) {
			rep.Source = src.Name
		}
	}
	classes := s.ClassIndex()
	for j, b := range s.Boxes() {
		rep.Boxes = append(rep.Boxes, sampleBox{Box: b, ClassIndex: classes[j], Class: render.ClassName(m, classes[j])})
	}
	extras := s.Extras()
	for _, e := range m.Extras {
		n := 1
		for _, d := range e.Shape {
			n *= d
		}
		rep.Extras = append(rep.Extras, namedExtra{Name: e.Name, Shape: e.Shape, Values: extras[e.Offset : e.Offset+n]})
	}
	return rep
}

func printInspect(w io.Writer, r *inspectReport) {
	m := r.Manifest
	t := m.Transform
	fmt.Fprintf(w, "warehouse   %s\n", r.Dir)
	fmt.Fprintf(w, "version     %s\n", m.Version)
	fmt.Fprintf(w, "            format %d, %s, created %s\n", m.FormatVersion, m.CodeVersion, time.UnixMilli(m.CreatedAtMs).UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "source      %s %s\n", m.Source.Kind, m.DatasetRoot)
	norm := "none (pixel/255)"
	if len(t.Mean) == 3 && len(t.Std) == 3 {
		norm = fmt.Sprintf("(pixel/255 - %v) / %v", t.Mean, t.Std)
	}
	fmt.Fprintf(w, "transform   %dx%d %s, pad %d, normalize %s, %s, max_boxes %d, skip_empty %v\n",
		t.TargetWidth, t.TargetHeight, t.ResizeMode, t.PadValue, norm, m.DefaultDType, t.MaxBoxes, t.SkipEmpty)
	fmt.Fprintf(w, "decoder     %s\n", t.Decoder)
	var bytes int64
	for _, s := range m.Shards {
		bytes += s.Bytes
	}
	fmt.Fprintf(w, "samples     %d kept of %d input, %d shards of up to %d samples, %.1f MB\n",
		m.Samples, m.InputSamples, len(m.Shards), m.SamplesPerShard, float64(bytes)/1e6)
	var cls []string
	for _, c := range m.Classes {
		cls = append(cls, fmt.Sprintf("%d %s", c.Index, c.Name))
	}
	fmt.Fprintf(w, "classes     %s\n", orNone(strings.Join(cls, ", ")))
	var ex []string
	for _, e := range m.Extras {
		ex = append(ex, fmt.Sprintf("%s %v (%s) at %d", e.Name, e.Shape, e.SourceDType, e.Offset))
	}
	fmt.Fprintf(w, "extras      %s\n", orNone(strings.Join(ex, ", ")))
	if st := m.ImageStats; st.Values > 0 {
		fmt.Fprintf(w, "image stats mean %.4f std %.4f over %d values per channel\n", st.Mean, st.Std, st.Values)
	}
	for _, st := range m.ExtraStats { // episode windows (windows.go); episodes.bin beside them
		fmt.Fprintf(w, "extra stats %s over %d samples: mean %.4g std %.4g min %.4g max %.4g q01 %.4g q99 %.4g\n",
			st.Name, st.Count, st.Mean, st.Std, st.Min, st.Max, st.Q01, st.Q99)
	}

	tot := m.Summary.Total
	fmt.Fprintf(w, "\nvalidation  %d input: kept %d, skipped %d; empty %d, invalid %d, missing %d\n",
		tot.Total, tot.Kept, tot.Skipped, tot.Empty, tot.Invalid, tot.Missing())
	if len(tot.ByReason) > 0 {
		fmt.Fprintf(w, "  reasons  ")
		for _, reason := range sortedReasons(tot.ByReason) {
			fmt.Fprintf(w, " %s=%d", reason, tot.ByReason[reason])
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  run\ttotal\tkept\tskipped\tempty\tinvalid\tmissing\t")
	for _, run := range m.Summary.Runs {
		c := run.Counts
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", run.Name, c.Total, c.Kept, c.Skipped, c.Empty, c.Invalid, c.Missing())
	}
	tw.Flush()

	fmt.Fprintf(w, "\nthresholds\n")
	th := m.Thresholds
	for _, cat := range []struct {
		name  string
		limit validate.Limit
		count int64
	}{{"invalid", th.Invalid, tot.Invalid}, {"missing", th.Missing, tot.Missing()}, {"empty", th.Empty, tot.Empty}} {
		fmt.Fprintf(w, "  %-8s %s: %d of %d\n", cat.name, cat.limit.Describe(), cat.count, tot.Total)
	}
	for _, f := range r.ThresholdFindings {
		fmt.Fprintf(w, "  EXCEEDED %s\n", f.String())
	}

	fmt.Fprintf(w, "\nshards\n")
	fmt.Fprintf(w, "  per-sample checksums: %s\n", r.SampleChecksums)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tFIRST\tSAMPLES\tBYTES\tSHA256\tFILE")
	for i, s := range m.Shards {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%s\t%s\n", s.ID, s.FirstSample, s.Samples, s.Bytes, abbreviate(s.ChecksumSHA256), r.ShardFiles[i].Status)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nrecipe\n")
	for _, line := range strings.Split(strings.TrimRight(m.VersionRecipe, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if s := r.Sample; s != nil {
		fmt.Fprintf(w, "\nsample %d  (%s[%d], source %s, frame %d, input_seq %d)\n", s.Index, s.Shard, s.ShardIndex, s.Source, s.Meta.FrameID, s.Meta.InputSeq)
		mt := s.Meta
		fmt.Fprintf(w, "  source image %dx%d -> content %dx%d at (%d, %d), scale %g x %g; boxes dropped %d\n",
			mt.SrcWidth, mt.SrcHeight, mt.ResizedWidth, mt.ResizedHeight, mt.PadX, mt.PadY, mt.ScaleX, mt.ScaleY, mt.BoxesDropped)
		for j, b := range s.Boxes {
			fmt.Fprintf(w, "  box %d  %-12s [%.4f %.4f %.4f %.4f]  = px [%.1f %.1f %.1f %.1f]\n", j, b.Class, b.Box[0], b.Box[1], b.Box[2], b.Box[3],
				b.Box[0]*float32(t.TargetWidth), b.Box[1]*float32(t.TargetHeight), b.Box[2]*float32(t.TargetWidth), b.Box[3]*float32(t.TargetHeight))
		}
		for _, e := range s.Extras {
			fmt.Fprintf(w, "  extra %s %v: %v\n", e.Name, e.Shape, e.Values)
		}
		if s.PNG != "" {
			fmt.Fprintf(w, "  rendered to %s\n", s.PNG)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func abbreviate(sum string) string {
	if len(sum) > 12 {
		return sum[:12] + "…"
	}
	return sum
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
