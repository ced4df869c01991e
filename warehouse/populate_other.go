//go:build !linux

package warehouse

// populate is a no-op where MADV_POPULATE_READ does not exist; the copy
// faults the pages in.
func populate(b []byte) {}

// prefault is a no-op here: the first reads fault the pages in.
func prefault(b []byte) {}
