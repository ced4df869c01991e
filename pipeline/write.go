package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/shard"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// job is one planned sample travelling through pass 2.
type job struct {
	p        *plannedSample
	planIdx  int64  // position among the planned (kept) samples: decides the shard
	ord      int64  // position among the samples this run builds: the writer's order
	image    []byte // transformed CHW tensor
	lateErr  error  // full decode failed after pass 1 accepted the header
	fallback bool   // the JPEG decoder left it to image/jpeg (transforms.Counts)
	sums     channelSums
	readNs   int64
	xformNs  int64
}

// writeResult is what the shards of a version add up to.
type writeResult struct {
	shards  []warehouse.Shard
	samples int64
	sums    imageSums // image statistics over the kept samples
	bytes   int64
	spp     int
	// jpegFallbacks counts the samples decoded by image/jpeg, from the
	// shard records: the same whichever processes built the shards.
	jpegFallbacks int64
}

// shardPlan is the plan's division into shards.
func (b *builder) shardPlan(scan *scanResult) shardPlan {
	layout := shardLayout(b.cfg, b.extraF32)
	spp := shard.SamplesPerShard(layout, b.cfg.ShardTargetBytes())
	return shardPlan{version: b.id.String(), planSHA: scan.planSHA, spp: int64(spp), planned: scan.planned}
}

// shardsResult is what buildShards did.
type shardsResult struct {
	records map[int]*shardRecord // every shard of the range
	built   int
	kept    int
	samples int64 // samples written by this run
}

// buildShards makes the shards [lo, hi) of the plan in the staging
// directory: it takes each shard's lock (a second process on the same
// shards is refused), keeps every shard whose record and file check out
// (re-hashed) and builds the others in a worker pool. owner names this
// process in the locks.
func (b *builder) buildShards(ctx context.Context, st *staging, scan *scanResult, sp shardPlan, lo, hi int, owner string, rep *Report) (*shardsResult, error) {
	t0 := b.now()
	res := &shardsResult{records: map[int]*shardRecord{}}
	if lo >= hi {
		return res, nil
	}
	ks := make([]int, 0, hi-lo)
	for k := lo; k < hi; k++ {
		l, err := warehouse.LockOwned(st.lockPath(k), owner)
		if err != nil {
			return nil, err
		}
		defer l.Release()
		ks = append(ks, k)
	}
	var todo map[int]bool
	if b.opts.Clear {
		todo = map[int]bool{}
		for _, k := range ks {
			todo[k] = true
		}
	} else {
		done, problems, err := st.checkShards(ctx, ks, sp, true, b.workers)
		if err != nil {
			return nil, err
		}
		todo = map[int]bool{}
		for k, p := range problems {
			todo[k] = true
			if !errors.Is(p, fs.ErrNotExist) {
				b.log.Warn("rebuilding a staged shard", "shard", shardID(k), "why", p.Error())
			}
		}
		for k, r := range done {
			res.records[k] = r
		}
		res.kept = len(done)
		if res.kept > 0 {
			b.log.Info("kept complete shards of an earlier run", "shards", res.kept, "check_seconds", b.now().Sub(t0).Seconds())
		}
	}
	for k := range todo {
		if err := st.forget(k); err != nil {
			return nil, err
		}
	}
	if len(todo) == 0 {
		return res, nil
	}
	var toBuild int64
	for k := range todo {
		_, n := sp.span(k)
		toBuild += n
	}
	b.counters.Planned.Store(toBuild)
	built, err := b.writePass(ctx, st, scan, sp, todo, owner, rep)
	if err != nil {
		// Keep the complete shards for the rerun; the bytes of shards
		// without a record are of no use to it (and after ENOSPC, the
		// space is wanted).
		for k := range todo {
			if !fileExists(st.recordPath(k)) {
				_ = os.Remove(st.shardPath(k))
			}
		}
		return nil, err
	}
	for k, r := range built {
		res.records[k] = r
		res.samples += r.Samples
	}
	res.built = len(built)
	rep.Phases.Write = b.now().Sub(t0).Seconds()
	return res, nil
}

