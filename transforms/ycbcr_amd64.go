//go:build amd64 && !purego

package transforms

import "golang.org/x/sys/cpu"

// ycbcrSIMD: convertYCbCrRow1 converts 16 pixels a step with AVX2
// (ycbcr_amd64.s): the same int32 products, sums and clamps as ycbcrToRGB,
// so the same bytes (TestConvertYCbCrRowsMatchStd, every width).
var ycbcrSIMD = cpu.X86.HasAVX2

// ycbcrRow16 converts n pixels (a positive multiple of 16) of rows y, cb,
// cr into 3n bytes of RGB at dst.
//
//go:noescape
func ycbcrRow16(dst, y, cb, cr *byte, n int, k *ycbcrConstants)
