package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/analytics"
	"warehouse-etl/analytics/records"
	"warehouse-etl/outputroot"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// MaxExamples is how many offending samples a RejectedError carries: the
// first ones in scan order, enough to see what went wrong without paging
// through samples.jsonl.
const MaxExamples = 5

// RejectedError is a plan that failed a threshold with action fail: the
// thresholds that failed, the counts by reason, the first offending samples
// with their files and causes, and where the full per-sample report lies.
// It unwraps to the *validate.ThresholdError (exit 3).
type RejectedError struct {
	Threshold *validate.ThresholdError
	Summary   validate.Summary
	// Examples are the first samples (at most MaxExamples) whose reasons
	// belong to a failed threshold's category, in scan order.
	Examples []records.SampleLine
	// Offending counts every such sample.
	Offending int64
	// ReportDir holds the plan's samples.jsonl and samples.parquet
	// (docs/format/manifest.md, "The report of a failed build"), or with
	// Published the version's own; "" when none was written.
	ReportDir string
	// Published: the thresholds refused a version published earlier (a
	// rerun found it up to date); it stays as it is.
	Published bool
}

func (e *RejectedError) Error() string { return e.Threshold.Error() }
func (e *RejectedError) Unwrap() error { return e.Threshold }

// offends reports whether a sample with these reasons counts toward one of
// the failed thresholds' categories (invalid, missing, empty).
func offends(reasons []validate.Reason, categories map[validate.Class]bool) bool {
	for _, r := range reasons {
		if categories[r.Class()] {
			return true
		}
	}
	return false
}

// failedCategories are the reason classes of the failed findings
// ("invalid.max_ratio" -> invalid).
func failedCategories(failed []validate.Finding) map[validate.Class]bool {
	out := map[validate.Class]bool{}
	for _, f := range failed {
		cat, _, _ := strings.Cut(f.Threshold, ".")
		out[validate.Class(cat)] = true
	}
	return out
}

// planLine is samples.jsonl's line of a scanned sample before it is built:
// a kept one has its plan index and letterbox but no shard (writeSamples
// adds the shard of one that was built), lateErr makes it a decode_error.
func planLine(p *plannedSample, planIdx int64, classes *classTable, lateErr string) records.SampleLine {
	line := records.SampleLine{
		Seq: p.Seq, Source: p.Source, SourceIndex: int64(p.SourceIndex), Frame: p.Frame,
		UnixTimeNs: p.UnixTimeNs, SimTime: p.SimTime, LabelPath: p.LabelPath, ImagePath: p.ImagePath,
		Width: int64(p.Width), Height: int64(p.Height), Index: -1, ShardIndex: -1,
	}
	reasons, details := p.Reasons, p.Details
	switch {
	case planIdx >= 0 && lateErr != "":
		reasons = addReason(reasons, validate.ReasonDecodeError)
		details = maps.Clone(details)
		details.Note(validate.ReasonDecodeError, lateErr)
		line.Error = lateErr
	case planIdx >= 0:
		g := p.Geometry
		line.Kept, line.Index = true, planIdx
		line.BoxCount = int64(len(p.Target))
		for _, c := range classes.indices(p) {
			line.ClassIndex = append(line.ClassIndex, int64(c))
		}
		line.Letterbox = &records.Letterbox{ScaleX: g.ScaleX, ScaleY: g.ScaleY, ResizedWidth: int64(g.NewW),
			ResizedHeight: int64(g.NewH), PadX: int64(g.PadX), PadY: int64(g.PadY)}
		line.Identity = p.Identity
	}
	line.Reasons = make([]string, len(reasons))
	for i, r := range reasons {
		line.Reasons[i] = string(r)
	}
	line.Detail = validate.Describe(reasons, details)
	return line
}

