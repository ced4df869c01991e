package warehouse

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/x448/float16"

	"warehouse-etl/shard"
)

// Shuffle says how an epoch orders the samples before they are cut into
// batches. The orders are a documented contract (docs/format/reading.md),
// reproducible in any language from (seed, epoch).
type Shuffle int

const (
	// ShuffleNone keeps the warehouse order: reads are fully sequential.
	ShuffleNone Shuffle = iota
	// ShuffleGlobal is a uniform permutation of all samples.
	ShuffleGlobal
	// ShuffleShards permutes the shards, then the samples inside each
	// shard: every batch reads from one or two shards, so reads stay
	// local (and sequential within a shard's mapping) while every epoch
	// still sees a different order.
	ShuffleShards
)

var shuffleNames = [...]string{"none", "global", "shard"}

func (s Shuffle) String() string {
	if s >= 0 && int(s) < len(shuffleNames) {
		return shuffleNames[s]
	}
	return fmt.Sprintf("Shuffle(%d)", int(s))
}

// ParseShuffle is the inverse of Shuffle.String.
func ParseShuffle(name string) (Shuffle, error) {
	for i, n := range shuffleNames {
		if n == name {
			return Shuffle(i), nil
		}
	}
	return 0, fmt.Errorf("shuffle %q: want none, global or shard", name)
}

// Remainder says what happens to the samples that do not fill a batch on
// every rank. Either way every rank gets the same number of full batches,
// which data-parallel training needs (a rank with one batch fewer would
// hang the others in the gradient all-reduce).
type Remainder int

const (
	// DropRemainder drops the tail of the epoch's order: every sample is
	// seen at most once per epoch, up to WorldSize*BatchSize-1 are not seen
	// in that epoch (a different tail each shuffled epoch).
	DropRemainder Remainder = iota
	// PadRemainder fills the last batches by wrapping around to the start
	// of the epoch's order: every sample is seen at least once and up to
	// WorldSize*BatchSize-1 are seen twice. Batch.Repeats counts them.
	PadRemainder
)

var remainderNames = [...]string{"drop", "pad"}

func (r Remainder) String() string {
	if r >= 0 && int(r) < len(remainderNames) {
		return remainderNames[r]
	}
	return fmt.Sprintf("Remainder(%d)", int(r))
}

// ParseRemainder is the inverse of Remainder.String.
func ParseRemainder(name string) (Remainder, error) {
	for i, n := range remainderNames {
		if n == name {
			return Remainder(i), nil
		}
	}
	return 0, fmt.Errorf("remainder %q: want drop or pad", name)
}

// BatchOptions configure one rank's batches of one epoch.
type BatchOptions struct {
	BatchSize int // samples per batch, >= 1
	Seed      uint64
	Epoch     int // >= 0; each epoch has its own order
	Rank      int // 0 <= Rank < WorldSize
	WorldSize int // data-parallel ranks; 0 means 1
	Shuffle   Shuffle
	Remainder Remainder
	// Prefetch is how many batches are filled ahead of the consumer; 0
	// means 2. Memory is (Prefetch+1) batch buffers.
	Prefetch int
	// Workers is how many goroutines fill batches; 0 means
	// min(GOMAXPROCS, 8). A batch is split into pieces of a few rows
	// that the workers fill at once, so workers beyond Prefetch are
	// not idle: on a machine with cores to spare a checked first epoch
	// spreads its CRC-32C over them without more batch memory.
	Workers int
	// StartPosition is the global position of the epoch order the batches
	// start at: 0, or where a job that is resumed stopped (Position; any
	// world size). See PlanOrder and reading.md, "Resuming".
	StartPosition int
	// ReadAhead is how many batches past the one being filled have their
	// shard byte ranges advised to the kernel (posix_fadvise WILLNEED,
	// readahead.go) once a share of the reads finds samples out of the
	// page cache; 0 is off.
	ReadAhead int
}

