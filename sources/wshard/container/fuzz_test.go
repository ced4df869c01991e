package container

import (
	"bytes"
	"errors"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// FuzzNewReader feeds arbitrary bytes to NewReader and, when they are
// accepted, reads and verifies every block. Nothing may panic; every
// failure must be an *Error wrapping one of the package's kinds; an
// accepted block must decode to exactly its original size. Seeds in
// testdata/fuzz/FuzzNewReader are the reference golden files and the
// handmade lz4 container (rewrite them with go test -run TestUpdateFuzzCorpus -update).
func FuzzNewReader(f *testing.F) {
	f.Add([]byte(nil))
	f.Add([]byte(Magic))
	kinds := []error{ErrCorrupt, ErrChecksum, ErrDecompress, ErrTooLarge}
	known := func(err error) bool {
		var ce *Error
		if !errors.As(err, &ce) {
			return false
		}
		for _, k := range kinds {
			if errors.Is(err, k) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Each call is bounded on its own: a file may hold many blocks.
		r, err := fuzzmem.Call(t, newReaderAllocBound, func() (*Reader, error) {
			return NewReader(bytes.NewReader(b), int64(len(b)), "fuzz", Limits{MaxBlockBytes: 1 << 20})
		})
		if err != nil {
			if !known(err) {
				t.Fatalf("NewReader error %v is not a container *Error of a known kind", err)
			}
			return
		}
		for _, e := range r.Entries() {
			if got, ok := r.Lookup(e.Name); !ok || got != e {
				t.Fatalf("Lookup(%q) = %+v, %v", e.Name, got, ok)
			}
			data, err := fuzzmem.Call(t, blockAllocBound, func() ([]byte, error) { return r.ReadBlock(e) })
			if err != nil {
				if !known(err) {
					t.Fatalf("ReadBlock(%q): %v is not of a known kind", e.Name, err)
				}
				continue
			}
			if uint64(len(data)) != e.OrigSize {
				t.Fatalf("%q: %d bytes, original size %d", e.Name, len(data), e.OrigSize)
			}
			fuzzmem.Check(t, blockAllocBound, func() { err = r.Verify(e) })
			if err != nil {
				t.Fatalf("%q read but does not verify: %v", e.Name, err)
			}
		}
	})
}
