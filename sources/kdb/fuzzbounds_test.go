package kdb

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// The index, episode records and one image of the file given: Open and ReadImage size every buffer from the file's length, not from its counts.
	kdbAllocBound = 16 * fuzzmem.MiB
	// As FuzzKDB, for one episode.
	episodeAllocBound = 16 * fuzzmem.MiB
)