func (o *BatchOptions) resolve() error {
	if o.WorldSize == 0 {
		o.WorldSize = 1
	}
	if o.Prefetch == 0 {
		o.Prefetch = 2
	}
	if o.Workers == 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), maxDefaultWorkers)
	}
	switch {
	case o.BatchSize < 1:
		return fmt.Errorf("batch size %d: must be >= 1", o.BatchSize)
	case o.WorldSize < 1 || o.Rank < 0 || o.Rank >= o.WorldSize:
		return fmt.Errorf("rank %d of world size %d: want 0 <= rank < world size", o.Rank, o.WorldSize)
	case o.Epoch < 0:
		return fmt.Errorf("epoch %d: must be >= 0", o.Epoch)
	case o.StartPosition < 0:
		return fmt.Errorf("start position %d: must be >= 0", o.StartPosition)
	case o.Shuffle < ShuffleNone || o.Shuffle > ShuffleShards:
		return fmt.Errorf("unknown shuffle %v", o.Shuffle)
	case o.Remainder < DropRemainder || o.Remainder > PadRemainder:
		return fmt.Errorf("unknown remainder %v", o.Remainder)
	case o.Prefetch < 1 || o.Workers < 1:
		return fmt.Errorf("prefetch %d, workers %d: both must be >= 1", o.Prefetch, o.Workers)
	}
	return nil
}

// orderStream is the pseudo-random stream behind every shuffle: SplitMix64
// (Steele, Lea, Flood 2014) started from seed and epoch. It is written out
// here, not taken from math/rand, because the order is a cross-language
// contract: docs/format/reading.md and python/warehouse_etl/_order.py implement
// the same steps.
type orderStream struct{ state uint64 }

const golden = 0x9E3779B97F4A7C15

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func newOrderStream(seed uint64, epoch int) *orderStream {
	return &orderStream{state: seed ^ mix64(uint64(epoch)+golden)}
}

func (s *orderStream) next() uint64 {
	s.state += golden
	return mix64(s.state)
}

// below returns a uniform integer in [0, n), n >= 1, by Lemire's
// multiply-and-reject method (no modulo bias).
func (s *orderStream) below(n uint64) uint64 {
	hi, lo := bits.Mul64(s.next(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(s.next(), n)
		}
	}
	return hi
}

// shuffle is Fisher-Yates from the last element down.
func (s *orderStream) shuffle(a []int) {
	for i := len(a) - 1; i > 0; i-- {
		j := int(s.below(uint64(i + 1)))
		a[i], a[j] = a[j], a[i]
	}
}

// EpochOrder is the order in which one epoch visits samples 0..n-1, before
// it is cut into batches and split across ranks. shardStarts lists the first
// sample of each shard (ShuffleShards needs them); every rank computes the
// same order from the same (seed, epoch).
func EpochOrder(n int, shardStarts []int, shuffle Shuffle, seed uint64, epoch int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	s := newOrderStream(seed, epoch)
	switch shuffle {
	case ShuffleGlobal:
		s.shuffle(order)
	case ShuffleShards:
		shards := make([]int, len(shardStarts))
		for k := range shards {
			shards[k] = k
		}
		s.shuffle(shards)
		out := make([]int, 0, n)
		for _, k := range shards {
			end := n
			if k+1 < len(shardStarts) {
				end = shardStarts[k+1]
			}
			block := order[shardStarts[k]:end]
			s.shuffle(block)
			out = append(out, block...)
		}
		order = out
	}
	return order
}

// PlannedBatch is one batch of a rank's epoch: global sample indices, of
// which the last Repeats are wrap-around padding (PadRemainder).
type PlannedBatch struct {
	Indices []int
	Repeats int
}

// PlanBatches cuts the epoch's order into batches of BatchSize and deals
// them to ranks round robin: global batch t goes to rank t % WorldSize, so
// rank r gets batches r, r+W, r+2W, ... Every rank gets the same count:
// floor(n / (W*B)) with DropRemainder, ceil(n / (W*B)) with PadRemainder,
// where the missing tail positions repeat the order from its start.
func PlanBatches(n int, shardStarts []int, opts BatchOptions) ([]PlannedBatch, error) {
	if err := opts.resolve(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("the warehouse has no samples")
	}
	return PlanOrder(EpochOrder(n, shardStarts, opts.Shuffle, opts.Seed, opts.Epoch), opts)
}

// BatchSource is what batches are read from: an open warehouse (*Reader),
// or the live development source of package pipeline.
type BatchSource interface {
	Len() int
	Layout() shard.Layout
	// ShardStarts is the first sample of each shard, for ShuffleShards.
	ShardStarts() []int
	// ReadSampleInto writes sample i into one batch row. It must be safe
	// to call from several goroutines for different rows.
	ReadSampleInto(i int, dst SampleSlot) error
}

// runReader is a BatchSource that reads consecutive samples in one call
// (*Reader does). The iterator hands it every run of consecutive indices of
// a batch, which for ShuffleNone is the whole batch.
type runReader interface {
	// ReadRunInto reads samples first..first+n-1 into rows row..row+n-1
	// of b. It must be safe to call from several goroutines for
	// different rows.
	ReadRunInto(first, n int, b *Batch, row int) error
}

