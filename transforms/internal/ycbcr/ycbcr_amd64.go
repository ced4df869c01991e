//go:build amd64 && !purego

package ycbcr

import "golang.org/x/sys/cpu"

// Available: the CPU has AVX2 (whose registers the OS saves).
var Available = cpu.X86.HasAVX2

// row16 converts n pixels (a positive multiple of 16) of rows y, cb, cr
// into 3n bytes of RGB at dst.
//
//go:noescape
func row16(dst, y, cb, cr *byte, n int, k *constants)