// writePass transforms the planned samples of the shards in todo in a
// bounded worker pool and writes each shard, in plan order, into the
// staging directory, then its record.
//
// Memory is bounded by the reorder window: at most `window` samples are
// between the producer and the writer, each owning one output buffer from
// a free list, so a slow sample holds back at most window-1 others.
func (b *builder) writePass(ctx context.Context, st *staging, scan *scanResult, sp shardPlan, todo map[int]bool, owner string, rep *Report) (map[int]*shardRecord, error) {
	spec := transformSpec(b.cfg)
	layout := shardLayout(b.cfg, b.extraF32)
	window := 4 * b.workers

	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan *job, b.workers)
	results := make(chan *job, window)
	slots := make(chan struct{}, window)
	buffers := make(chan []byte, window)
	getBuffer := func() []byte {
		select {
		case buf := <-buffers:
			return buf
		default:
			return make([]byte, spec.OutputBytes())
		}
	}

	var senders sync.WaitGroup
	senders.Add(1 + b.workers)
	go func() { senders.Wait(); close(results) }()

	// Producer: read the spill in order and hand the planned samples of
	// the shards to build to the workers, numbered in the order the
	// writer must put them back into.
	var forwarded int64
	g.Go(func() error {
		defer senders.Done()
		defer close(jobs)
		f, err := os.Open(scan.spill)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
		var planIdx int64
		for {
			p := new(plannedSample)
			if err := dec.Decode(p); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("read back %s: %w", spillName, err)
			}
			if !p.Kept {
				continue
			}
			idx := planIdx
			planIdx++
			if !todo[int(idx/sp.spp)] {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			j := &job{p: p, planIdx: idx, ord: forwarded, image: getBuffer()}
			forwarded++
			select {
			case jobs <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})

	// Workers: each owns its transformer and scratch buffers.
	workerStats := make([]workerTimes, b.workers)
	for w := range b.workers {
		g.Go(func() error {
			defer senders.Done()
			tr, err := transforms.NewTransformer(spec)
			if err != nil {
				return err
			}
			for j := range jobs {
				workerStats[w].read += b.transform(tr, j)
				select {
				case results <- j:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			workerStats[w].steps = tr.Timings()
			return nil
		})
	}

	// Writer: reorder results into plan order and write them.
	sink := &shardSink{st: st, layout: layout, sp: sp, owner: owner, scan: scan, counters: b.counters, background: g, records: map[int]*shardRecord{}}
	g.Go(func() error {
		defer sink.abort()
		pending := map[int64]*job{}
		next := int64(0)
		for j := range results {
			pending[j.ord] = j
			for {
				j, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if err := sink.put(j); err != nil {
					return err
				}
				buffers <- j.image
				<-slots
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if ctx.Err() == nil && next != forwarded {
			return fmt.Errorf("pipeline: wrote %d of %d samples", next, forwarded)
		}
		if sink.cur != nil {
			return fmt.Errorf("pipeline: %s ended after %d of its %d planned samples", shardID(sink.cur.k), sink.cur.processed, sink.cur.rec.Planned)
		}
		return nil
	})

	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, s := range workerStats {
		rep.Phases.Read += s.read.Seconds()
		rep.Phases.Decode += s.steps.Decode.Seconds()
		rep.Phases.Resize += s.steps.Resize.Seconds()
		rep.Phases.Normalize += s.steps.Normalize.Seconds()
	}
	return sink.records, nil
}

// workerTimes is one worker's time spent reading images and its
// Transformer's step times.
type workerTimes struct {
	read  time.Duration
	steps transforms.Timings
}

// transform reads and transforms one kept sample into j.image and returns
// the time spent reading. A failure here is a late decode_error for that
// sample, never a failed build.
func (b *builder) transform(tr *transforms.Transformer, j *job) (read time.Duration) {
	t0 := time.Now()
	im, err := b.src.ReadImage(&j.p.Sample)
	read = time.Since(t0)
	if err != nil {
		j.lateErr = err
		return read
	}
	var g transforms.Geometry
	if im.Encoded != nil {
		before := tr.Counts().JPEGFallback
		g, err = tr.Apply(im.Encoded, j.image)
		j.fallback = tr.Counts().JPEGFallback > before
	} else {
		g, err = tr.ApplyRGB(im.Pixels, im.Width, im.Height, im.Stride, j.image)
	}
	if err != nil {
		j.lateErr = err
		return read
	}
	if g != j.p.Geometry {
		j.lateErr = fmt.Errorf("decoded image is %dx%d but its header said %dx%d", g.SrcW, g.SrcH, j.p.Geometry.SrcW, j.p.Geometry.SrcH)
		return read
	}
	j.sums = contentSums(j.image, tr.Spec(), g)
	return read
}

const shardDir = "shards"

// shardSink writes ordered samples into the staging directory's shards,
// each followed by its record.
type shardSink struct {
	st       *staging
	layout   shard.Layout
	sp       shardPlan
	owner    string
	scan     *scanResult
	counters *Counters

	// background runs the fsync and close of finished shards and writes
	// their records, so their writeback overlaps the transform of the next
	// ones.
	background *errgroup.Group

	cur     *shardInProgress
	mu      sync.Mutex
	records map[int]*shardRecord
}

// shardInProgress is the shard the sink is filling.
type shardInProgress struct {
	k         int
	rec       *shardRecord
	processed int64 // planned samples seen, written or late
	w         *shard.Writer
	f         *os.File
}

func (s *shardSink) put(j *job) error {
	k := int(j.planIdx / s.sp.spp)
	if s.cur == nil {
		first, n := s.sp.span(k)
		if j.planIdx != first {
			return fmt.Errorf("pipeline: %s starts at planned sample %d, want %d", shardID(k), j.planIdx, first)
		}
		s.cur = &shardInProgress{k: k, rec: &shardRecord{
			Format: recordFormat, Version: s.sp.version, PlanSHA256: s.sp.planSHA, Shard: k,
			FirstPlanned: first, Planned: n, Late: []lateFailure{}, BuiltBy: s.owner,
		}}
	}
	c := s.cur
	if j.fallback {
		c.rec.JPEGFallbacks++
	}
	if k != c.k {
		return fmt.Errorf("pipeline: planned sample %d reached %s before %s was complete", j.planIdx, shardID(k), shardID(c.k))
	}
	if j.lateErr != nil {
		c.rec.Late = append(c.rec.Late, lateFailure{Seq: j.p.Seq, Error: j.lateErr.Error()})
	} else if err := s.append(c, j); err != nil {
		return err
	}
	c.processed++
	if c.processed == c.rec.Planned {
		s.cur = nil
		return s.finish(c)
	}
	return nil
}

// append writes one transformed sample into shard c, creating its file on
// the first sample: it declares every planned sample of the shard, and a
// late failure leaves it short (shard.Writer rewrites the count on Close).
func (s *shardSink) append(c *shardInProgress, j *job) error {
	if c.w == nil {
		f, err := os.Create(s.st.shardPath(c.k))
		if err != nil {
			return err
		}
		w, err := shard.NewWriter(f, s.layout, int(c.rec.Planned))
		if err != nil {
			f.Close()
			return err
		}
		c.w, c.f = w, f
	}
	p := j.p
	boxes := make([][4]float32, len(p.Target))
	classes := make([]int32, len(p.Target))
	for i, t := range p.Target {
		boxes[i] = t.Box
		idx, _ := s.scan.classes.lookup(t.Class)
		classes[i] = int32(idx)
	}
	g := p.Geometry
	err := c.w.Append(shard.Sample{
		Image: j.image, Boxes: boxes, ClassIndex: classes, Extras: p.Extras,
		Meta: shard.Meta{
			SourceIndex: uint32(p.SourceIndex), FrameID: p.Frame, InputSeq: uint64(p.Seq),
			UnixTimeNs: p.UnixTimeNs, SimTime: p.SimTime,
			SrcWidth: uint32(g.SrcW), SrcHeight: uint32(g.SrcH), ResizedWidth: uint32(g.NewW), ResizedHeight: uint32(g.NewH),
			PadX: uint32(g.PadX), PadY: uint32(g.PadY), ScaleX: float32(g.ScaleX), ScaleY: float32(g.ScaleY),
			BoxesDropped: uint32(p.Dropped),
		},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", shardID(c.k), err)
	}
	c.rec.Samples++
	c.rec.Sums.add(j.sums)
	s.counters.Written.Add(1)
	s.counters.Transformed.Add(1)
	return nil
}

// finish closes shard c and, in the background, fsyncs it and writes its
// record: the record exists only once the shard is durable.
func (s *shardSink) finish(c *shardInProgress) error {
	if c.w != nil {
		res, err := c.w.Close()
		if err != nil {
			c.f.Close()
			return fmt.Errorf("%s: %w", shardID(c.k), err)
		}
		c.rec.Bytes, c.rec.SHA256 = res.Bytes, fmt.Sprintf("%x", res.SHA256)
		s.counters.BytesWritten.Add(res.Bytes)
	}
	f := c.f
	c.f = nil
	s.background.Go(func() error {
		if f != nil {
			err := f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", shardID(c.k), err)
			}
		}
		if err := s.st.writeRecord(c.rec); err != nil {
			return fmt.Errorf("%s record: %w", shardID(c.k), err)
		}
		s.mu.Lock()
		s.records[c.k] = c.rec
		s.mu.Unlock()
		return nil
	})
	return nil
}

// abort releases the open shard after a failure; its file stays without
// a record, so the next run builds it again.
func (s *shardSink) abort() {
	if s.cur != nil && s.cur.f != nil {
		s.cur.f.Close()
	}
}

// assemble turns the shard records of a complete plan into the version in
// tmp: the shard files are linked in from the staging directory, and
// samples.jsonl, the late failures in the summary and the image statistics
// are derived from the plan and the records, in plan order. The records
// decide everything, so the result does not depend on which processes
// built which shards.
func (b *builder) assemble(ctx context.Context, tmp string, st *staging, scan *scanResult, sp shardPlan, records map[int]*shardRecord) (*writeResult, error) {
	out := &writeResult{spp: int(sp.spp)}
	n := sp.shards()
	late := map[int64]string{}
	if err := os.MkdirAll(filepath.Join(tmp, shardDir), 0o755); err != nil {
		return nil, err
	}
	l := shardLayout(b.cfg, b.extraF32)
	for k := range n {
		r := records[k]
		if r == nil {
			return nil, fmt.Errorf("pipeline: no record of %s", shardID(k))
		}
		for _, f := range r.Late {
			late[f.Seq] = f.Error
		}
		out.sums.merge(&r.Sums)
		out.jpegFallbacks += r.JPEGFallbacks
		if r.Samples == 0 {
			continue // every planned sample failed late: no file
		}
		rel := shardDir + "/" + shardID(k) + ".twh"
		if err := linkOrCopy(st.shardPath(k), filepath.Join(tmp, filepath.FromSlash(rel))); err != nil {
			return nil, err
		}
		out.shards = append(out.shards, warehouse.Shard{
			ID: shardID(k), RelativePath: rel, ShardVersion: uint32(l.Version()),
			FirstSample: out.samples, Samples: r.Samples,
			Width: l.Width, Height: l.Height, Channels: l.Channels, MaxBoxes: l.MaxBoxes,
			DType: l.DType.String(), Endianness: "Little", Bytes: r.Bytes, ChecksumSHA256: r.SHA256,
		})
		out.samples += r.Samples
		out.bytes += r.Bytes
	}

	f, err := os.Create(filepath.Join(tmp, warehouse.SamplesName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(bw)
	spill, err := os.Open(scan.spill)
	if err != nil {
		return nil, err
	}
	defer spill.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(spill, 1<<20))
	var planIdx, index, inShard, lateSeen int64
	for {
		p := new(plannedSample)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("read back %s: %w", spillName, err)
		}
		rec := SampleRecord{
			Seq: p.Seq, Source: p.Source, SourceIndex: p.SourceIndex, Frame: p.Frame,
			UnixTimeNs: p.UnixTimeNs, SimTime: p.SimTime, LabelPath: p.LabelPath, ImagePath: p.ImagePath,
			Width: p.Width, Height: p.Height, Reasons: p.Reasons, Index: -1, ShardIndex: -1,
		}
		if rec.Reasons == nil {
			rec.Reasons = []validate.Reason{}
		}
		if p.Kept {
			if planIdx%sp.spp == 0 {
				inShard = 0
			}
			k := int(planIdx / sp.spp)
			planIdx++
			if msg, ok := late[p.Seq]; ok {
				lateSeen++
				rec.Reasons = addReason(rec.Reasons, validate.ReasonDecodeError)
				rec.Error = msg
				if err := scan.summary.RecordLate(int(p.SourceIndex), validate.ReasonDecodeError); err != nil {
					return nil, err
				}
			} else {
				classes := make([]int32, len(p.Target))
				for i, t := range p.Target {
					idx, _ := scan.classes.lookup(t.Class)
					classes[i] = int32(idx)
				}
				g := p.Geometry
				rec.Kept = true
				rec.Shard = shardID(k)
				rec.ShardIndex = inShard
				rec.Index = index
				rec.BoxCount = len(p.Target)
				rec.ClassIndex = classes
				rec.Letterbox = &Letterbox{ScaleX: g.ScaleX, ScaleY: g.ScaleY, ResizedWidth: g.NewW, ResizedHeight: g.NewH, PadX: g.PadX, PadY: g.PadY}
				inShard++
				index++
			}
		}
		if err := enc.Encode(rec); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if planIdx != sp.planned || index != out.samples || lateSeen != int64(len(late)) {
		return nil, fmt.Errorf("pipeline: the shard records do not match the plan: %d planned samples (want %d), %d written (records: %d), %d late (records: %d)",
			planIdx, sp.planned, index, out.samples, lateSeen, len(late))
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Remove(scan.spill); err != nil {
		return nil, err
	}
	return out, nil
}

// linkOrCopy puts the staged shard src at dst: a hard link (the staging
// directory is beside the version, on the same filesystem), or a copy
// where the filesystem refuses links.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
