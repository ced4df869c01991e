package wshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"warehouse-etl/internal/membudget"
	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

// maxOpenFrameFiles bounds the episode files ReadImage keeps open. Workers
// take samples in scan order, so only the one or two episodes at the front
// of the pipeline are in use at a time.
const maxOpenFrameFiles = 8

// frameCache keeps the episode files ReadImage reads frames from open,
// with their camera blocks decoded once. Workers call ReadImage
// concurrently: files are reference counted (a reference lasts until the
// caller releases the image, whose pixels may be the cached block itself)
// and only evicted when unused.
//
// A block stays cached until all its frames were read, whatever its size,
// unless the build's memory budget runs short (SetMemoryBudget: a
// reservation waits, or a release finds one waiting) or, without a
// budget, another block needs room beyond the cache's own limit. Each
// sample is read once per build, in scan order, so each block is
// decompressed once per build as long as it fits the budget: a 258 MB
// block of 86 frames was decompressed for every frame when eviction
// happened on each release.
type frameCache struct {
	s     *Source
	limit int64 // FrameCacheBytes: raw blocks above it are read by range

	mu     sync.Mutex
	budget *membudget.Budget // nil: no build budget, limit alone
	files  map[string]*frameFile
	order  []*frameFile // least recently used first
	used   int64        // bytes of cached blocks
	loads  int          // blocks read whole (tests)
}

// frameFile is one open episode file and its camera channel.
type frameFile struct {
	rel  string
	refs int   // guarded by frameCache.mu
	size int64 // cached block bytes reserved in the budget, guarded by frameCache.mu
	read int   // frames read, guarded by frameCache.mu: all read, the file is done

	open sync.Once
	ep   *Episode
	img  imageChannel
	err  error

	load     sync.Once
	block    []byte // the whole camera block, CRC-checked; nil when read by range
	blockErr error
}

func newFrameCache(s *Source) *frameCache {
	return &frameCache{s: s, limit: s.opts.FrameCacheBytes, files: map[string]*frameFile{}}
}

// SetMemoryBudget makes the camera blocks ReadImage decodes come out of
// the build's memory budget: a block is reserved before it is read or
// decompressed (a block larger than the whole budget fails its frames at
// once, naming both sizes), stays cached until all its frames were read,
// and unused cached blocks are given back when the budget runs short.
// nil detaches the budget (and gives back what the cache holds).
func (s *Source) SetMemoryBudget(b *membudget.Budget) {
	c := s.frames
	c.evict(func(*frameFile) bool { return true })
	c.mu.Lock()
	c.budget = b
	c.mu.Unlock()
	if b != nil {
		b.OnPressure(func() { c.evict(func(*frameFile) bool { return true }) })
	}
}

// acquire returns rel's entry, opened, with a reference taken.
func (c *frameCache) acquire(rel string) *frameFile {
	c.mu.Lock()
	f := c.files[rel]
	if f == nil {
		f = &frameFile{rel: rel}
		c.files[rel] = f
	} else {
		c.order = slices.DeleteFunc(c.order, func(g *frameFile) bool { return g == f })
	}
	c.order = append(c.order, f)
	f.refs++
	c.mu.Unlock()
	c.evict(func(*frameFile) bool { return len(c.order) > maxOpenFrameFiles })
	f.open.Do(func() {
		ep, err := OpenEpisode(c.s.abs(rel), rel, c.s.opts.Limits)
		if err != nil {
			f.err = err
			return
		}
		img, err := ep.imageChannel(c.s.camera)
		if err != nil {
			ep.Close()
			f.err = err
			return
		}
		f.ep, f.img = ep, img
	})
	return f
}

// release drops a reference taken for one frame (read: it was read). A
// file stays cached until all its frames were read (each sample is read
// once per build, in scan order); every unused file is evicted when a
// reservation of the budget is waiting for memory.
func (c *frameCache) release(f *frameFile, read bool) {
	c.mu.Lock()
	f.refs--
	if read {
		f.read++
	}
	b := c.budget
	c.mu.Unlock()
	if b.Waiting() {
		c.evict(func(*frameFile) bool { return true })
		return
	}
	c.evict(func(g *frameFile) bool { return g == f && f.ep != nil && f.read >= f.ep.Meta.Length })
}

// evict closes unused files, least recently used first, while more(the
// next one) says so, and gives their blocks back to the budget.
func (c *frameCache) evict(more func(*frameFile) bool) {
	c.mu.Lock()
	b := c.budget
	var freed int64
	for i := 0; i < len(c.order); {
		g := c.order[i]
		if g.refs > 0 || !more(g) {
			i++
			continue
		}
		c.order = slices.Delete(c.order, i, i+1)
		delete(c.files, g.rel)
		c.used -= g.size
		freed += g.size
		g.size = 0
		if g.ep != nil {
			g.ep.Close()
		}
	}
	c.mu.Unlock()
	b.ReleaseGarbage(freed)
}

