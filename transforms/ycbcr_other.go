//go:build !amd64 || purego

package transforms

// ycbcrSIMD: the AVX2 conversion is amd64's; elsewhere convertYCbCrRow1's
// Go loop converts every pixel.
const ycbcrSIMD = false

func ycbcrRow16(dst, y, cb, cr *byte, n int, k *ycbcrConstants) {
	panic("transforms: ycbcrRow16 without AVX2")
}
