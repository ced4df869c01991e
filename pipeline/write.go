package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// job is one sample travelling through pass 2. Every input sample, kept or
// not, passes the ordered writer so samples.jsonl lists them all in order.
type job struct {
	p       *plannedSample
	image   []byte // transformed CHW tensor; nil for skipped samples
	lateErr error  // full decode failed after pass 1 accepted the header
	sums    channelSums
	readNs  int64
	xformNs int64
}

// writeResult is what pass 2 produced.
type writeResult struct {
	shards  []warehouse.Shard
	samples int64
	sums    channelSums // image statistics over the kept samples
	bytes   int64
	spp     int
}

// writePass transforms the kept samples in a bounded worker pool and writes
// every sample, in scan order, to the shards and samples.jsonl.
//
// Memory is bounded by the reorder window: at most `window` samples are
// between the producer and the writer, each owning one output buffer from
// a free list, so a slow sample holds back at most window-1 others.
func (b *builder) writePass(ctx context.Context, tmp string, scan *scanResult, rep *Report) (*writeResult, error) {
	t0 := b.now()
	spec := transformSpec(b.cfg)
	layout := shardLayout(b.cfg, b.extraF32)
	spp := shard.SamplesPerShard(layout, b.cfg.ShardTargetBytes())
	window := 4 * b.workers
	if err := os.MkdirAll(filepath.Join(tmp, shardDir), 0o755); err != nil {
		return nil, err
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

	// Producer: read the spill in order; skipped samples go straight to
	// the writer, kept ones to the workers.
	g.Go(func() error {
		defer senders.Done()
		defer close(jobs)
		f, err := os.Open(scan.spill)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
		for {
			p := new(plannedSample)
			if err := dec.Decode(p); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("read back %s: %w", spillName, err)
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			j := &job{p: p}
			out := results
			if p.Kept {
				j.image = getBuffer()
				out = jobs
			}
			select {
			case out <- j:
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
			workerStats[w].counts = tr.Counts()
			return nil
		})
	}

	// Writer: reorder results into scan order and write them.
	out := &writeResult{spp: spp}
	g.Go(func() error {
		sw, err := newShardSink(tmp, layout, spp, scan, out, b.counters)
		if err != nil {
			return err
		}
		sw.background = g
		defer sw.abort()
		pending := map[int64]*job{}
		next := int64(0)
		for j := range results {
			pending[j.p.Seq] = j
			for {
				j, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if err := sw.put(j); err != nil {
					return err
				}
				if j.image != nil {
					buffers <- j.image
				}
				<-slots
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if next != scan.inputs {
			return fmt.Errorf("pipeline: wrote %d of %d samples", next, scan.inputs)
		}
		return sw.close()
	})

	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := os.Remove(scan.spill); err != nil {
		return nil, err
	}
	for _, s := range workerStats {
		rep.Phases.Read += s.read.Seconds()
		rep.Phases.Decode += s.steps.Decode.Seconds()
		rep.Phases.Resize += s.steps.Resize.Seconds()
		rep.Phases.Normalize += s.steps.Normalize.Seconds()
		rep.JPEGFallbacks += s.counts.JPEGFallback
	}
	rep.Phases.Write = b.now().Sub(t0).Seconds()
	return out, nil
}

// workerTimes is one worker's time spent reading images and its
// Transformer's step times and decoder path counts.
type workerTimes struct {
	read   time.Duration
	steps  transforms.Timings
	counts transforms.Counts
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
		g, err = tr.Apply(im.Encoded, j.image)
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

// shardSink writes ordered samples into shards and samples.jsonl.
type shardSink struct {
	tmp      string
	layout   shard.Layout
	spp      int
	scan     *scanResult
	out      *writeResult
	counters *Counters

	// background runs the fsync and close of finished shards, so their
	// writeback overlaps the transform of the next ones instead of all
	// landing in publish (whose fsync then finds them clean).
	background *errgroup.Group

	late    int64 // late failures so far
	cur     *shard.Writer
	curFile *os.File
	curID   string
	curN    int64

	samplesFile *os.File
	samplesBuf  *bufio.Writer
	samplesEnc  *json.Encoder
}

func newShardSink(tmp string, layout shard.Layout, spp int, scan *scanResult, out *writeResult, c *Counters) (*shardSink, error) {
	f, err := os.Create(filepath.Join(tmp, warehouse.SamplesName))
	if err != nil {
		return nil, err
	}
	s := &shardSink{tmp: tmp, layout: layout, spp: spp, scan: scan, out: out, counters: c, samplesFile: f}
	s.samplesBuf = bufio.NewWriterSize(f, 1<<20)
	s.samplesEnc = json.NewEncoder(s.samplesBuf)
	return s, nil
}

func (s *shardSink) put(j *job) error {
	p := j.p
	rec := SampleRecord{
		Seq: p.Seq, Source: p.Source, SourceIndex: p.SourceIndex, Frame: p.Frame,
		UnixTimeNs: p.UnixTimeNs, SimTime: p.SimTime, LabelPath: p.LabelPath, ImagePath: p.ImagePath,
		Width: p.Width, Height: p.Height, Reasons: p.Reasons, Index: -1, ShardIndex: -1,
	}
	if rec.Reasons == nil {
		rec.Reasons = []validate.Reason{}
	}
	if p.Kept && j.lateErr != nil {
		reason := validate.ReasonDecodeError
		rec.Reasons = addReason(rec.Reasons, reason)
		rec.Error = j.lateErr.Error()
		if err := s.scan.summary.RecordLate(int(p.SourceIndex), reason); err != nil {
			return err
		}
		s.late++
	}
	if p.Kept && j.lateErr == nil {
		if err := s.append(j, &rec); err != nil {
			return err
		}
	}
	return s.samplesEnc.Encode(rec)
}

// append writes one transformed sample into the current shard, opening
// the next shard when needed. A shard declares min(spp, samples still
// planned) up front; only the last one can receive fewer (a late failure
// after it was opened), which shard.Writer handles on Close.
func (s *shardSink) append(j *job, rec *SampleRecord) error {
	if s.cur == nil {
		k := len(s.out.shards)
		remaining := s.scan.planned - s.late - s.out.samples
		declared := min(int64(s.spp), remaining)
		s.curID = fmt.Sprintf("shard-%05d", k)
		f, err := os.Create(filepath.Join(s.tmp, shardDir, s.curID+".twh"))
		if err != nil {
			return err
		}
		w, err := shard.NewWriter(f, s.layout, int(declared))
		if err != nil {
			f.Close()
			return err
		}
		s.cur, s.curFile, s.curN = w, f, 0
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
	err := s.cur.Append(shard.Sample{
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
		return fmt.Errorf("%s: %w", s.curID, err)
	}
	rec.Kept = true
	rec.Shard = s.curID
	rec.ShardIndex = s.curN
	rec.Index = s.out.samples
	rec.BoxCount = len(boxes)
	rec.ClassIndex = classes
	rec.Letterbox = &Letterbox{ScaleX: g.ScaleX, ScaleY: g.ScaleY, ResizedWidth: g.NewW, ResizedHeight: g.NewH, PadX: g.PadX, PadY: g.PadY}
	s.curN++
	s.out.samples++
	s.out.sums.add(j.sums)
	s.counters.Written.Add(1)
	s.counters.Transformed.Add(1)
	if s.curN == int64(s.spp) {
		return s.closeShard()
	}
	return nil
}

func (s *shardSink) closeShard() error {
	res, err := s.cur.Close()
	if err != nil {
		s.curFile.Close()
		return fmt.Errorf("%s: %w", s.curID, err)
	}
	f, id := s.curFile, s.curID
	s.background.Go(func() error {
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		return nil
	})
	l := s.layout
	s.out.shards = append(s.out.shards, warehouse.Shard{
		ID: s.curID, RelativePath: shardDir + "/" + s.curID + ".twh", ShardVersion: uint32(shard.Version1),
		FirstSample: s.out.samples - int64(res.Samples), Samples: int64(res.Samples),
		Width: l.Width, Height: l.Height, Channels: l.Channels, MaxBoxes: l.MaxBoxes,
		DType: l.DType.String(), Endianness: "Little", Bytes: res.Bytes, ChecksumSHA256: fmt.Sprintf("%x", res.SHA256),
	})
	s.out.bytes += res.Bytes
	s.counters.BytesWritten.Add(res.Bytes)
	s.cur, s.curFile = nil, nil
	return nil
}

func (s *shardSink) close() error {
	if s.cur != nil {
		if err := s.closeShard(); err != nil {
			return err
		}
	}
	if err := s.samplesBuf.Flush(); err != nil {
		return err
	}
	err := s.samplesFile.Close()
	s.samplesFile = nil
	return err
}

// abort releases open files after a failure; the tmp dir is removed by
// the caller.
func (s *shardSink) abort() {
	if s.curFile != nil {
		s.curFile.Close()
	}
	if s.samplesFile != nil {
		s.samplesFile.Close()
	}
}