// errBlockBudget is wrapped by a camera block refused by the memory budget.
var errBlockBudget = errors.New("camera block does not fit the memory budget")

// frame returns the stored bytes of one frame. The first call per file
// reads the camera block: whole (and CRC-checked) when it is compressed or
// fits the cache's limit, otherwise its CRC is streamed once and frames
// are read by range.
func (c *frameCache) frame(f *frameFile, step int) ([]byte, error) {
	f.load.Do(func() { f.block, f.blockErr = c.loadBlock(f) })
	if f.blockErr != nil {
		return nil, f.blockErr
	}
	n := f.img.frameBytes()
	if f.block != nil {
		return f.block[step*n : (step+1)*n : (step+1)*n], nil
	}
	buf := make([]byte, n)
	if err := f.ep.Container().ReadRange(f.img.entry, int64(step)*int64(n), buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// loadBlock reads f's camera block whole, or only checks it when it is
// raw and larger than the cache's limit. Room is made first: unused files
// beyond the limit are evicted, and under a budget the block's bytes
// (original size, and the stored bytes while a compressed block is
// decoded) are reserved before anything is read.
func (c *frameCache) loadBlock(f *frameFile) ([]byte, error) {
	e := f.img.entry
	r := f.ep.Container()
	if e.Compression() == container.CompressNone && int64(e.OrigSize) > c.limit {
		return nil, r.Verify(e)
	}
	size := int64(e.OrigSize)
	c.mu.Lock()
	b := c.budget
	c.mu.Unlock()
	if b == nil {
		// Without a build budget the cache keeps to its own limit.
		c.evict(func(*frameFile) bool { return c.used+size > c.limit })
	}
	stored := int64(0)
	if e.Compression() != container.CompressNone {
		stored = int64(e.DiskSize)
	}
	if limit := r.Limits().MaxBlockBytes; size > limit || stored > limit {
		return r.ReadBlock(e) // refused by the container's own limit, with its reason
	}
	if err := b.Acquire(context.Background(), size+stored); err != nil {
		return nil, fmt.Errorf("wshard: %s: block %s of %d bytes (%d stored): %w: %w", r.File(), e.Name, size, e.DiskSize, errBlockBudget, err)
	}
	block, err := r.ReadBlock(e)
	b.ReleaseGarbage(stored)
	if err != nil {
		b.Release(size)
		return nil, err
	}
	c.mu.Lock()
	f.size = size
	c.used += size
	c.loads++
	c.mu.Unlock()
	return block, nil
}

// ReadImage returns a sample's frame as packed RGB, reading only its
// episode's camera block (see frameCache). The image holds a reference to
// the cached block until its Release is called. Safe for concurrent use.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	i := strings.LastIndexByte(smp.Locator, '#')
	if i < 0 {
		return sources.Image{}, fmt.Errorf("wshard: locator %q is not <file>#<step>", smp.Locator)
	}
	rel := smp.Locator[:i]
	step, err := strconv.Atoi(smp.Locator[i+1:])
	if err != nil {
		return sources.Image{}, fmt.Errorf("wshard: locator %q: %v", smp.Locator, err)
	}
	f := s.frames.acquire(rel)
	im, err := s.readFrame(f, smp, step)
	if err != nil || im.Release == nil {
		s.frames.release(f, err == nil)
	}
	return im, err
}

// readFrame is ReadImage's work on an acquired file. Frames that alias the
// cached block get a Release that drops the reference.
func (s *Source) readFrame(f *frameFile, smp *sources.Sample, step int) (sources.Image, error) {
	rel := f.rel
	if f.err != nil {
		return sources.Image{}, f.err
	}
	if step < 0 || step >= f.ep.Meta.Length {
		return sources.Image{}, fmt.Errorf("wshard: %s: step %d outside length_T %d", rel, step, f.ep.Meta.Length)
	}
	if f.img.W != smp.Width || f.img.H != smp.Height {
		return sources.Image{}, fmt.Errorf("wshard: %s: frames are %dx%d, the scan saw %dx%d", rel, f.img.W, f.img.H, smp.Width, smp.Height)
	}
	raw, err := s.frames.frame(f, step)
	if err != nil {
		return sources.Image{}, err
	}
	im := sources.Image{Pixels: toRGB(raw, f.img.C), Width: f.img.W, Height: f.img.H, Stride: 3 * f.img.W}
	if f.img.C == 3 && f.block != nil {
		var once sync.Once
		im.Release = func() { once.Do(func() { s.frames.release(f, true) }) }
	}
	return im, nil
}
