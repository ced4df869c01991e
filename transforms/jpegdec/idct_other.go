//go:build !amd64 || purego

package jpegdec

// idctSIMD: the AVX2 IDCT is amd64's; elsewhere idct8 and level8 in Go.
const idctSIMD = false

func idct8Level(b *[blockSize]int32, dst *byte, stride int, k *idctConstants) {
	panic("jpegdec: idct8Level without AVX2")
}

func idct4SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct4Constants) {
	panic("jpegdec: idct4SIMD without AVX2")
}

func idct2SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct2Constants) {
	panic("jpegdec: idct2SIMD without AVX2")
}