// writePlanReport writes the plan's samples.jsonl and samples.parquet into
// dir (when dir is not "") and collects the examples of e: the first
// samples that offend one of the failed thresholds. late maps the seq of a
// sample whose full decode failed (validate --decode) to the error.
func (b *builder) writePlanReport(ctx context.Context, dir string, scan *scanResult, late map[int64]string, categories map[validate.Class]bool, e *RejectedError) (err error) {
	var enc *json.Encoder
	var bw *bufio.Writer
	var pq *analytics.PlanSamplesWriter
	if dir != "" {
		f, err := os.Create(filepath.Join(dir, warehouse.SamplesName))
		if err != nil {
			return err
		}
		defer f.Close()
		bw = bufio.NewWriterSize(f, 1<<20)
		enc = json.NewEncoder(bw)
		if pq, err = analytics.NewPlanSamplesWriter(dir, b.id.String()); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				pq.Abort()
			}
		}()
	}
	err = readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
		line := planLine(p, planIdx, scan.classes, late[p.Seq])
		reasons := p.Reasons
		if line.Error != "" {
			reasons = addReason(reasons, validate.ReasonDecodeError)
		}
		if offends(reasons, categories) {
			e.Offending++
			if len(e.Examples) < MaxExamples {
				e.Examples = append(e.Examples, line)
			}
		}
		if enc != nil {
			if err := enc.Encode(&line); err != nil {
				return err
			}
			if err := pq.Write(&line); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	if err != nil || dir == "" {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return pq.Close()
}

// reject turns failed thresholds of the scan into a *RejectedError and
// leaves the full per-sample report in the output root's
// .<version>.failed directory (outputroot.FailedDir), replacing an older
// one; the caller holds the version's build lock. A report that cannot be
// written is logged: the threshold error is what the build reports.
func (b *builder) reject(ctx context.Context, scan *scanResult, failed []validate.Finding) error {
	e := &RejectedError{Threshold: &validate.ThresholdError{Findings: failed}, Summary: scan.summary.Result()}
	dir := filepath.Join(b.outRoot, outputroot.FailedDir(b.id.DirName()))
	err := os.RemoveAll(dir)
	if err == nil {
		err = os.Mkdir(dir, 0o777)
	}
	if err == nil {
		err = b.writePlanReport(ctx, dir, scan, nil, failedCategories(failed), e)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.log.Warn("writing the report of the failed build", "dir", dir, "err", err)
		os.RemoveAll(dir)
		e.Examples, e.Offending = nil, 0
		if err := b.writePlanReport(ctx, "", scan, nil, failedCategories(failed), e); err != nil {
			return errors.Join(e, err)
		}
		return e
	}
	e.ReportDir = dir
	return e
}

// ValidateOptions configure Validate.
type ValidateOptions struct {
	Options
	// Decode also reads and decodes every kept sample, as the build's
	// transform stage would, and counts each failure as a late
	// decode_error.
	Decode bool
	// ReportDir, when not "", receives the plan's samples.jsonl and
	// samples.parquet; it must exist.
	ReportDir string
}

// ValidateResult is what a Validate that passed its thresholds found.
type ValidateResult struct {
	Version  string
	Summary  validate.Summary
	Warnings []validate.Finding
	Decoded  int64 // samples decoded (Decode)
	// Examples are the first samples with a reason of class invalid or
	// missing, in scan order; Offending counts them all.
	Examples  []records.SampleLine
	Offending int64
}

// Validate runs what a build runs before it writes a shard (the scan, the
// validation, the plan, the thresholds) and with opts.Decode every decode
// too, and writes nothing under the output root. Thresholds that fail are
// a *RejectedError (exit 3) with the same report a build gives.
func Validate(ctx context.Context, opts ValidateOptions) (*ValidateResult, error) {
	b, err := newBuilder(opts.Options)
	if err != nil {
		return nil, err
	}
	defer b.close()
	tmp, err := os.MkdirTemp("", "warehouse-validate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep := newReport(b, b.now())
	scan, err := b.scanPass(ctx, tmp, rep)
	if err != nil {
		return nil, err
	}
	summary := scan.summary.Result()
	var late map[int64]string
	var decoded int64
	if opts.Decode {
		if late, decoded, err = b.decodeAll(ctx, scan); err != nil {
			return nil, err
		}
		if err := recordLate(&summary, scan, late); err != nil {
			return nil, err
		}
	}
	failed, warned := b.thresholds.Check(summary.Total)
	if len(failed) > 0 {
		e := &RejectedError{Threshold: &validate.ThresholdError{Findings: failed}, Summary: summary, ReportDir: opts.ReportDir}
		if err := b.writePlanReport(ctx, opts.ReportDir, scan, late, failedCategories(failed), e); err != nil {
			return nil, err
		}
		return nil, e
	}
	// Nothing failed: the examples are the first skipped samples.
	e := &RejectedError{}
	skipping := map[validate.Class]bool{validate.ClassInvalid: true, validate.ClassMissing: true}
	if err := b.writePlanReport(ctx, opts.ReportDir, scan, late, skipping, e); err != nil {
		return nil, err
	}
	return &ValidateResult{Version: b.id.String(), Summary: summary, Warnings: warned, Decoded: decoded,
		Examples: e.Examples, Offending: e.Offending}, nil
}

// recordLate counts the late decode errors in the summary.
func recordLate(summary *validate.Summary, scan *scanResult, late map[int64]string) error {
	if len(late) == 0 {
		return nil
	}
	return readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
		if _, ok := late[p.Seq]; ok && planIdx >= 0 {
			return summary.RecordLate(int(p.SourceIndex), validate.ReasonDecodeError)
		}
		return nil
	})
}

