package pipeline

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/sources"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// spillName is pass 1's per-sample plan, streamed to disk so that memory
// does not grow with the dataset; it is removed before publishing.
const spillName = ".scan.jsonl"

// plannedSample is one spill record: the scanned sample plus everything
// pass 1 decided about it.
type plannedSample struct {
	sources.Sample
	Kept     bool                `json:"kept"`
	Geometry transforms.Geometry `json:"geometry"`
	Target   []plannedBox        `json:"target,omitempty"`   // boxes in target space, at most max_boxes
	Dropped  int                 `json:"dropped,omitempty"`  // boxes lost to clamping or max_boxes
	Identity string              `json:"identity,omitempty"` // kept samples of a version build: the input identity (reuse_identity.go)
}

type plannedBox struct {
	Box   [4]float32       `json:"box"`
	Class sources.ClassKey `json:"class"`
}

// spillLine is where one sample's line lies in the spill.
type spillLine struct {
	off int64
	n   int
}

// readSpill calls fn with every sample of the spill at path, in scan
// order, with its position among the kept samples (planIdx; -1 for a
// skipped one) and where its line lies: what assemble and Live read.
// keptLines and readSpillWanted read the kept samples' lines only.
func readSpill(path string, fn func(p *plannedSample, planIdx int64, at spillLine) error) error {
	var off, planned int64
	return spillLines(path, func(line []byte) error {
		p := new(plannedSample)
		if err := json.Unmarshal(line, p); err != nil {
			return fmt.Errorf("read back %s: %w", spillName, err)
		}
		idx := int64(-1)
		if p.Kept {
			idx = planned
			planned++
		}
		if err := fn(p, idx, spillLine{off: off, n: len(line)}); err != nil {
			return err
		}
		off += int64(len(line))
		return nil
	})
}

// spillLines calls fn with each line of the spill at path, newline
// included; line is valid during the call only.
func spillLines(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			var rest []byte
			rest, err = r.ReadBytes('\n')
			line = append(append([]byte(nil), line...), rest...)
		}
		if err == io.EOF && len(line) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read back %s: %w", spillName, err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// readSpillWanted is readSpill for a caller that wants only the planned
// samples for which want is true: with the scan's kept bits it decodes
// no other line (a rebuild that takes most shards whole forwards a few
// samples of the spill to its workers).
func readSpillWanted(scan *scanResult, want func(planIdx int64) bool, fn func(p *plannedSample, planIdx int64) error) error {
	if scan.kept == nil {
		return readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
			if planIdx < 0 || !want(planIdx) {
				return nil
			}
			return fn(p, planIdx)
		})
	}
	return keptLines(scan, func(line []byte, seq, idx int64) error {
		if !want(idx) {
			return nil
		}
		p := new(plannedSample)
		if err := json.Unmarshal(line, p); err != nil {
			return fmt.Errorf("read back %s: %w", spillName, err)
		}
		if !p.Kept || p.Seq != seq {
			return fmt.Errorf("read back %s: line %d is not planned sample %d of the scan", spillName, seq, idx)
		}
		return fn(p, idx)
	})
}

// keptLines calls fn with the spill line of every kept sample, its seq
// and its planIdx, found by the scan's kept bits (scan.kept must be set)
// without decoding any line. line is valid during the call only.
func keptLines(scan *scanResult, fn func(line []byte, seq, planIdx int64) error) error {
	var seq, planned int64
	return spillLines(scan.spill, func(line []byte) error {
		s := seq
		seq++
		if s >= int64(len(scan.kept))*64 || scan.kept[s/64]&(1<<(s%64)) == 0 {
			return nil
		}
		planned++
		return fn(line, s, planned-1)
	})
}

// scanResult is what pass 1 hands pass 2.
type scanResult struct {
	// kept has bit seq set for each kept input sample, in spill order
	// (nil for a plan replayed from a partitioned build's stored plan).
	kept        []uint64
	spill       string
	summary     *validate.SummaryBuilder
	classes     *classTable
	fingerprint warehouse.Fingerprint
	inputs      int64
	planned     int64  // samples kept after pass 1
	planSHA     string // sha256 of the spill: every partition's scan must agree on it
}

