package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/outputroot"
	"warehouse-etl/shard"
	"warehouse-etl/transforms"
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
	reuse    reuseOutcome
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
	// shard receipts: the same whichever processes built the shards.
	jpegFallbacks int64
	reuse         reuseCounts // from the receipts too
	// shardSums are each shard's image sums, for shard_sums.json.
	shardSums []shardSumsEntry
}

// shardPlan is the plan's division into shards.
func (b *builder) shardPlan(scan *scanResult) shardPlan {
	layout := shardLayout(b.cfg, b.extraF32)
	spp := shard.SamplesPerShard(layout, b.cfg.ShardTargetBytes())
	return shardPlan{version: b.id.String(), planSHA: scan.planSHA, spp: int64(spp), planned: scan.planned}
}

// shardsResult is what the shards stage did.
type shardsResult struct {
	receipts map[int]*shardReceipt // every shard of the range
	built    int
	kept     int
	samples  int64 // samples written by this run
}

// shards is the stage that makes the shards [lo, hi) of plan sp in the
// staging directory st, each with its receipt: it takes each shard's lock
// (a second process on the same shards is refused), keeps every shard
// whose receipt and file check out (re-hashed) and transforms and writes
// the others in a worker pool (writePass). owner names this process in the
// locks; rep gets the write phase's times.
func (b *builder) shards(ctx context.Context, st *staging, scan *scanResult, sp shardPlan, lo, hi int, owner string, rep *Report) (*shardsResult, error) {
	t0 := b.now()
	res := &shardsResult{receipts: map[int]*shardReceipt{}}
	if lo >= hi {
		return res, nil
	}
	ks := make([]int, 0, hi-lo)
	for k := lo; k < hi; k++ {
		l, err := outputroot.LockOwned(st.lockPath(k), owner)
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
			res.receipts[k] = r
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
		// without a receipt are of no use to it (and after ENOSPC, the
		// space is wanted).
		for k := range todo {
			if !fileExists(st.receiptPath(k)) {
				_ = os.Remove(st.shardPath(k))
			}
		}
		return nil, err
	}
	for k, r := range built {
		res.receipts[k] = r
		res.samples += r.Samples
	}
	res.built = len(built)
	rep.Phases.Write = b.now().Sub(t0).Seconds()
	return res, nil
}

