// Package simd holds transforms' AVX2 loops: the YCbCr to RGB conversion
// of jpegdec's scaled rows and the vertical resampling pass, each 16 bytes
// a step and computing exactly what transforms' Go loops compute (which do
// the rest of a row, and all of it where there is no AVX2). It is a package
// of its own because transforms links libjpeg-turbo with cgo in the
// turbojpeg build, and Go does not build a package that has both cgo and
// assembly.
package simd

// YCbCrRows16 converts the longest prefix of yrow that is a multiple of 16
// pixels (with cb and cr, a sample per pixel) into 3 bytes a pixel at dst,
// and returns its length: 0 where the CPU has no AVX2 (Available false).
// cb, cr must be at least as long as yrow and dst 3 times as long.
func YCbCrRows16(dst, yrow, cb, cr []byte) int {
	n := len(yrow) &^ 15
	if !Available || n == 0 {
		return 0
	}
	_, _, _ = cb[n-1], cr[n-1], dst[3*n-1]
	ycbcrRow16(&dst[0], &yrow[0], &cb[0], &cr[0], n, &ycbcrK)
	return n
}

// ycbcrConstants are ycbcrRow16's: color.YCbCrToRGB's factors, the chroma
// offset, and per 16-byte output block j and channel c the byte shuffle
// that puts the channel's values at their RGB positions (0x80: none).
type ycbcrConstants struct {
	mul   [5]int32 // 0x10101, 91881, -22554, -46802, 116130
	bias  int32    // 128
	_     [2]int32
	masks [3][3][16]byte
}

var ycbcrK = func() (k ycbcrConstants) {
	k.mul = [5]int32{0x10101, 91881, -22554, -46802, 116130}
	k.bias = 128
	for j := range 3 {
		for c := range 3 {
			for i := range 16 {
				k.masks[j][c][i] = 0x80
				if b := 16*j + i; b%3 == c {
					k.masks[j][c][i] = byte(b / 3)
				}
			}
		}
	}
	return k
}()

// ColumnWeighted sets dst[i] to uint8((half + sum over k of
// src[k*stride+i] * w[k]) >> bits) for the longest prefix of dst that is a
// multiple of 16 bytes, and returns its length: 0 where the CPU has no AVX2 (Available
// false) or w is empty. src must hold len(w) rows of len(dst) bytes,
// stride apart.
func ColumnWeighted(dst, src []byte, stride int, w []int32, half int32, bits uint) int {
	n := len(dst) &^ 15
	if !Available || n == 0 || len(w) == 0 || bits > 31 {
		return 0
	}
	_ = src[(len(w)-1)*stride+n-1]
	columnWeighted(&dst[0], &src[0], stride, n, &w[0], len(w), half, uint64(bits))
	return n
}
