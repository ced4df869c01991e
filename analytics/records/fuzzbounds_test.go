package records

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// A line is at most MaxSampleLineBytes (1 MiB); json.Unmarshal allocates a few times what it reads.
	sampleLineAllocBound = 8 * fuzzmem.MiB
	// A report is at most MaxReportBytes (1 MiB).
	buildReportAllocBound = 8 * fuzzmem.MiB
	// A recipe is at most MaxRecipeBytes (1 MiB).
	recipeAllocBound = 8 * fuzzmem.MiB
)