// SampleSlot is one row of a Batch, every slice exactly one sample long.
type SampleSlot struct {
	Image      []byte  // C*H*W elements of the dtype, little-endian
	Boxes      []byte  // max_boxes*4 elements of the dtype
	Mask       []byte  // max_boxes elements of the dtype
	ClassIndex []int32 // max_boxes; -1 for padding slots
	BoxCount   *int32  // real boxes
	Meta       *shard.Meta
	Extras     []float32 // extra_f32 values
}

// Batch is a batch in contiguous buffers, ready to hand to a framework in
// one piece: Images is [B][C][H][W], Boxes [B][max_boxes][4] and Mask
// [B][max_boxes], all little-endian in the warehouse dtype, byte for byte
// what the shards hold (torch.frombuffer/np.frombuffer take them as they
// are). A Batch from an iterator is valid until its next Next or Close.
type Batch struct {
	Epoch   int
	Number  int   // position in this rank's epoch, from 0
	Indices []int // global sample index of each row
	Repeats int   // the last Repeats rows are wrap-around padding
	Layout  shard.Layout

	Images     []byte
	Boxes      []byte
	Mask       []byte
	ClassIndex []int32      // [B][max_boxes], -1 padding
	BoxCount   []int32      // [B]
	Meta       []shard.Meta // [B]
	Extras     []float32    // [B][extra_f32]
}

// newBatch allocates the buffers of a batch of size rows. The byte buffers
// are 8-aligned so the typed views are valid. The images buffer is faulted
// in here in one call (prefault, huge pages where the kernel gives them on
// request): a fresh buffer otherwise costs one page fault per 4 KiB during
// the first epoch's reads, 12,000 faults for a process's first epoch of
// 600 384x384 u8 samples in batches of 32 against 2,800 with it.
func newBatch(l shard.Layout, size int) *Batch {
	d := l.DType.BoxDType().Size()
	b := &Batch{
		Layout:     l,
		Indices:    make([]int, size),
		Images:     alignedBytes(size * int(l.ImageBytes())),
		Boxes:      alignedBytes(size * l.MaxBoxes * 4 * d),
		Mask:       alignedBytes(size * l.MaxBoxes * d),
		ClassIndex: make([]int32, size*l.MaxBoxes),
		BoxCount:   make([]int32, size),
		Meta:       make([]shard.Meta, size),
		Extras:     make([]float32, size*l.ExtraF32),
	}
	prefault(b.Images)
	return b
}

func alignedBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

// Len is the number of rows.
func (b *Batch) Len() int { return len(b.Indices) }

// rows returns rows [j, j+n) of everything but the images, as shard.CopyRows
// fills them.
func (b *Batch) rows(j, n int) shard.Rows {
	l := b.Layout
	box, msk := l.MaxBoxes*4*l.DType.BoxDType().Size(), l.MaxBoxes*l.DType.BoxDType().Size()
	return shard.Rows{
		Boxes:      b.Boxes[j*box : (j+n)*box],
		Mask:       b.Mask[j*msk : (j+n)*msk],
		ClassIndex: b.ClassIndex[j*l.MaxBoxes : (j+n)*l.MaxBoxes],
		BoxCount:   b.BoxCount[j : j+n],
		Meta:       b.Meta[j : j+n],
		Extras:     b.Extras[j*l.ExtraF32 : (j+n)*l.ExtraF32],
	}
}

// batchPool keeps the buffers of a finished iterator for the next one, so
// that every epoch after the first writes into memory that is already
// faulted in instead of allocating, zeroing and faulting (Prefetch+1)
// batches again. It holds at most maxPooledBatches buffers, of one layout
// and size: those of the last iterator closed.
type batchPool struct {
	mu   sync.Mutex
	free []*Batch
}

const maxPooledBatches = 8

// get returns a pooled buffer of layout l and size rows, or a new one.
func (p *batchPool) get(l shard.Layout, size int) *Batch {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		for k := len(p.free) - 1; k >= 0; k-- {
			if b := p.free[k]; b.Layout == l && len(b.Indices) == size {
				p.free = append(p.free[:k], p.free[k+1:]...)
				return b
			}
		}
	}
	return newBatch(l, size)
}

