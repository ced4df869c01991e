// Package column computes the vertical pass of transforms' resampling with
// AVX2, 16 output bytes a step: each output byte is the weighted sum of the
// bytes above it in taps rows, exactly as transforms' Go kernels compute it
// (int32 products and sums, plus half, shifted right by weightBits, the low
// byte kept). It is a package of its own because transforms links
// libjpeg-turbo with cgo in the turbojpeg build, and Go does not build a
// package that has both cgo and assembly.
package column

// Weighted sets dst[i] to uint8((half + sum over k of src[k*stride+i] *
// w[k]) >> bits) for the longest prefix of dst that is a multiple of 16
// bytes, and returns its length: 0 where the CPU has no AVX2 (Available
// false) or w is empty. src must hold len(w) rows of len(dst) bytes,
// stride apart.
func Weighted(dst, src []byte, stride int, w []int32, half int32, bits uint) int {
	n := len(dst) &^ 15
	if !Available || n == 0 || len(w) == 0 || bits > 31 {
		return 0
	}
	_ = src[(len(w)-1)*stride+n-1]
	weighted(&dst[0], &src[0], stride, n, &w[0], len(w), half, uint64(bits))
	return n
}
