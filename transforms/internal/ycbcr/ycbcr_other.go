//go:build !amd64 || purego

package ycbcr

// Available: the AVX2 conversion is amd64's.
const Available = false

func row16(dst, y, cb, cr *byte, n int, k *constants) {
	panic("ycbcr: row16 without AVX2")
}
