package coco

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// The parsed document; annotations are held in chunks of annChunk (65536) records, the first allocated whole.
	annotationsAllocBound = 16 * fuzzmem.MiB
)
