package zarr

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// The shard index of the sharding_indexed codec, as this exporter
// configures it (index_codecs bytes little-endian + crc32c, index_location
// end). It is the last bytes of every shard file:
//
//	┌──────────────────────────────────────────────────────────┐ 0
//	│ inner chunk 0 <nbytes[0] byte>                           │
//	├──────────────────────────────────────────────────────────┤ offset[1]
//	│ ...                                                      │
//	├──────────────────────────────────────────────────────────┤ file size - IndexSize(n)
//	│ offset[0] <u64> │ nbytes[0] <u64>                        │
//	│ ...                                                      │
//	│ offset[n-1] <u64> │ nbytes[n-1] <u64>                    │
//	├──────────────────────────────────────────────────────────┤
//	│ crc32c <u32> of the 16·n index bytes above               │
//	└──────────────────────────────────────────────────────────┘ file size
//
// n is the number of inner chunks per shard (samples per shard here: one
// inner chunk per sample). An inner chunk that holds nothing (past the last
// sample, in the last shard) has offset and nbytes both 2^64-1.

const (
	// indexEntrySize is one (offset, nbytes) pair of u64.
	indexEntrySize = 16
	// checksumSize is the crc32c codec's little-endian u32.
	checksumSize = 4
	// EmptyChunk is the offset and nbytes of an inner chunk that is absent.
	EmptyChunk = math.MaxUint64
	// MaxChunksPerShard bounds n, so that an index is at most 16 MiB and a
	// reader can check a claimed n before allocating.
	MaxChunksPerShard = 1 << 20
)

// castagnoli is the CRC32C polynomial table (RFC 3720), the crc32c codec's
// checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IndexEntry locates one inner chunk in its shard file.
type IndexEntry struct {
	Offset, NBytes uint64
}

// Empty reports whether the entry marks an absent inner chunk.
func (e IndexEntry) Empty() bool { return e.Offset == EmptyChunk && e.NBytes == EmptyChunk }

// IndexSize is the encoded size of the index of n inner chunks.
func IndexSize(n int) int { return n*indexEntrySize + checksumSize }

// appendIndex appends the encoded index of entries to dst: the entries as
// little-endian u64 pairs, then the crc32c of those bytes.
func appendIndex(dst []byte, entries []IndexEntry) []byte {
	start := len(dst)
	for _, e := range entries {
		dst = binary.LittleEndian.AppendUint64(dst, e.Offset)
		dst = binary.LittleEndian.AppendUint64(dst, e.NBytes)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// ErrCorrupt marks every error that says a shard file's index is not valid.
var ErrCorrupt = errors.New("zarr: corrupt shard")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// ReadIndex decodes the index at the end of a whole shard file of n inner
// chunks and checks it: the file holds the index, the crc32c matches, every
// entry is either empty or lies inside the bytes before the index, and no
// two chunks overlap. Errors wrap ErrCorrupt.
func ReadIndex(file []byte, n int) ([]IndexEntry, error) {
	if n < 1 || n > MaxChunksPerShard {
		return nil, corruptf("%d inner chunks per shard, want 1..%d", n, MaxChunksPerShard)
	}
	size := IndexSize(n)
	if len(file) < size {
		return nil, corruptf("file is %d bytes, shorter than the %d-byte index of %d chunks", len(file), size, n)
	}
	data := len(file) - size
	raw := file[data : len(file)-checksumSize]
	if got, want := crc32.Checksum(raw, castagnoli), binary.LittleEndian.Uint32(file[len(file)-checksumSize:]); got != want {
		return nil, corruptf("index crc32c %#08x, stored %#08x", got, want)
	}
	entries := make([]IndexEntry, n)
	for i := range entries {
		e := IndexEntry{binary.LittleEndian.Uint64(raw[i*indexEntrySize:]), binary.LittleEndian.Uint64(raw[i*indexEntrySize+8:])}
		switch {
		case e.Empty():
		case e.Offset == EmptyChunk || e.NBytes == EmptyChunk:
			return nil, corruptf("chunk %d: offset %d nbytes %d: only one of them marks an empty chunk", i, e.Offset, e.NBytes)
		case e.Offset > uint64(data) || e.NBytes > uint64(data)-e.Offset:
			return nil, corruptf("chunk %d: bytes [%d, +%d) outside the %d data bytes", i, e.Offset, e.NBytes, data)
		}
		entries[i] = e
	}
	if err := checkNoOverlap(entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// checkNoOverlap reports two non-empty chunks that share a byte. The spec
// lets a writer order chunks freely, so it compares neighbours by offset.
func checkNoOverlap(entries []IndexEntry) error {
	order := make([]int, 0, len(entries))
	for i, e := range entries {
		if !e.Empty() && e.NBytes > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(entries[a].Offset, entries[b].Offset) })
	for k := 1; k < len(order); k++ {
		prev, cur := entries[order[k-1]], entries[order[k]]
		if prev.Offset+prev.NBytes > cur.Offset {
			return corruptf("chunks %d and %d overlap", order[k-1], order[k])
		}
	}
	return nil
}
