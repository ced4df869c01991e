package container

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// The index and string table, both inside the input.
	newReaderAllocBound = 4 * fuzzmem.MiB
	// One block of at most MaxBlockBytes (1 MiB in the target), plus the zstd decoder's state.
	blockAllocBound = 4 * fuzzmem.MiB
)