// put keeps bs for later, replacing buffers of another shape.
func (p *batchPool) put(bs []*Batch) {
	if p == nil || len(bs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) > 0 && (p.free[0].Layout != bs[0].Layout || len(p.free[0].Indices) != len(bs[0].Indices)) {
		p.free = nil
	}
	p.free = append(p.free, bs...)
	if len(p.free) > maxPooledBatches {
		p.free = p.free[len(p.free)-maxPooledBatches:]
	}
}

// drain drops every pooled buffer.
func (p *batchPool) drain() {
	p.mu.Lock()
	p.free = nil
	p.mu.Unlock()
}

// Slot returns row j's buffers.
func (b *Batch) Slot(j int) SampleSlot {
	l := b.Layout
	img, box, msk := int(l.ImageBytes()), l.MaxBoxes*4*l.DType.BoxDType().Size(), l.MaxBoxes*l.DType.BoxDType().Size()
	return SampleSlot{
		Image:      b.Images[j*img : (j+1)*img],
		Boxes:      b.Boxes[j*box : (j+1)*box],
		Mask:       b.Mask[j*msk : (j+1)*msk],
		ClassIndex: b.ClassIndex[j*l.MaxBoxes : (j+1)*l.MaxBoxes],
		BoxCount:   &b.BoxCount[j],
		Meta:       &b.Meta[j],
		Extras:     b.Extras[j*l.ExtraF32 : (j+1)*l.ExtraF32],
	}
}

// hostLittleEndian: typed views of the little-endian buffers are only
// valid in place on a little-endian host.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// ImagesF16 is Images as binary16 bit patterns: a view on little-endian
// hosts, a decoded copy elsewhere. It panics on an F32 batch.
func (b *Batch) ImagesF16() []uint16 {
	if b.Layout.DType != shard.F16 {
		panic("warehouse: ImagesF16 on a " + b.Layout.DType.String() + " batch")
	}
	if hostLittleEndian {
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b.Images))), len(b.Images)/2)
	}
	out := make([]uint16, len(b.Images)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b.Images[2*i:])
	}
	return out
}

// ImagesF32 is Images as float32: a view on little-endian hosts, a decoded
// copy elsewhere. It panics on an F16 batch.
func (b *Batch) ImagesF32() []float32 {
	if b.Layout.DType != shard.F32 {
		panic("warehouse: ImagesF32 on a " + b.Layout.DType.String() + " batch")
	}
	return littleFloat32s(b.Images)
}

// ImagesU8 is Images of a U8 batch: the resampled pixels, not normalized
// (see NormalizeImages). It panics on an F16 or F32 batch.
func (b *Batch) ImagesU8() []byte {
	if b.Layout.DType != shard.U8 {
		panic("warehouse: ImagesU8 on a " + b.Layout.DType.String() + " batch")
	}
	return b.Images
}

// NormalizeImages writes the batch's images as float32 into dst (grown to
// len [B][C][H][W] if short) and returns it: a U8 batch through table
// (Reader.NormalizeTable: bit for bit what an F32 build of the same config
// stores), an F16 batch decoded, an F32 batch copied.
func (b *Batch) NormalizeImages(dst []float32, table *[3][256]float32) []float32 {
	n := len(b.Images) / b.Layout.DType.Size()
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	switch b.Layout.DType {
	case shard.U8:
		plane := b.Layout.Width * b.Layout.Height
		for k := 0; k < n; k += plane {
			t := &table[(k/plane)%b.Layout.Channels%3]
			for x, v := range b.Images[k : k+plane] {
				dst[k+x] = t[v]
			}
		}
	case shard.F16:
		f16 := f16Decode()
		for k := range dst {
			dst[k] = f16[binary.LittleEndian.Uint16(b.Images[2*k:])]
		}
	default:
		copy(dst, littleFloat32s(b.Images))
	}
	return dst
}

// f16Decode decodes every binary16 bit pattern once.
var f16Decode = sync.OnceValue(func() []float32 {
	t := make([]float32, 1<<16)
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return t
})

// BoxesF32 decodes Boxes to float32, [B][max_boxes][4].
func (b *Batch) BoxesF32() []float32 { return decodeElements(b.Boxes, b.Layout.DType.BoxDType()) }

// MaskF32 decodes Mask to float32, [B][max_boxes].
func (b *Batch) MaskF32() []float32 { return decodeElements(b.Mask, b.Layout.DType.BoxDType()) }

func littleFloat32s(b []byte) []float32 {
	if hostLittleEndian {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	}
	return decodeElements(b, shard.F32)
}

