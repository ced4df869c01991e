//go:build !amd64 || purego

package column

// Available: the AVX2 pass is amd64's.
const Available = false

func weighted(dst, src *byte, stride, n int, w *int32, taps int, half int32, bits uint64) {
	panic("column: weighted without AVX2")
}
