package jpegdec

import "warehouse-etl/internal/fuzzmem"

// decodeAllocBound is the most one Decode of a FuzzDecode input may
// allocate (internal/fuzzmem): planes of at most fuzzMaxPixels samples per
// component (64 Ki pixels, 4 components, a byte each, plus MCU padding),
// Huffman tables and the Image headers, with room for the measure's lag
// on small allocations. The worst seen is in docs/fuzzing.md.
const decodeAllocBound = 4 * fuzzmem.MiB