// writePass transforms the planned samples of the shards in todo in a
// bounded worker pool and writes each shard, in plan order, into the
// staging directory, then its receipt.
//
// Memory is bounded by the reorder window: at most `window` samples are
// between the producer and the writer, each owning one output buffer from
// a free list, so a slow sample holds back at most window-1 others.
func (b *builder) writePass(ctx context.Context, st *staging, scan *scanResult, sp shardPlan, todo map[int]bool, owner string, rep *Report) (map[int]*shardReceipt, error) {
	spec := transformSpec(b.cfg)
	layout := shardLayout(b.cfg, b.extraF32)
	window := 4 * b.workers
	mem, err := b.planMemory(window, spec.OutputBytes())
	if err != nil {
		return nil, err
	}
	reuse, err := b.openReuse(ctx, scan, sp, todo)
	if err != nil {
		return nil, err
	}
	defer reuse.close()
	linked, err := b.linkWholeShards(ctx, st, scan, sp, todo, reuse, owner) // reuse_link.go
	if err != nil {
		return nil, err
	}
	if len(linked) > 0 {
		rest := make(map[int]bool, len(todo))
		for k := range todo {
			if linked[k] == nil {
				rest[k] = true
			}
		}
		if len(rest) == 0 {
			return linked, nil
		}
		todo = rest
	}
	if s, ok := b.src.(budgeted); ok && mem.budget != nil {
		s.SetMemoryBudget(mem.budget)
		defer s.SetMemoryBudget(nil)
	}

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
		wanted := func(planIdx int64) bool { return todo[int(planIdx/sp.spp)] }
		return readSpillWanted(scan, wanted, func(p *plannedSample, planIdx int64) error {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			j := &job{p: p, planIdx: planIdx, ord: forwarded, image: getBuffer()}
			forwarded++
			select {
			case jobs <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		})
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
			mem.attach(ctx, tr)
			rr := reuse.reader(b.counters, b.log.Warn)
			defer rr.close()
			for j := range jobs {
				if !rr.copy(j) {
					workerStats[w].read += b.transform(tr, j)
					b.counters.Decoded.Add(1)
				}
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
	receipts := map[int]*shardReceipt{}
	for k, r := range linked {
		receipts[k] = r
	}
	sink := &shardSink{st: st, layout: layout, sp: sp, owner: owner, scan: scan, counters: b.counters, background: g, receipts: receipts}
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
			return fmt.Errorf("pipeline: %s ended after %d of its %d planned samples", shardID(sink.cur.k), sink.cur.processed, sink.cur.receipt.Planned)
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
	return sink.receipts, nil
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
	if im.Release != nil {
		defer im.Release()
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
	j.sums = transformSums(tr)
	return read
}

const shardDir = "shards"

// shardSink writes ordered samples into the staging directory's shards,
// each followed by its receipt.
type shardSink struct {
	st       *staging
	layout   shard.Layout
	sp       shardPlan
	owner    string
	scan     *scanResult
	counters *Counters

	// background runs the fsync and close of finished shards and writes
	// their receipts, so their writeback overlaps the transform of the next
	// ones.
	background *errgroup.Group

	cur      *shardInProgress
	mu       sync.Mutex
	receipts map[int]*shardReceipt
}

// shardInProgress is the shard the sink is filling.
type shardInProgress struct {
	k         int
	receipt   *shardReceipt
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
		s.cur = &shardInProgress{k: k, receipt: &shardReceipt{
			Format: receiptFormat, Version: s.sp.version, PlanSHA256: s.sp.planSHA, Shard: k,
			FirstPlanned: first, Planned: n, Late: []lateFailure{}, BuiltBy: s.owner,
		}}
	}
	c := s.cur
	if j.fallback {
		c.receipt.JPEGFallbacks++
	}
	c.receipt.Reuse.count(j)
	if k != c.k {
		return fmt.Errorf("pipeline: planned sample %d reached %s before %s was complete", j.planIdx, shardID(k), shardID(c.k))
	}
	if j.lateErr != nil {
		c.receipt.Late = append(c.receipt.Late, lateFailure{Seq: j.p.Seq, Error: j.lateErr.Error()})
	} else if err := s.append(c, j); err != nil {
		return err
	}
	c.processed++
	if c.processed == c.receipt.Planned {
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
		w, err := shard.NewWriter(fsfault.File{File: f}, s.layout, int(c.receipt.Planned))
		if err != nil {
			f.Close()
			return err
		}
		c.w, c.f = w, f
	}
	err := c.w.Append(shardSample(j.p, s.scan.classes, j.image))
	if err != nil {
		return fmt.Errorf("%s: %w", shardID(c.k), err)
	}
	c.receipt.Samples++
	c.receipt.Sums.add(j.sums)
	s.counters.Written.Add(1)
	s.counters.Transformed.Add(1)
	return nil
}

// shardSample is planned sample p as a shard stores it: image, its boxes
// with their class indices in t, its meta and extras.
func shardSample(p *plannedSample, t *classTable, image []byte) shard.Sample {
	boxes := make([][4]float32, len(p.Target))
	for i, b := range p.Target {
		boxes[i] = b.Box
	}
	return shard.Sample{Image: image, Boxes: boxes, ClassIndex: t.indices(p), Extras: p.Extras, Meta: sampleMeta(p)}
}

// indices is the class index of each of p's boxes.
func (t *classTable) indices(p *plannedSample) []int32 {
	out := make([]int32, len(p.Target))
	for i, b := range p.Target {
		idx, _ := t.lookup(b.Class)
		out[i] = int32(idx)
	}
	return out
}

// sampleMeta is the meta of planned sample p, as a shard stores it.
func sampleMeta(p *plannedSample) shard.Meta {
	g := p.Geometry
	return shard.Meta{
		SourceIndex: uint32(p.SourceIndex), FrameID: p.Frame, InputSeq: uint64(p.Seq),
		UnixTimeNs: p.UnixTimeNs, SimTime: p.SimTime,
		SrcWidth: uint32(g.SrcW), SrcHeight: uint32(g.SrcH), ResizedWidth: uint32(g.NewW), ResizedHeight: uint32(g.NewH),
		PadX: uint32(g.PadX), PadY: uint32(g.PadY), ScaleX: float32(g.ScaleX), ScaleY: float32(g.ScaleY),
		BoxesDropped: uint32(p.Dropped),
	}
}

// finish closes shard c and, in the background, fsyncs it and writes its
// receipt: the receipt exists only once the shard is durable.
func (s *shardSink) finish(c *shardInProgress) error {
	if c.w != nil {
		res, err := c.w.Close()
		if err != nil {
			c.f.Close()
			return fmt.Errorf("%s: %w", shardID(c.k), err)
		}
		c.receipt.Bytes, c.receipt.SHA256 = res.Bytes, fmt.Sprintf("%x", res.SHA256)
		s.counters.BytesWritten.Add(res.Bytes)
	}
	f := c.f
	c.f = nil
	s.background.Go(func() error {
		if f != nil {
			err := fsfault.SyncFile(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", shardID(c.k), err)
			}
		}
		if err := s.st.writeReceipt(c.receipt); err != nil {
			return fmt.Errorf("%s record: %w", shardID(c.k), err)
		}
		s.mu.Lock()
		s.receipts[c.k] = c.receipt
		s.mu.Unlock()
		return nil
	})
	return nil
}

// abort releases the open shard after a failure; its file stays without
// a receipt, so the next run builds it again.
func (s *shardSink) abort() {
	if s.cur != nil && s.cur.f != nil {
		s.cur.f.Close()
	}
}
