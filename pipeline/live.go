package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"warehouse-etl/config"
	"warehouse-etl/shard"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// VersionDir is the version directory the config's build publishes (or
// would publish): <output_root>/v<16 hex>. It opens the source to learn its
// extras, which are part of the version.
func VersionDir(cfg *config.Config) (string, error) {
	b, err := newBuilder(Options{Config: cfg})
	if err != nil {
		return "", err
	}
	defer b.close()
	return filepath.Join(b.outRoot, b.id.DirName()), nil
}

// LiveOptions configure OpenLive.
type LiveOptions struct {
	Options
	// IgnoreThresholds serves samples even when the scan's summary exceeds
	// a limit with action fail, as warehouse.OpenOptions does.
	IgnoreThresholds bool
}

// Live serves transformed samples straight from the source, decoding each
// one when it is asked for: the development fallback of `load --allow-live`
// when no warehouse has been built. It runs the build's own pass 1 (scan,
// validate, plan, class table, thresholds) up front, then the build's own
// transform per sample, and encodes each sample through shard.Writer, so a
// live sample is byte for byte the warehouse's sample of the same plan
// position. It implements warehouse.BatchSource.
//
// The differences from a built warehouse: every sample is decoded on every
// read (slow), and a sample whose full decode fails (a late decode_error,
// which the build would drop, shifting every later index) is served as an
// empty sample (zero image, no boxes) and counted in Failed, so indices stay
// those of pass 1.
type Live struct {
	b       *builder
	tmp     string
	spill   *os.File
	lines   []spillLine // kept samples' lines in the spill, in plan order
	classes *classTable
	classMu sync.Mutex // a pinned classTable caches lookups in a map
	layout  shard.Layout
	spec    transforms.Spec
	spp     int
	summary validate.Summary
	failed  atomic.Int64
	workers sync.Pool // *liveWorker
}

// liveWorker is the per-goroutine state of ReadSampleInto.
type liveWorker struct {
	tr  *transforms.Transformer
	mem memFile
}

