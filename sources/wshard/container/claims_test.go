package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// TestZstdClaimedSizeAllocation: a zstd block whose index entry claims an
// original size the stored bytes cannot decode to is rejected before the
// reader allocates that size. Found with fuzzmem: a container of a few
// hundred bytes made ReadBlock allocate its claimed original size (up to
// Limits.MaxBlockBytes, 1 GiB by default, the limit the build uses) as the
// zstd output buffer before decoding a byte.
func TestZstdClaimedSizeAllocation(t *testing.T) {
	w := Writer{Role: RoleWShard}
	w.Add(Block{Name: "signal/z", Data: bytes.Repeat([]byte("joint angles 0123456789 "), 200), Compression: CompressZstd})
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range []uint64{512 << 20, 8 << 20} {
		patched := bytes.Clone(b)
		binary.LittleEndian.PutUint64(patched[HeaderSize+offEntryOrigSize:], claim)
		var readErr error
		n := fuzzmem.Measure(func() {
			r, err := NewReader(bytes.NewReader(patched), int64(len(patched)), "claim", Limits{})
			if err != nil {
				readErr = err
				return
			}
			_, readErr = r.ReadBlock(r.Entries()[0])
		})
		if !errors.Is(readErr, ErrDecompress) {
			t.Errorf("claim %d: error %v, want ErrDecompress", claim, readErr)
		}
		if n > 1<<20 {
			t.Errorf("claim %d: %d bytes allocated for a %d-byte container", claim, n, len(patched))
		}
	}
}
