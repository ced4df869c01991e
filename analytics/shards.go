package analytics

import (
	"path/filepath"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// shardCursor walks the kept samples of a version in index order, mapping
// one shard at a time. Export and Compare both read boxes through it.
type shardCursor struct {
	dir    string
	shards []warehouse.Shard
	next   int // shards[next] is the next one to open
	cur    *shard.Reader
	entry  warehouse.Shard // the shard cur maps
}

func newShardCursor(dir string, m *warehouse.Manifest) *shardCursor {
	return &shardCursor{dir: dir, shards: m.Shards}
}

// at returns the shard holding global sample index and the sample's
// position in it. Indices must not decrease between calls.
func (c *shardCursor) at(index int64) (*shard.Reader, warehouse.Shard, int, error) {
	for c.cur == nil || index >= c.entry.FirstSample+c.entry.Samples {
		if c.next >= len(c.shards) {
			return nil, warehouse.Shard{}, 0, corruptf("sample index %d is beyond the manifest's shards", index)
		}
		if err := c.close(); err != nil {
			return nil, warehouse.Shard{}, 0, err
		}
		e := c.shards[c.next]
		c.next++
		r, err := shard.Open(filepath.Join(c.dir, filepath.FromSlash(e.RelativePath)))
		if err != nil {
			return nil, warehouse.Shard{}, 0, err
		}
		c.cur, c.entry = r, e
		if int64(r.Len()) != e.Samples {
			return nil, warehouse.Shard{}, 0, corruptf("%s holds %d samples, the manifest says %d", e.RelativePath, r.Len(), e.Samples)
		}
	}
	if index < c.entry.FirstSample {
		return nil, warehouse.Shard{}, 0, corruptf("sample index %d read out of order (current shard %s starts at %d)", index, c.entry.ID, c.entry.FirstSample)
	}
	return c.cur, c.entry, int(index - c.entry.FirstSample), nil
}

func (c *shardCursor) close() error {
	if c.cur == nil {
		return nil
	}
	err := c.cur.Close()
	c.cur = nil
	return err
}