// OpenLive scans and plans the config's source. Close removes the plan.
func OpenLive(ctx context.Context, opts LiveOptions) (*Live, error) {
	b, err := newBuilder(opts.Options)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "warehouse-live-")
	if err != nil {
		b.close()
		return nil, err
	}
	l := &Live{b: b, tmp: tmp, spec: transformSpec(b.cfg), layout: shardLayout(b.cfg, b.extraF32)}
	if err := l.init(ctx, opts.IgnoreThresholds); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Live) init(ctx context.Context, ignoreThresholds bool) error {
	b := l.b
	scan, err := b.scanPass(ctx, l.tmp, newReport(b, b.now()))
	if err != nil {
		return err
	}
	l.summary = scan.summary.Result()
	failed, warned := b.thresholds.Check(l.summary.Total)
	for _, f := range warned {
		b.log.Warn("validation threshold exceeded (warn)", "finding", f.String())
	}
	if len(failed) > 0 && !ignoreThresholds {
		return &validate.ThresholdError{Findings: failed}
	}
	for _, f := range failed {
		b.log.Warn("validation threshold exceeded (fail), ignored on request", "finding", f.String())
	}
	l.classes = scan.classes
	l.spp = shard.SamplesPerShard(l.layout, b.cfg.ShardTargetBytes())
	if l.spill, err = os.Open(scan.spill); err != nil {
		return err
	}
	// Index the kept samples' lines so that any sample can be read back
	// with one ReadAt: memory is 16 bytes per sample, not the plan itself.
	err = readSpill(scan.spill, func(_ *plannedSample, planIdx int64, at spillLine) error {
		if planIdx >= 0 {
			l.lines = append(l.lines, at)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.log.Warn("LIVE DECODING: serving samples decoded on the fly from the source; this is a development fallback, slow and not what training should read",
		"source", b.cfg.Resolve(b.cfg.Source.Root), "samples", len(l.lines), "would_be_version", b.id.String())
	return nil
}

// Len is the number of samples pass 1 kept.
func (l *Live) Len() int { return len(l.lines) }

// Layout is the shard layout the build would write.
func (l *Live) Layout() shard.Layout { return l.layout }

// ShardStarts is where the build's shards would start: every
// samples-per-shard samples.
func (l *Live) ShardStarts() []int {
	var starts []int
	for i := 0; i < len(l.lines); i += l.spp {
		starts = append(starts, i)
	}
	return starts
}

// Classes is the class table the build would record.
func (l *Live) Classes() []warehouse.Class { return l.classes.classes }

// Summary is pass 1's validation summary (late decode failures excluded).
func (l *Live) Summary() validate.Summary { return l.summary }

// Failed counts samples served empty because their full decode failed.
func (l *Live) Failed() int64 { return l.failed.Load() }

// ReadSampleInto decodes and transforms sample i into one batch row. It is
// safe for concurrent use.
func (l *Live) ReadSampleInto(i int, dst warehouse.SampleSlot) error {
	if i < 0 || i >= len(l.lines) {
		return fmt.Errorf("live: sample %d out of range [0, %d)", i, len(l.lines))
	}
	line := l.lines[i]
	raw := make([]byte, line.n)
	if _, err := l.spill.ReadAt(raw, line.off); err != nil {
		return fmt.Errorf("live: read back %s: %w", spillName, err)
	}
	p := new(plannedSample)
	if err := json.Unmarshal(raw, p); err != nil {
		return fmt.Errorf("live: read back %s: %w", spillName, err)
	}
	w, err := l.worker()
	if err != nil {
		return err
	}
	defer l.workers.Put(w)

	j := &job{p: p, image: dst.Image}
	l.b.transform(w.tr, j)
	var s shard.Sample
	if j.lateErr != nil {
		l.failed.Add(1)
		l.b.log.Warn("live: sample failed to decode; served empty (a build would skip it)",
			"sample", i, "image", p.ImagePath, "err", j.lateErr)
		clear(dst.Image)
		s = shard.Sample{Image: dst.Image, Meta: sampleMeta(p), Extras: p.Extras}
		s.Meta.BoxesDropped = uint32(len(p.Target) + p.Dropped)
	} else {
		l.classMu.Lock()
		s = shardSample(p, l.classes, dst.Image)
		l.classMu.Unlock()
	}
	return w.encode(l.layout, s, dst)
}

func (l *Live) worker() (*liveWorker, error) {
	if w, ok := l.workers.Get().(*liveWorker); ok {
		return w, nil
	}
	tr, err := transforms.NewTransformer(l.spec)
	if err != nil {
		return nil, err
	}
	return &liveWorker{tr: tr}, nil
}

// encode runs s through shard.Writer as a one-sample shard and copies the
// encoded boxes, mask, class indices, meta and extras into dst (the image
// is already there): the format's encoding exists once, in package shard.
func (w *liveWorker) encode(layout shard.Layout, s shard.Sample, dst warehouse.SampleSlot) error {
	w.mem.data = w.mem.data[:0]
	sw, err := shard.NewWriter(&w.mem, layout, 1)
	if err != nil {
		return err
	}
	if err := sw.Append(s); err != nil {
		return fmt.Errorf("live: %w", err)
	}
	if _, err := sw.Close(); err != nil {
		return err
	}
	r, err := shard.Parse(w.mem.data)
	if err != nil {
		return fmt.Errorf("live: encoded sample does not parse: %w", err)
	}
	copy(dst.Boxes, r.BoxesRaw(0))
	copy(dst.Mask, r.MaskRaw(0))
	n := copy(dst.ClassIndex, r.ClassIndex(0))
	for j := n; j < len(dst.ClassIndex); j++ {
		dst.ClassIndex[j] = -1
	}
	*dst.BoxCount = int32(n)
	*dst.Meta = r.Meta(0)
	copy(dst.Extras, r.Extras(0))
	return nil
}

// Close removes the plan. Samples cannot be read afterwards.
func (l *Live) Close() error {
	var errs []error
	if l.spill != nil {
		errs = append(errs, l.spill.Close())
	}
	errs = append(errs, os.RemoveAll(l.tmp))
	l.b.close()
	return errors.Join(errs...)
}

// memFile is an in-memory shard.File for one-sample shards.
type memFile struct{ data []byte }

func (m *memFile) Write(p []byte) (int, error) {
	m.data = append(m.data, p...)
	return len(p), nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.data) {
		m.data = append(m.data, make([]byte, end-len(m.data))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
