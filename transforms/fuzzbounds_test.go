package transforms

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// The decode of at most fuzzMaxPixels (1 Mpixel, 4 bytes each) plus the resampler's buffers.
	applyAllocBound = 16 * fuzzmem.MiB
	// Headers only: no pixel buffers.
	decodeConfigAllocBound = 4 * fuzzmem.MiB
	// InflateZlib writes into the caller's buffer.
	inflateAllocBound = 1 * fuzzmem.MiB
	// The image, at most deflateMaxRatio (1032) times the image data given (pngDataCanHold).
	pngAllocBound = 64 * fuzzmem.MiB
)
