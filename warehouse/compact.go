package warehouse

import (
	"fmt"
	"sync"

	"warehouse-etl/shard"
)

// Compact images (shard_version 5, docs/format/shard.md, "Compact
// images"): a version built with compact_images stores each u8 image as
// the rectangle that differs from the pad value. The Reader restores the
// pad, so every batch and every Sample hands out the tensors of the same
// build without the option, byte for byte.

// compactLayout makes l, the layout of manifest m whose
// default_shard_version is 5 or more, the compact one: its pad value is
// the transform's.
func compactLayout(l *shard.Layout, m *Manifest) {
	l.Compact = true
	if p := m.Transform.PadValue; p >= 0 && p <= 255 {
		l.Pad = uint8(p)
	}
}

// compactEntryProblem says how shard entry e contradicts the compact
// layout l (or l being compact), or returns "": its shard_version must be
// 5 exactly when l is compact, and its size within what its sample count
// allows.
func compactEntryProblem(e *Shard, l shard.Layout) string {
	v := shard.Version(e.ShardVersion)
	switch {
	case v < shard.MinSupportedVersion || v > shard.MaxSupportedVersion:
		return fmt.Sprintf("shard_version %d, this build reads %d..%d", e.ShardVersion, shard.MinSupportedVersion, shard.MaxSupportedVersion)
	case !l.Compact:
		return fmt.Sprintf("shard_version %d has compact images, the manifest's default_shard_version %d does not", v, shard.Version4)
	case v != shard.Version5:
		return fmt.Sprintf("shard_version %d, the manifest's default_shard_version %d has compact images", v, shard.Version5)
	case int64(int(e.Samples)) != e.Samples:
		return fmt.Sprintf("samples %d out of range", e.Samples)
	}
	lo, hi := l.CompactFileSizeRange(int(e.Samples))
	if e.Bytes < lo || e.Bytes > hi {
		return fmt.Sprintf("bytes %d, but %d samples of this layout take %d..%d", e.Bytes, e.Samples, lo, hi)
	}
	return ""
}

// regionScratch holds the buffers ReadRunInto reads compact regions into
// before restoring them into a batch's rows.
var regionScratch = sync.Pool{New: func() any { return new([]byte) }}

// readCompactRun reads samples [local, local+m) of compact shard k into
// rows row..row+m-1 of b.Images: per chunk of up to verifyChunk bytes of
// regions (at least one sample), one pread of their regions (stored back to
// back) into a scratch buffer, then each restored into its row and, on its
// first read, checked against its CRC-32C in the same pass over its region
// bytes as read (shard.Reader.RestoreImageChecked; stores past the caches
// with stream).
func (r *Reader) readCompactRun(k int, sr *shard.Reader, local, m int, b *Batch, row int, stream bool) error {
	img := int(r.layout.ImageBytes())
	verify := r.needsCheck(k, sr, local, m)
	bufp := regionScratch.Get().(*[]byte)
	defer regionScratch.Put(bufp)
	for j := 0; j < m; {
		// The samples of this chunk: up to verifyChunk region bytes.
		off, length := sr.RegionSpan(local+j, 1)
		c := 1
		for j+c < m {
			_, n := sr.RegionSpan(local+j, c+1)
			if n > verifyChunk {
				break
			}
			c, length = c+1, n
		}
		if cap(*bufp) < length {
			*bufp = make([]byte, length)
		}
		buf := (*bufp)[:length]
		if err := r.readAt(k, buf, off, c); err != nil {
			return fmt.Errorf("%s: read samples %d..%d: %w (the file changed after it was opened?)", r.shards[k].path, local+j, local+j+c-1, err)
		}
		for q := range c {
			o, n := sr.RegionSpan(local+j+q, 1)
			dst := b.Images[(row+j+q)*img : (row+j+q+1)*img]
			region := buf[o-off : o-off+int64(n)]
			if i := local + j + q; verify && r.needsCheck(k, sr, i, 1) {
				if err := r.checked(k, i, sr.RestoreImageChecked(i, dst, region, stream)); err != nil {
					return err
				}
			} else {
				sr.RestoreImage(dst, region, i, stream)
			}
		}
		j += c
	}
	return nil
}
