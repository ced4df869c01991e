//go:build !amd64 || purego

package simd

// Available: the AVX2 loops are amd64's.
const Available = false

func ycbcrRow16(dst, y, cb, cr *byte, n int, k *ycbcrConstants) {
	panic("simd: ycbcrRow16 without AVX2")
}

func columnWeighted(dst, src *byte, stride, n int, w *int32, taps int, half int32, bits uint64) {
	panic("simd: columnWeighted without AVX2")
}
