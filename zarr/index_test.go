package zarr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// shardBytes is a shard file of the given chunk bytes and entries, with a
// correct index checksum unless the case breaks it.
func shardBytes(data []byte, entries ...IndexEntry) []byte {
	return appendIndex(slices.Clone(data), entries)
}

func TestReadIndex(t *testing.T) {
	const e = EmptyChunk
	good := shardBytes([]byte("abcdef"), IndexEntry{0, 4}, IndexEntry{4, 2}, IndexEntry{e, e})
	entries, err := ReadIndex(good, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []IndexEntry{{0, 4}, {4, 2}, {e, e}}; !slices.Equal(entries, want) || !entries[2].Empty() || entries[0].Empty() {
		t.Fatalf("entries %v, want %v", entries, want)
	}
	// Any order and gaps are valid: the spec fixes neither.
	if _, err := ReadIndex(shardBytes([]byte("abcdefgh"), IndexEntry{6, 2}, IndexEntry{0, 3}), 2); err != nil {
		t.Fatalf("chunks out of order with a gap: %v", err)
	}
	flipped := slices.Clone(good)
	flipped[len(good)-5] ^= 1 // inside the index, before the checksum
	index := func(b []byte) []byte { return b[len(b)-IndexSize(3) : len(b)-4] }
	wantChecksum := fmt.Sprintf("zarr: corrupt shard: index crc32c %#08x, stored %#08x", crc32cBitwise(index(flipped)), crc32cBitwise(index(good)))

	for _, tc := range []struct {
		name string
		file []byte
		n    int
		want string
	}{
		{"no chunks", good, 0, "zarr: corrupt shard: 0 inner chunks per shard, want 1..1048576"},
		{"too many chunks", good, MaxChunksPerShard + 1, "zarr: corrupt shard: 1048577 inner chunks per shard, want 1..1048576"},
		{"shorter than the index", good[:40], 3, "zarr: corrupt shard: file is 40 bytes, shorter than the 52-byte index of 3 chunks"},
		{"checksum", flipped, 3, wantChecksum},
		{"half empty", shardBytes([]byte("ab"), IndexEntry{e, 2}), 1, "zarr: corrupt shard: chunk 0: offset 18446744073709551615 nbytes 2: only one of them marks an empty chunk"},
		{"past the data", shardBytes([]byte("ab"), IndexEntry{1, 2}), 1, "zarr: corrupt shard: chunk 0: bytes [1, +2) outside the 2 data bytes"},
		{"offset past the data", shardBytes([]byte("ab"), IndexEntry{3, 0}), 1, "zarr: corrupt shard: chunk 0: bytes [3, +0) outside the 2 data bytes"},
		{"overflowing end", shardBytes([]byte("ab"), IndexEntry{1, e - 1}), 1, "zarr: corrupt shard: chunk 0: bytes [1, +18446744073709551614) outside the 2 data bytes"},
		{"overlap", shardBytes([]byte("abcd"), IndexEntry{0, 3}, IndexEntry{2, 2}), 2, "zarr: corrupt shard: chunks 0 and 1 overlap"},
		{"index read as data", shardBytes(nil, IndexEntry{0, 1}), 1, "zarr: corrupt shard: chunk 0: bytes [0, +1) outside the 0 data bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadIndex(tc.file, tc.n)
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v\nwant %s", err, tc.want)
			}
		})
	}
}

// FuzzReadIndex feeds arbitrary files and chunk counts to ReadIndex. It
// must never panic; a rejected file wraps ErrCorrupt; an accepted one has n
// entries, each empty or inside the data, and re-encodes to the same index.
// The seeds in testdata/fuzz/FuzzReadIndex are shard files of the golden
// store.
func FuzzReadIndex(f *testing.F) {
	f.Add([]byte(nil), 1)
	f.Add(shardBytes([]byte("abc"), IndexEntry{0, 3}, IndexEntry{EmptyChunk, EmptyChunk}), 2)
	f.Fuzz(func(t *testing.T, file []byte, n int) {
		entries, err := fuzzmem.Call(t, readIndexAllocBound, func() ([]IndexEntry, error) { return ReadIndex(file, n) })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if len(entries) != n {
			t.Fatalf("%d entries for %d chunks", len(entries), n)
		}
		data := uint64(len(file) - IndexSize(n))
		for i, e := range entries {
			if !e.Empty() && (e.Offset > data || e.Offset+e.NBytes > data) {
				t.Fatalf("entry %d %+v outside %d data bytes", i, e, data)
			}
		}
		if got := appendIndex(nil, entries); string(got) != string(file[data:]) {
			t.Fatalf("re-encoded index differs")
		}
		if binary.LittleEndian.Uint32(file[len(file)-4:]) != crc32cBitwise(file[data:len(file)-4]) {
			t.Fatalf("accepted an index whose crc32c is wrong")
		}
	})
}
