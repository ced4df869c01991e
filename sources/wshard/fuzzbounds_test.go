package wshard

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// Two small JSON documents.
	parseMetaAllocBound = 4 * fuzzmem.MiB
	// One small JSON document.
	parseChannelsAllocBound = 4 * fuzzmem.MiB
	// One small JSON document.
	parseManifestAllocBound = 4 * fuzzmem.MiB
	// Blocks of at most MaxBlockBytes (1 MiB in the target) each, read whole, for every channel of one input.
	episodeAllocBound = 64 * fuzzmem.MiB
)
