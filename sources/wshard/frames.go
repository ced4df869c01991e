package wshard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

// maxOpenFrameFiles bounds the episode files ReadImage keeps open. Workers
// take samples in scan order, so only the one or two episodes at the front
// of the pipeline are in use at a time.
const maxOpenFrameFiles = 8

// frameCache keeps the episode files ReadImage reads frames from open,
// with their camera blocks decoded once, within a byte budget. Workers call
// ReadImage concurrently: files are reference counted and only evicted
// when unused.
type frameCache struct {
	s      *Source
	budget int64

	mu    sync.Mutex
	files map[string]*frameFile
	order []*frameFile // least recently used first
	used  int64        // bytes of cached blocks
}

// frameFile is one open episode file and its camera channel.
type frameFile struct {
	rel  string
	refs int   // guarded by frameCache.mu
	size int64 // cached block bytes, guarded by frameCache.mu

	open sync.Once
	ep   *Episode
	img  imageChannel
	err  error

	load     sync.Once
	block    []byte // the whole camera block, CRC-checked; nil when read by range
	blockErr error
}

func newFrameCache(s *Source) *frameCache {
	return &frameCache{s: s, budget: s.opts.FrameCacheBytes, files: map[string]*frameFile{}}
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

// release drops a reference and evicts unused files beyond the budget.
func (c *frameCache) release(f *frameFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f.refs--
	for i := 0; i < len(c.order) && (c.used > c.budget || len(c.order) > maxOpenFrameFiles); {
		g := c.order[i]
		if g.refs > 0 {
			i++
			continue
		}
		c.order = slices.Delete(c.order, i, i+1)
		delete(c.files, g.rel)
		c.used -= g.size
		if g.ep != nil {
			g.ep.Close()
		}
	}
}

// frame returns the stored bytes of one frame. The first call per file
// reads the camera block: whole (and CRC-checked) when it is compressed or
// fits the budget, otherwise its CRC is streamed once and frames are read
// by range.
func (c *frameCache) frame(f *frameFile, step int) ([]byte, error) {
	f.load.Do(func() {
		e := f.img.entry
		r := f.ep.Container()
		if e.Compression() == container.CompressNone && int64(e.OrigSize) > c.budget {
			f.blockErr = r.Verify(e)
			return
		}
		f.block, f.blockErr = r.ReadBlock(e)
		c.mu.Lock()
		f.size = int64(len(f.block))
		c.used += f.size
		c.mu.Unlock()
	})
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

// ReadImage returns a sample's frame as packed RGB, reading only its
// episode's camera block (see frameCache). Safe for concurrent use.
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
	defer s.frames.release(f)
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
	return sources.Image{Pixels: toRGB(raw, f.img.C), Width: f.img.W, Height: f.img.H, Stride: 3 * f.img.W}, nil
}