// decodeElements converts little-endian elements of dtype d to float32.
func decodeElements(b []byte, d shard.DType) []float32 {
	size := d.Size()
	out := make([]float32, len(b)/size)
	for i := range out {
		e := b[i*size:]
		if d == shard.F16 {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(e)).Float32()
		} else {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(e))
		}
	}
	return out
}

// BatchIterator hands out one rank's batches of one epoch, in order, filled
// ahead by a few goroutines into a fixed set of reused buffers: memory is
// (Prefetch+1) batches whatever the warehouse size.
type BatchIterator struct {
	src     BatchSource
	runs    runReader // src, when it reads runs of samples; else nil
	pool    *batchPool
	buffers []*Batch // every buffer of this iterator, returned to pool on Close
	opts    BatchOptions
	plan    []PlannedBatch
	ctx     context.Context
	cancel  context.CancelFunc
	pending chan *batchJob // in batch order
	free    chan *Batch
	held    *Batch // the batch the caller has, returned to free on Next
	err     error  // sticky
	wg      sync.WaitGroup
	adviser adviser // read-ahead advice (readahead.go), used by dispatch only
}

// maxDefaultWorkers caps the default number of fill goroutines: a few
// cores copy and check as fast as memory delivers.
const maxDefaultWorkers = 8

// minPieceBytes is the least image bytes a piece of a batch carries, so
// that small samples are not handed out a row at a time (a variable for
// the tests, whose samples are a few bytes).
var minPieceBytes = 1 << 20

// batchJob is one batch being filled, in pieces (batchPiece): the worker
// that finishes its last piece closes done.
type batchJob struct {
	batch *Batch
	err   error // the first failed piece's error, in row order; set before done closes
	done  chan struct{}
	left  atomic.Int32 // pieces not finished
	errs  []error      // per piece
}

// batchPiece is rows [lo, hi) of a batch: the unit a worker fills.
type batchPiece struct {
	job    *batchJob
	k      int // piece number
	lo, hi int
}

// newBatchJob splits b into at most workers pieces of whole rows, each
// of at least minPieceBytes of images where the batch has them.
func newBatchJob(b *Batch, workers int) (*batchJob, []batchPiece) {
	n := b.Len()
	per := max((n+workers-1)/workers, 1)
	if img := int(b.Layout.ImageBytes()); img > 0 {
		per = max(per, (minPieceBytes+img-1)/img)
	}
	job := &batchJob{batch: b, done: make(chan struct{})}
	var pieces []batchPiece
	for lo := 0; lo < n; lo += per {
		pieces = append(pieces, batchPiece{job: job, k: len(pieces), lo: lo, hi: min(lo+per, n)})
	}
	job.errs = make([]error, len(pieces))
	job.left.Store(int32(len(pieces)))
	return job, pieces
}

// finish records piece k's outcome; the last piece to finish sets the
// job's error (the lowest piece's, which is what filling the rows in
// order would have met first) and closes done.
func (job *batchJob) finish(k int, err error) {
	job.errs[k] = err
	if job.left.Add(-1) != 0 {
		return
	}
	for _, e := range job.errs {
		if e != nil {
			job.err = e
			break
		}
	}
	close(job.done)
}

// Batches starts an iterator over one rank's batches of one epoch. Close it
// when done, even after io.EOF. The iterator fills each batch by runs of
// consecutive samples (ReadRunInto), and its buffers go back to the Reader
// on Close for the next iterator of the same batch size.
func (r *Reader) Batches(ctx context.Context, opts BatchOptions) (*BatchIterator, error) {
	return newBatchIterator(ctx, r, opts, &r.pool)
}

// NewBatchIterator is Batches for any BatchSource. For a *Reader it is
// Reader.Batches.
func NewBatchIterator(ctx context.Context, src BatchSource, opts BatchOptions) (*BatchIterator, error) {
	if r, ok := src.(*Reader); ok {
		return r.Batches(ctx, opts)
	}
	if m, ok := src.(*Mixture); ok {
		return m.Batches(ctx, opts)
	}
	return newBatchIterator(ctx, src, opts, nil)
}

