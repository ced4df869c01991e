package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/config"
	"warehouse-etl/sources"
	"warehouse-etl/transforms"
)

// IdentityFormat names the definition of a sample's input identity
// (docs/format/manifest.md, samples.jsonl "identity"): bump it whenever
// what the digest covers changes, so that no identity of the old
// definition matches one of the new.
const IdentityFormat = "warehouse-etl/sample-identity/1"

// pixelRecipe is every part of the recipe that decides a sample's image
// tensor, given its input bytes: the target size, resize mode, pad value,
// normalisation, dtype, the decoder identity (which names the pixel code
// version, transforms.DecoderIdentity), the code version and the shard
// layout version (the bytes of the image section). Labels (boxes, masks,
// meta, extras) are not in it: they are recomputed on every build.
func pixelRecipe(c *config.Config) string {
	s := transformSpec(c)
	var b strings.Builder
	fmt.Fprintf(&b, "code_version=%q\n", CodeVersion)
	fmt.Fprintf(&b, "shard_version=%d\n", shardLayout(c, 0).Version())
	fmt.Fprintf(&b, "target_size=%dx%d\n", s.Width, s.Height)
	fmt.Fprintf(&b, "resize_mode=%q\n", string(s.Mode))
	fmt.Fprintf(&b, "pad_value=%d\n", s.Pad)
	fmt.Fprintf(&b, "normalize.mean=%v\n", s.Mean)
	fmt.Fprintf(&b, "normalize.std=%v\n", s.Std)
	fmt.Fprintf(&b, "dtype=%s\n", s.DType)
	fmt.Fprintf(&b, "decoder=%q\n", transforms.DecoderIdentity())
	return b.String()
}

// identityHasher digests the input of samples under one pixel recipe.
type identityHasher struct {
	src    sources.Source
	prefix []byte // IdentityFormat NUL pixelRecipe NUL
	h      hash.Hash
	// files is src when its images are files: they are hashed from the
	// file through buf, and looked up in and kept for cache (nil: off).
	files sources.ImageFiler
	cache *inputCache
	buf   []byte
	now   func() time.Time
}

func newIdentityHasher(src sources.Source, recipe string, cache *inputCache, now func() time.Time) *identityHasher {
	prefix := []byte(IdentityFormat + "\x00" + recipe + "\x00")
	ih := &identityHasher{src: src, prefix: prefix, h: sha256.New(), cache: cache, now: now}
	if f, ok := src.(sources.ImageFiler); ok {
		ih.files, ih.buf = f, make([]byte, 256<<10)
	}
	return ih
}

// identity is the hex sha256 of IdentityFormat, the pixel recipe and the
// sample's image input: "encoded\0" and the encoded file bytes, or for a
// source that hands out decoded pixels (episode containers), "rgb W H\0"
// and the W*3 bytes of each of the H rows. "" when the image cannot be
// read: such a sample fails its decode too and is never reused.
//
// sha256, not xxhash: a false match would copy another image's pixels
// into the version without any later check noticing (the CRC-32C only
// says the old sample is intact), so the digest must not collide by
// accident across tens of millions of samples a night, nor by design
// when someone else's images land in the dataset. With the SHA
// extensions (amd64 SHA-NI, arm64 SHA2) crypto/sha256 hashes at 1.5-2
// GB/s a core, about a hundredth of the time a 1080p JPEG takes to
// decode and resize.
func (ih *identityHasher) identity(s *sources.Sample) string {
	if ih.files != nil {
		return ih.fileIdentity(s)
	}
	im, err := ih.src.ReadImage(s)
	if err != nil {
		return ""
	}
	if im.Release != nil {
		defer im.Release()
	}
	h := ih.h
	h.Reset()
	h.Write(ih.prefix)
	if im.Encoded != nil {
		h.Write([]byte("encoded\x00"))
		h.Write(im.Encoded)
	} else {
		row := im.Width * 3
		if im.Width <= 0 || im.Height <= 0 || im.Stride < row || len(im.Pixels) < (im.Height-1)*im.Stride+row {
			return ""
		}
		fmt.Fprintf(h, "rgb %d %d\x00", im.Width, im.Height)
		for y := range im.Height {
			h.Write(im.Pixels[y*im.Stride : y*im.Stride+row])
		}
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// fileIdentity is identity for a source whose images are files
// (sources.ImageFiler): the same digest of the same bytes, read from the
// file through a reused buffer instead of into a new one, or taken from
// the input cache when the file's status is the one it was hashed with
// (reuse_inputs.go). "" when the file cannot be read or is larger than
// ReadImage reads.
func (ih *identityHasher) fileIdentity(s *sources.Sample) string {
	path, limit, err := ih.files.ImageFile(s)
	if err != nil {
		return ""
	}
	opened := ih.now()
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() > limit {
		return ""
	}
	key, ctime, keyed := fileKey(path, fi)
	keyed = keyed && ih.cache != nil
	if keyed {
		if id, ok := ih.cache.lookup(key); ok {
			ih.cache.keep(key, id)
			ih.cache.hits.Add(1)
			return hex.EncodeToString(id[:])
		}
	}
	h := ih.h
	h.Reset()
	h.Write(ih.prefix)
	h.Write([]byte("encoded\x00"))
	n, err := io.CopyBuffer(h, io.LimitReader(f, limit+1), ih.buf)
	if err != nil || n > limit {
		return ""
	}
	var id [sha256.Size]byte
	h.Sum(id[:0])
	if keyed {
		ih.cache.hashed.Add(1)
		if ctime.Add(racyWindow).Before(opened) {
			if after, err := f.Stat(); err == nil {
				if again, _, ok := fileKey(path, after); ok && again == key {
					ih.cache.keep(key, id)
				}
			}
		}
	}
	return hex.EncodeToString(id[:])
}

// identityStage computes the identity of the kept samples of the scan in
// a pool of workers and hands every sample, in scan order, to emit (the
// spill writer). At most window samples are between put and emit.
type identityStage struct {
	g     *errgroup.Group
	ctx   context.Context
	in    chan *identityItem
	order chan *identityItem
}

type identityItem struct {
	p    *plannedSample
	done chan struct{}
}

// startIdentities starts the stage with workers hashers; emit runs on one
// goroutine, in put order.
func (b *builder) startIdentities(ctx context.Context, workers int, emit func(*plannedSample) error) *identityStage {
	g, gctx := errgroup.WithContext(ctx)
	s := &identityStage{g: g, ctx: gctx, in: make(chan *identityItem, workers), order: make(chan *identityItem, 8*workers)}
	recipe := pixelRecipe(b.cfg)
	for range workers {
		ih := newIdentityHasher(b.src, recipe, b.inputs, b.now)
		g.Go(func() error {
			for it := range s.in {
				it.p.Identity = ih.identity(&it.p.Sample)
				close(it.done)
			}
			return nil
		})
	}
	g.Go(func() error {
		for it := range s.order {
			select {
			case <-it.done:
			case <-gctx.Done():
				return gctx.Err()
			}
			if err := emit(it.p); err != nil {
				return err
			}
		}
		return nil
	})
	return s
}

// put queues p: its identity is computed when it is kept.
func (s *identityStage) put(p *plannedSample) error {
	it := &identityItem{p: p, done: make(chan struct{})}
	if !p.Kept {
		close(it.done)
	}
	select {
	case s.order <- it:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	if p.Kept {
		select {
		case s.in <- it:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	return nil
}

// close waits for every queued sample to be emitted; its error is the
// stage's first (an emit failure, or the context's).
func (s *identityStage) close() error {
	close(s.order)
	close(s.in)
	return s.g.Wait()
}
