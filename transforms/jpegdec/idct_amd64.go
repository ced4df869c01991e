//go:build amd64 && !purego

package jpegdec

import "golang.org/x/sys/cpu"

// idctSIMD: reconstruct at scale 1 runs idct8Level (idct_amd64.s, AVX2)
// instead of idct8 and level8 in Go: the same bytes (TestIDCTSIMD).
var idctSIMD = cpu.X86.HasAVX2

// idct8Level is idct8 of b, then level8 of each output into 8 rows of 8
// bytes at dst, stride apart. b is left as it was or changed (scratch).
//
//go:noescape
func idct8Level(b *[blockSize]int32, dst *byte, stride int, k *idctConstants)

// idct4SIMD is idct4 (idct4_amd64.s): the same bytes (TestIDCTSIMD).
//
//go:noescape
func idct4SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct4Constants)

// idct2SIMD is idct2 (idct2_amd64.s): the same bytes (TestIDCTSIMD).
//
//go:noescape
func idct2SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct2Constants)