func newBatchIterator(ctx context.Context, src BatchSource, opts BatchOptions, pool *batchPool) (*BatchIterator, error) {
	plan, err := planFor(src, opts)
	if err != nil {
		return nil, err
	}
	_ = opts.resolve() // planFor validated a copy
	ctx, cancel := context.WithCancel(ctx)
	it := &BatchIterator{
		src: src, pool: pool, opts: opts, plan: plan, ctx: ctx, cancel: cancel,
		pending: make(chan *batchJob, opts.Prefetch+1),
		free:    make(chan *Batch, opts.Prefetch+1),
	}
	it.runs, _ = src.(runReader)
	it.adviser = newAdviser(src, opts)
	for range opts.Prefetch + 1 {
		b := pool.get(src.Layout(), opts.BatchSize)
		it.buffers = append(it.buffers, b)
		it.free <- b
	}
	jobs := make(chan batchPiece)
	it.wg.Add(1 + opts.Workers)
	go it.dispatch(jobs)
	for range opts.Workers {
		go it.work(jobs)
	}
	return it, nil
}

// Len is the number of batches this rank gets in this epoch.
func (it *BatchIterator) Len() int { return len(it.plan) }

// dispatch assigns a free buffer to each planned batch in order and hands
// its pieces to the workers. A buffer becomes free when the caller moves
// past it, which is the prefetch bound. Batch t's pieces are all queued
// before batch t+1's, so the workers finish the batches in order.
func (it *BatchIterator) dispatch(jobs chan<- batchPiece) {
	defer it.wg.Done()
	defer close(it.pending)
	defer close(jobs)
	for t, p := range it.plan {
		var b *Batch
		select {
		case b = <-it.free:
		case <-it.ctx.Done():
			return
		}
		it.readAhead(t) // readahead.go
		b.Epoch, b.Number, b.Repeats = it.opts.Epoch, t, p.Repeats
		copy(b.Indices, p.Indices)
		job, pieces := newBatchJob(b, it.opts.Workers)
		it.pending <- job // never blocks: at most Prefetch+1 buffers exist
		for k, piece := range pieces {
			select {
			case jobs <- piece:
			case <-it.ctx.Done():
				for _, q := range pieces[k:] {
					job.finish(q.k, it.ctx.Err())
				}
				return
			}
		}
	}
}

func (it *BatchIterator) work(jobs <-chan batchPiece) {
	defer it.wg.Done()
	for piece := range jobs {
		piece.job.finish(piece.k, it.fill(piece.job.batch, piece.lo, piece.hi))
	}
}

// fill reads rows [lo, hi) of b.
func (it *BatchIterator) fill(b *Batch, lo, hi int) error {
	if it.runs != nil {
		return it.fillRuns(b, lo, hi)
	}
	for j := lo; j < hi; j++ {
		if err := it.ctx.Err(); err != nil {
			return err
		}
		if err := it.src.ReadSampleInto(b.Indices[j], b.Slot(j)); err != nil {
			return err
		}
	}
	return nil
}

// fillRuns reads each maximal run of consecutive sample indices of rows
// [lo, hi) of b with one ReadRunInto call.
func (it *BatchIterator) fillRuns(b *Batch, lo, hi int) error {
	idx := b.Indices[:hi]
	for j := lo; j < len(idx); {
		if err := it.ctx.Err(); err != nil {
			return err
		}
		n := 1
		for j+n < len(idx) && idx[j+n] == idx[j]+n {
			n++
		}
		if err := it.runs.ReadRunInto(idx[j], n, b, j); err != nil {
			return err
		}
		j += n
	}
	return nil
}

// Next returns the next batch, or io.EOF after the last one. The batch is
// valid until the following Next or Close. After an error every call
// returns it.
func (it *BatchIterator) Next() (*Batch, error) {
	if it.err != nil {
		return nil, it.err
	}
	if it.held != nil {
		it.free <- it.held // never blocks: the buffer came from free
		it.held = nil
	}
	var job *batchJob
	select {
	case j, ok := <-it.pending:
		if !ok {
			it.err = io.EOF
			if err := it.ctx.Err(); err != nil {
				it.err = err
			}
			return nil, it.err
		}
		job = j
	case <-it.ctx.Done():
		it.err = it.ctx.Err()
		return nil, it.err
	}
	select {
	case <-job.done:
	case <-it.ctx.Done():
		it.err = it.ctx.Err()
		return nil, it.err
	}
	if job.err != nil {
		it.err = job.err
		return nil, it.err
	}
	it.held = job.batch
	return job.batch, nil
}

// Close stops the prefetching goroutines and waits for them.
func (it *BatchIterator) Close() error {
	it.cancel()
	it.wg.Wait()
	if it.buffers != nil { // the workers are done: nothing writes them any more
		it.held = nil
		it.pool.put(it.buffers)
		it.buffers = nil
	}
	if it.err == nil || it.err == io.EOF {
		it.err = errors.New("warehouse: batch iterator closed")
	}
	return nil
}
