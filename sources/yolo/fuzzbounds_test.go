package yolo

import "warehouse-etl/internal/fuzzmem"

// Allocation bounds of this package's fuzz targets: the most one call
// of the decoder may allocate for one input (internal/fuzzmem). Each is
// what the decoder's own limits let it allocate, with room for the
// measure's lag on small allocations (up to about half a MiB); the
// worst seen per target is in docs/fuzzing.md.
const (
	// A label file's boxes.
	labelAllocBound = 4 * fuzzmem.MiB
	// Up to maxClasses (65536) class names, generated or read (a ten-byte
	// "nc: 65536" takes about 4 MiB in the campaign), and the YAML node tree.
	dataYAMLAllocBound = 8 * fuzzmem.MiB
)