// scanPass lists the inputs, scans and validates every sample, plans its
// geometry and boxes, and streams the plan to the spill file.
// Partitions and commits read the version's stored plan instead when the
// sources are unchanged (plan.go).
func (b *builder) scanPass(ctx context.Context, tmp string, rep *Report) (*scanResult, error) {
	if b.staged != nil {
		return b.stagedScan(ctx, tmp, rep)
	}
	fp, err := writeFingerprint(ctx, b, filepath.Join(tmp, warehouse.FingerprintName))
	if err != nil {
		return nil, err
	}
	return b.scanSources(ctx, filepath.Join(tmp, spillName), fp, rep, nil)
}

// scanSources is the scan itself: every sample of the sources, listed as
// fp, planned into the spill at path; tally, when set, counts the samples
// for a stored plan (plan.go).
func (b *builder) scanSources(ctx context.Context, spill string, fp warehouse.Fingerprint, rep *Report, tally *planTally) (*scanResult, error) {
	t0 := b.now()
	res := &scanResult{spill: spill, summary: &validate.SummaryBuilder{}, fingerprint: fp}
	f, err := os.Create(res.spill)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(fsfault.File{File: f}, 1<<20)
	planHash := sha256.New()
	enc := json.NewEncoder(io.MultiWriter(w, planHash))

	spec := transformSpec(b.cfg)
	keys := map[sources.ClassKey]bool{}
	pinned := b.pinnedClasses()
	var validating time.Duration
	emit := func(p *plannedSample) error { return enc.Encode(p) }
	var ids *identityStage
	if b.withIdentity {
		// Each kept sample's input identity, hashed in a pool and
		// spilled in scan order (reuse_identity.go).
		b.inputs = b.openInputCache()
		ids = b.startIdentities(ctx, b.workers, emit)
		emit = ids.put
	}
	err = b.src.Scan(ctx, func(s *sources.Sample) error {
		if s.Seq != res.inputs {
			return fmt.Errorf("source %s: sample seq %d, want %d (scan order must be dense)", b.src.Kind(), s.Seq, res.inputs)
		}
		res.inputs++
		v0 := time.Now()
		p := b.plan(spec, s, pinned, keys)
		err := res.summary.Add(int(s.SourceIndex), s.Source, s.ValidBoxes > 0, p.Reasons, p.Kept)
		if tally != nil && err == nil {
			tally.add(int(s.SourceIndex), s.Source, s.ValidBoxes > 0, p.Reasons, p.Kept)
		}
		validating += time.Since(v0)
		if err != nil {
			return err
		}
		if p.Kept {
			res.planned++
			seq := res.inputs - 1
			for int64(len(res.kept))*64 <= seq {
				res.kept = append(res.kept, 0)
			}
			res.kept[seq/64] |= 1 << (seq % 64)
		}
		b.counters.Scanned.Add(1)
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(p)
	})
	if ids != nil {
		if cerr := ids.close(); cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, err
	}
	if c := b.inputs; c != nil {
		b.log.Debug("input identities", "from_cache", c.hits.Load(), "hashed", c.hashed.Load())
		if err := c.save(); err != nil {
			b.log.Warn("could not keep the input identities for the next build", "file", c.path, "err", err)
		}
	}
	if res.inputs == 0 {
		return nil, b.emptySourceError()
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	res.planSHA = hex.EncodeToString(planHash.Sum(nil))
	if pinned != nil {
		res.classes = pinned
	} else {
		res.classes = discoveredClasses(keys)
	}
	b.counters.Planned.Store(res.planned)
	rep.Phases.Validate = validating.Seconds()
	rep.Phases.Scan = max(0, b.now().Sub(t0).Seconds()-rep.Phases.Validate)
	b.log.Info("scan done", "inputs", res.inputs, "planned", res.planned,
		"scan_seconds", rep.Phases.Scan, "validate_seconds", rep.Phases.Validate)
	return res, nil
}

// plan decides what happens to one sample: reasons found at plan time
// (size mismatch, unknown class, dropped or truncated boxes), the letterbox
// geometry from the header's size, and the boxes in target space.
func (b *builder) plan(spec transforms.Spec, s *sources.Sample, pinned *classTable, keys map[sources.ClassKey]bool) *plannedSample {
	p := &plannedSample{Sample: *s}
	if len(p.Extras) != 0 && len(p.Extras) != b.extraF32 {
		p.Reasons = addReason(p.Reasons, validate.ReasonLengthMismatch)
		p.Explain(validate.ReasonLengthMismatch, fmt.Sprintf("%d extra values, the extras declare %d", len(p.Extras), b.extraF32))
	}
	for i, v := range p.Extras {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			p.Reasons = addReason(p.Reasons, validate.ReasonNonFinite)
			p.Explain(validate.ReasonNonFinite, fmt.Sprintf("%s is %v", b.extraName(i), v))
			p.Extras = nil // skipped anyway, and JSON cannot carry NaN to the spill
			break
		}
	}
	if len(p.Extras) == 0 && b.extraF32 > 0 && !validate.Skip(p.Reasons, false) {
		p.Reasons = addReason(p.Reasons, validate.ReasonMissingBlock)
		p.Explain(validate.ReasonMissingBlock, "the sample has no extras, the config asks for them")
	}
	if validate.Skip(p.Reasons, b.cfg.SkipEmpty) {
		return p
	}
	g, err := transforms.PlanGeometry(spec, s.Width, s.Height)
	if err != nil {
		reason := validate.ReasonDecodeError
		if errors.Is(err, transforms.ErrSizeMismatch) {
			reason = validate.ReasonSizeMismatch
		}
		p.Reasons = addReason(p.Reasons, reason)
		p.Explain(reason, err.Error())
		return p
	}
	p.Geometry = g
	for _, box := range s.Boxes {
		if pinned != nil {
			if _, ok := pinned.lookup(box.Class); !ok {
				p.Reasons = addReason(p.Reasons, validate.ReasonUnknownClass)
				p.Explain(validate.ReasonUnknownClass, "class "+box.Class.String()+" is not in the class list")
				continue
			}
		}
		mapped, ok := g.MapBox(box.X0, box.Y0, box.X1, box.Y1)
		if !ok {
			p.Dropped++
			p.Reasons = addReason(p.Reasons, validate.ReasonDegenerateBoxDropped)
			p.Explain(validate.ReasonDegenerateBoxDropped, "box "+validate.FormatBox([4]float64{box.X0, box.Y0, box.X1, box.Y1})+" has no area in the target")
			continue
		}
		if len(p.Target) == b.cfg.MaxBoxes {
			p.Dropped++
			p.Reasons = addReason(p.Reasons, validate.ReasonBoxesTruncated)
			p.Explain(validate.ReasonBoxesTruncated, fmt.Sprintf("%d boxes, max_boxes %d", len(s.Boxes), b.cfg.MaxBoxes))
			continue
		}
		p.Target = append(p.Target, plannedBox{Box: mapped, Class: box.Class})
		keys[box.Class] = true
	}
	p.Kept = !validate.Skip(p.Reasons, b.cfg.SkipEmpty)
	return p
}

// extraName names the extra that float32 value i of a sample belongs to.
func (b *builder) extraName(i int) string {
	for _, e := range b.extras {
		if n := e.Elements(); i < n {
			return e.Name
		} else {
			i -= n
		}
	}
	return fmt.Sprintf("extra value %d", i)
}

// addReason returns rs plus r, without repeats, in the stable reason order.
func addReason(rs []validate.Reason, r validate.Reason) []validate.Reason {
	return validate.Normalize(append(slices.Clone(rs), r))
}

// writeFingerprint streams the source listing into the version directory.
func writeFingerprint(ctx context.Context, b *builder, path string) (warehouse.Fingerprint, error) {
	f, err := os.Create(path)
	if err != nil {
		return warehouse.Fingerprint{}, err
	}
	defer f.Close()
	w := bufio.NewWriter(fsfault.File{File: f})
	fw := warehouse.NewFingerprintWriter(w)
	if err := b.fingerprint(ctx, fw); err != nil {
		return warehouse.Fingerprint{}, err
	}
	if err := w.Flush(); err != nil {
		return warehouse.Fingerprint{}, err
	}
	return fw.Sum(), f.Close()
}
