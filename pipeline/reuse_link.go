package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/shard"
	"warehouse-etl/transforms"
)

// Whole-shard reuse. The nightly case is a dataset that grows at its end
// (a run added after the others by name): then every shard but the last
// holds exactly the samples, in the same places, as a shard of the
// version already published. Such a shard is not written again but taken
// whole: hard-linked into the staging directory (copied where the
// filesystem refuses links), after checking that it is the file a build
// would write:
//
//   - the match (reuse.go) put every planned sample of the shard, in
//     order, at the same index of one shard of one source version, and
//     that shard holds no other sample;
//   - its header, label, meta and extras bytes, padding and checksum
//     section are those a Writer writes for the planned samples
//     (shard.Reader.MatchesExceptImages): labels are recomputed on every
//     build, so an edited label makes the shard be written instead;
//   - every sample's CRC-32C checks out against its image (read from the
//     mapping: no copy), as for a sample copied alone.
//
// Its receipt takes the size and sha256 from the source manifest and the
// image sums from the source's shard_sums.json (computed from the images
// while they are checked for a source written before that file existed). Any failure
// leaves the shard to the write pass, which copies or decodes its samples
// one by one and counts what falls back: nothing is counted here but
// what was taken.

// linkCandidate is a shard to build that one shard of a source version
// may replace.
type linkCandidate struct {
	first, n int64
	src      *reuseSource
	shardNo  uint32
}

// linkCandidates lists the shards of todo whose planned samples are, in
// order, all the samples of one shard of a source version.
func (x *reuseIndex) linkCandidates(sp shardPlan, todo map[int]bool) map[int]linkCandidate {
	if x == nil || x.layout.Compact {
		return nil
	}
	out := map[int]linkCandidate{}
	for k := range todo {
		first, n := sp.span(k)
		loc, ok := x.lookup(first)
		if !ok || loc.idx != 0 {
			continue
		}
		src := x.sources[loc.src-1]
		if e := src.entries[loc.shard]; e.Samples != n || e.ShardVersion != uint32(x.layout.Version()) {
			continue
		}
		whole := true
		for i := int64(1); i < n && whole; i++ {
			l, ok := x.lookup(first + i)
			whole = ok && l.src == loc.src && l.shard == loc.shard && int64(l.idx) == i
		}
		if whole {
			out[k] = linkCandidate{first: first, n: n, src: src, shardNo: loc.shard}
		}
	}
	return out
}

