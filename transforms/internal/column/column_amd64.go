//go:build amd64 && !purego

package column

import "golang.org/x/sys/cpu"

// Available: the CPU has AVX2 (whose registers the OS saves).
var Available = cpu.X86.HasAVX2

// weighted is Weighted for n (a positive multiple of 16) bytes and taps
// weights at w.
//
//go:noescape
func weighted(dst, src *byte, stride, n int, w *int32, taps int, half int32, bits uint64)
