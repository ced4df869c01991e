//go:build amd64 && !purego

package simd

import "golang.org/x/sys/cpu"

// Available: the CPU has AVX2 (whose registers the OS saves).
var Available = cpu.X86.HasAVX2

// ycbcrRow16 converts n pixels (a positive multiple of 16) of rows y, cb,
// cr into 3n bytes of RGB at dst.
//
//go:noescape
func ycbcrRow16(dst, y, cb, cr *byte, n int, k *ycbcrConstants)

// columnWeighted is ColumnWeighted for n (a positive multiple of 16)
// bytes and taps weights at w.
//
//go:noescape
func columnWeighted(dst, src *byte, stride, n int, w *int32, taps int, half int32, bits uint64)