// linkWholeShards takes every shard of todo it can whole from a source
// version (see above) and returns their receipts; the write pass builds
// the others.
func (b *builder) linkWholeShards(ctx context.Context, st *staging, scan *scanResult, sp shardPlan, todo map[int]bool, x *reuseIndex, owner string) (map[int]*shardReceipt, error) {
	cands := x.linkCandidates(sp, todo)
	if len(cands) == 0 {
		return nil, nil
	}
	done := map[int]*shardReceipt{}
	var (
		k       = -1
		samples []shard.Sample
		geoms   []transforms.Geometry
	)
	isCandidate := func(planIdx int64) bool { _, ok := cands[int(planIdx/sp.spp)]; return ok }
	err := readSpillWanted(scan, isCandidate, func(p *plannedSample, planIdx int64) error {
		c := cands[int(planIdx/sp.spp)]
		if planIdx == c.first {
			k, samples, geoms = int(planIdx/sp.spp), samples[:0], geoms[:0]
		}
		samples = append(samples, shardSample(p, scan.classes, nil))
		geoms = append(geoms, p.Geometry)
		if planIdx != c.first+c.n-1 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := b.linkShard(st, sp, k, c, samples, geoms, x, owner)
		if err != nil {
			b.log.Info("not taking a shard whole from a published version: building it sample by sample",
				"shard", shardID(k), "from", filepath.Join(c.src.dir, c.src.shards[c.shardNo]), "why", err.Error())
			_ = st.forget(k)
			return nil
		}
		done[k] = r
		b.counters.Reused.Add(c.n)
		b.counters.ReuseBytes.Add(r.Reuse.BytesCopied)
		b.counters.Written.Add(c.n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(done) > 0 {
		b.log.Info("took whole shards from published versions", "shards", len(done))
	}
	return done, nil
}

// linkShard checks the source shard of c against the planned samples of
// shard k (their labels in samples, their geometries in geoms), links it
// into the staging directory and writes its receipt.
func (b *builder) linkShard(st *staging, sp shardPlan, k int, c linkCandidate, samples []shard.Sample, geoms []transforms.Geometry, x *reuseIndex, owner string) (*shardReceipt, error) {
	rel := c.src.shards[c.shardNo]
	entry := c.src.entries[c.shardNo]
	f, err := c.src.pin.Root().Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := shard.OpenFile(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() != entry.Bytes {
		return nil, fmt.Errorf("%d bytes, its manifest says %d", fi.Size(), entry.Bytes)
	}
	if err := r.MatchesExceptImages(x.layout, samples); err != nil {
		return nil, err
	}

	var sums imageSums
	var values int64
	for _, g := range geoms {
		values += int64(g.NewW) * int64(g.NewH)
	}
	recorded, have := c.src.sums[entry.ID]
	computeSums := !have
	if !computeSums {
		if recorded.n != values {
			return nil, fmt.Errorf("its recorded image sums count %d values, the planned samples have %d", recorded.n, values)
		}
		sums.merge(&recorded)
	}
	if err := b.verifyWhole(r, geoms, x.spec, computeSums, &sums); err != nil {
		return nil, err
	}

	dst := st.shardPath(k)
	if err := linkSame(f, filepath.Join(c.src.dir, filepath.FromSlash(rel)), dst); err != nil {
		_ = os.Remove(dst)
		return nil, err
	}
	imageBytes := c.n * x.layout.ImageBytes()
	receipt := &shardReceipt{
		Format: receiptFormat, Version: sp.version, PlanSHA256: sp.planSHA, Shard: k,
		FirstPlanned: c.first, Planned: c.n, Samples: c.n, Bytes: entry.Bytes, SHA256: entry.ChecksumSHA256,
		Late: []lateFailure{}, Sums: sums, BuiltBy: owner,
		Reuse: reuseCounts{Reused: c.n, BytesCopied: imageBytes, ShardsLinked: 1},
	}
	if err := st.writeReceipt(receipt); err != nil {
		return nil, err
	}
	return receipt, nil
}

// verifyWhole checks every sample of r against its CRC-32C, in the
// builder's workers, reading the images from r's mapping; with
// computeSums it adds their image sums (geometries geoms) to sums.
func (b *builder) verifyWhole(r *shard.Reader, geoms []transforms.Geometry, spec transforms.Spec, computeSums bool, sums *imageSums) error {
	n := r.Len()
	var (
		g    errgroup.Group
		mu   sync.Mutex
		next = make(chan int, n)
	)
	for i := range n {
		next <- i
	}
	close(next)
	for range b.workers {
		g.Go(func() error {
			var local imageSums
			for i := range next {
				if err := r.VerifySample(i, nil); err != nil {
					return err
				}
				if computeSums {
					local.add(contentSums(r.Image(i), spec, geoms[i]))
				}
			}
			mu.Lock()
			sums.merge(&local)
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// linkSame puts the file f, opened at srcPath, at dst: a hard link that
// must name the same file as f (a version directory renamed since is not
// followed to another file), or where the filesystem refuses links a copy
// of f, fsynced.
func linkSame(f *os.File, srcPath, dst string) error {
	err := fsfault.LinkFile(srcPath, dst)
	if err == nil {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		li, err := os.Stat(dst)
		if err != nil {
			return err
		}
		if !os.SameFile(fi, li) {
			return errors.New("the version's directory changed under the build")
		}
		return nil
	}
	if !linksRefused(err) {
		return err
	}
	return copyFile(dst, io.NewSectionReader(f, 0, 1<<62), true)
}
