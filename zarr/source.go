package zarr

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// sampleSource maps global sample indices onto the warehouse's shards. It
// opens (maps) a shard when the first shard task needs it and closes it
// when the last one is done, so the mapped set stays small however large
// the warehouse is.
type sampleSource struct {
	dir    string
	m      *warehouse.Manifest
	layout shard.Layout
	starts []int64 // first sample of each warehouse shard, then the total
	paths  []string

	mu      sync.Mutex
	readers []*shard.Reader
	pending []int // shard tasks that will still read each warehouse shard
	failed  []error
}

func newSampleSource(dir string, m *warehouse.Manifest, l shard.Layout) *sampleSource {
	s := &sampleSource{dir: dir, m: m, layout: l, starts: make([]int64, 0, len(m.Shards)+1)}
	for _, e := range m.Shards {
		s.starts = append(s.starts, e.FirstSample)
		s.paths = append(s.paths, filepath.Join(dir, filepath.FromSlash(e.RelativePath)))
	}
	s.starts = append(s.starts, m.Samples)
	s.readers = make([]*shard.Reader, len(m.Shards))
	s.pending = make([]int, len(m.Shards))
	s.failed = make([]error, len(m.Shards))
	return s
}

// plan counts the tasks that will read each warehouse shard: tasksPerShard
// tasks for each of the zarr shards of perShard samples.
func (s *sampleSource) plan(perShard, zarrShards, tasksPerShard int) {
	for j := range zarrShards {
		lo := int64(j) * int64(perShard)
		hi := min(lo+int64(perShard), s.m.Samples)
		for k := s.shardOf(lo); k < len(s.readers) && s.starts[k] < hi; k++ {
			s.pending[k] += tasksPerShard
		}
	}
}

// shardOf is the warehouse shard holding sample i.
func (s *sampleSource) shardOf(i int64) int {
	return sort.Search(len(s.readers), func(k int) bool { return s.starts[k+1] > i })
}

// shardRefs are the open warehouse shards one task reads.
type shardRefs struct {
	first   int // warehouse shard index of readers[0]
	readers []*shard.Reader
	starts  []int64
	paths   []string // file of each warehouse shard
}

// locate returns the reader holding sample i and i's index in it.
func (r *shardRefs) locate(i int64) (*shard.Reader, int) {
	sr, local, _ := r.span(i, i+1)
	return sr, local
}

// span returns the reader holding sample i, i's index in it, and how many
// of the samples [i, hi) it holds.
func (r *shardRefs) span(i, hi int64) (sr *shard.Reader, local int, count int64) {
	k := sort.Search(len(r.readers), func(k int) bool { return r.starts[r.first+k+1] > i })
	return r.readers[k], int(i - r.starts[r.first+k]), min(hi, r.starts[r.first+k+1]) - i
}

// path is the file of warehouse shard reader sr.
func (r *shardRefs) path(sr *shard.Reader) string {
	k := slices.Index(r.readers, sr)
	return r.paths[r.first+k]
}

// acquire opens the warehouse shards holding samples [lo, hi).
func (s *sampleSource) acquire(lo, hi int64) (*shardRefs, error) {
	refs := &shardRefs{first: s.shardOf(lo), starts: s.starts, paths: s.paths}
	for k := refs.first; k < len(s.readers) && s.starts[k] < hi; k++ {
		sr, err := s.open(k)
		if err != nil {
			s.release(refs) // the shards opened so far
			return nil, err
		}
		refs.readers = append(refs.readers, sr)
	}
	return refs, nil
}

// open returns shard k's reader, opening and checking it on first use.
// Opening under the lock serializes opens, which are only an mmap and a
// header check.
func (s *sampleSource) open(k int) (*shard.Reader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readers[k] != nil {
		return s.readers[k], nil
	}
	if s.failed[k] != nil {
		return nil, s.failed[k]
	}
	e := &s.m.Shards[k]
	path := s.paths[k]
	sr, err := shard.Open(path)
	if err == nil {
		err = checkShard(sr, e, s.layout)
		if err != nil {
			sr.Close()
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err != nil {
		s.failed[k] = err
		return nil, err
	}
	s.readers[k] = sr
	return sr, nil
}

// checkShard compares an opened shard with its manifest entry: what the
// store's metadata was written from must be what the shard holds.
func checkShard(sr *shard.Reader, e *warehouse.Shard, l shard.Layout) error {
	switch {
	case int64(sr.Len()) != e.Samples:
		return fmt.Errorf("header says %d samples, the manifest says %d", sr.Len(), e.Samples)
	case sr.Layout() != l:
		return fmt.Errorf("header layout %+v, the manifest implies %+v", sr.Layout(), l)
	case !sr.HasMeta():
		return fmt.Errorf("no meta section: the metadata arrays need the per-sample records")
	}
	return nil
}

// release ends one task's use of its shards, closing those no task needs
// any more.
func (s *sampleSource) release(refs *shardRefs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := refs.first; k < refs.first+len(refs.readers); k++ {
		s.pending[k]--
		if s.pending[k] <= 0 && s.readers[k] != nil {
			s.readers[k].Close()
			s.readers[k] = nil
		}
	}
}

// closeAll closes whatever a failed write left open.
func (s *sampleSource) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sr := range s.readers {
		if sr != nil {
			sr.Close()
			s.readers[k] = nil
		}
	}
}
