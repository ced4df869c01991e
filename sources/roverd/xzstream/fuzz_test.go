package xzstream

import (
	"bytes"
	"errors"
	"io"
	"testing"

	ulzma "github.com/ulikunitz/xz"

	"warehouse-etl/internal/fuzzmem"
)

// FuzzDecompress checks that arbitrary bytes never panic or exceed the
// limit, and that whatever this package accepts, ulikunitz/xz's own reader
// (a second decoder of the same container) reads to the same bytes.
func FuzzDecompress(f *testing.F) {
	for _, name := range []string{"crc64.xz", "crc32.xz", "none.xz", "empty.xz", "concat.xz", "multiblock_mt.xz"} {
		f.Add(fixture(f, name))
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := fuzzmem.Call(t, decompressAllocBound, func() ([]byte, error) { return DecompressBytes(data, limit) })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if len(got) > limit {
			t.Fatalf("%d bytes over the limit", len(got))
		}
		if !modestDictionaries(data) {
			return // ulikunitz/xz would allocate what the header asks: not a usable oracle
		}
		r, err := ulzma.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("accepted, but ulikunitz/xz rejects the header: %v", err)
		}
		want, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			t.Fatalf("accepted, but ulikunitz/xz fails: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got %d bytes, ulikunitz/xz reads %d different bytes", len(got), len(want))
		}
	})
}

// modestDictionaries reports whether every block header asks for at most a
// 64 MiB LZMA2 dictionary (what xz -9 uses).
func modestDictionaries(data []byte) bool {
	streams, _, err := parseStreams(bytes.NewReader(data), int64(len(data)), -1)
	if err != nil {
		return false
	}
	for _, s := range streams {
		for _, b := range s.blocks {
			h := data[b.start:]
			hsize := (int(h[0]) + 1) * 4
			if hsize > len(h) {
				return false
			}
			csize := b.unpadded - int64(hsize) - int64(checkSizes[s.check])
			dict, err := parseBlockHeader(h[:hsize], b, csize)
			if err != nil || dict > 64<<20 {
				return false
			}
		}
	}
	return true
}