// decodeAll reads and transforms every kept sample of the scan in a pool
// of b.workers, as the build's transform stage does, and returns the
// samples that failed (seq -> error) and how many were decoded.
func (b *builder) decodeAll(ctx context.Context, scan *scanResult) (map[int64]string, int64, error) {
	spec := transformSpec(b.cfg)
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan *plannedSample, b.workers)
	var mu sync.Mutex
	late := map[int64]string{}
	var decoded int64
	g.Go(func() error {
		defer close(jobs)
		return readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
			if planIdx < 0 {
				return nil
			}
			select {
			case jobs <- p:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	for range b.workers {
		g.Go(func() error {
			tr, err := transforms.NewTransformer(spec)
			if err != nil {
				return err
			}
			image := make([]byte, spec.OutputBytes())
			for p := range jobs {
				j := &job{p: p, image: image}
				b.transform(tr, j)
				mu.Lock()
				decoded++
				if j.lateErr != nil {
					late[p.Seq] = j.lateErr.Error()
				}
				mu.Unlock()
				b.counters.Written.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return late, decoded, nil
}

// rejectPublished is the *RejectedError of a published version whose
// recorded summary fails today's thresholds (a rerun that finds it up to
// date): its report is the version's own samples.jsonl and
// samples.parquet, from which the examples are read.
func (b *builder) rejectPublished(dir string, m *warehouse.Manifest, failed []validate.Finding) error {
	e := &RejectedError{Threshold: &validate.ThresholdError{Findings: failed}, Summary: m.Summary, ReportDir: dir, Published: true}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(m.Files.Samples)))
	if err != nil {
		b.log.Warn("reading the examples of the rejected version", "err", err)
		return e
	}
	defer f.Close()
	categories := failedCategories(failed)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), records.MaxSampleLineBytes)
	for sc.Scan() {
		line, err := records.DecodeSampleLine(sc.Bytes())
		if err != nil {
			b.log.Warn("reading the examples of the rejected version", "err", err)
			break
		}
		reasons := make([]validate.Reason, len(line.Reasons))
		for i, r := range line.Reasons {
			reasons[i] = validate.Reason(r)
		}
		if offends(reasons, categories) {
			e.Offending++
			if len(e.Examples) < MaxExamples {
				e.Examples = append(e.Examples, *line)
			}
		}
	}
	return e
}
