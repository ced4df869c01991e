package jpegdec

import "slices"

// reconstruct turns a dequantized block into samples at scale 1/scale:
// 8x8, 4x4, 2x2 or 1x1 of them at dst, rows stride apart.
func reconstruct(blk *[blockSize]int32, scale int, dst []byte, stride int) {
	switch scale {
	case 1:
		if idctSIMD { // idct_amd64.go
			_ = dst[7*stride+7]
			idct8Level(blk, &dst[0], stride, &idctK)
			return
		}
		idct8(blk)
		for y := 0; y < 8; y++ {
			row := dst[y*stride : y*stride+8 : y*stride+8]
			b := blk[8*y : 8*y+8 : 8*y+8]
			for x := range row {
				row[x] = level8(b[x])
			}
		}
	case 2:
		if idctSIMD { // idct_amd64.go
			_ = dst[3*stride+3]
			idct4SIMD(blk, &dst[0], stride, &idct4K)
			return
		}
		idct4(blk, dst, stride)
	case 4:
		if idctSIMD { // idct_amd64.go
			_ = dst[stride+1]
			idct2SIMD(blk, &dst[0], stride, &idct2K)
			return
		}
		idct2(blk, dst, stride)
	default:
		dst[0] = clampSample(descale(blk[0], 3))
	}
}

// reconstructDC is reconstruct for a block whose AC coefficients are all
// zero: every sample is the one value each IDCT computes for such a block,
// by the same int32 expression (idct8: the DC row shortcut, then the
// column pass's rounding and shifts; the reduced IDCTs: their zero-AC
// shortcuts in both passes).
func reconstructDC(dc int32, scale int, dst []byte, stride int) {
	var v byte
	n := 8 / scale
	switch scale {
	case 1:
		v = level8((dc<<17 + 1<<19) >> 20)
	case 2, 4:
		v = clampSample(descale(dc<<pass1Bits, pass1Bits+3))
	default:
		dst[0] = clampSample(descale(dc, 3))
		return
	}
	for y := 0; y < n; y++ {
		row := dst[y*stride : y*stride+n]
		for x := range row {
			row[x] = v
		}
	}
}

// idctConstants are idct8's multipliers and offsets, each in all 8 lanes,
// for idct8Level; a dctBox by (kcos, ksin) takes kcos, ksin-kcos and
// kcos+ksin.
type idctConstants [16][8]int32

var idctK = func() (k idctConstants) {
	box := func(kcos, ksin int32) []int32 { return []int32{kcos, ksin - kcos, kcos + ksin} }
	lanes8(k[:], slices.Concat(
		box(fix(sqrt2inv_cos6, 18), -fix(sqrt2inv_sin6, 18)), // rows
		box(fix(cos3, 12), -fix(sin3, 12)),                   // both passes
		box(fix(cos1, 12), -fix(sin1, 12)),                   // both passes
		[]int32{fix(sqrt2inv, 8)},                            // rows
		box(fix(sqrt2inv_cos6, 12), -fix(sqrt2inv_sin6, 12)), // columns
		[]int32{fix(sqrt2inv, 14), 1 << 19, 128},             // columns; rounding; level shift
	)...)
	return k
}()

// idct4Constants are idct4SIMD's multipliers and offsets, each in all 8
// lanes (idct4_amd64.s lists them).
type idct4Constants [14][8]int32

var idct4K = func() (k idct4Constants) {
	lanes8(k[:], k1_847759065, -k0_765366865, -k0_211164243, k1_451774981,
		-k2_172734803, k1_061594337, -k0_509795579, -k0_601344887, k0_899976223, k2_562915447,
		1<<(constBits-pass1Bits), 1<<(constBits+pass1Bits+3), 1<<(pass1Bits+2), 128)
	return k
}()

// idct2Constants are idct2SIMD's multipliers, masks and offsets, 8 lanes
// each (idct2_amd64.s lists them).
type idct2Constants [11][8]int32

var idct2K = func() (k idct2Constants) {
	lanes8(k[:], -k0_720959822, k0_850430095, -k1_272758580, k3_624509785,
		1<<(constBits-pass1Bits+1), 0, 0, -8, 1<<(pass1Bits+2), 128, 1<<(constBits+pass1Bits+3+1))
	k[5] = [8]int32{0, k3_624509785, 0, -k1_272758580, 0, k0_850430095, 0, -k0_720959822}
	k[6] = [8]int32{0, -1, 0, -1, 0, -1, 0, -1}
	return k
}()

// lanes8 sets row i of dst to vals[i] in all 8 lanes (the SIMD IDCTs'
// constants); len(vals) must be len(dst).
func lanes8(dst [][8]int32, vals ...int32) {
	if len(vals) != len(dst) {
		panic("jpegdec: lanes8: a value per row")
	}
	for i := range dst {
		for j := range dst[i] {
			dst[i][j] = vals[i]
		}
	}
}

// level8 is image/jpeg's level shift and clip of an 8x8 IDCT output
// (without branches: noisy blocks clip often enough to mispredict them).
func level8(c int32) byte {
	return byte(min(max(c+128, 0), 255))
}

// clampSample level-shifts a reduced IDCT output and clips it to 0..255.
func clampSample(c int32) byte {
	return byte(min(max(c+128, 0), 255))
}

// descale is x / 2^n rounded half up.
func descale(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }

// The 8x8 inverse DCT below is image/jpeg's (Go 1.25+, dct.go: Loeffler,
// Ligtenberg and Moschytz with 11 multiplies, Q-format fixed point), the
// same operations on the same int32s, so its outputs are image/jpeg's bit
// for bit; TestMatchesImageJPEG holds it to that on every subsampling.
// Copyright 2025 The Go Authors (BSD license, see Go's LICENSE).

// Fixed-point constants: round(x * 2^60), rounded to fewer bits by fix.
const (
	cos1          = 1130768441178740757 // cos 1*pi/16
	sin1          = 224923827593068887  // sin 1*pi/16
	cos3          = 958619196450722178  // cos 3*pi/16
	sin3          = 640528868967736374  // sin 3*pi/16
	sqrt2inv      = 815238614083298888  // 1/sqrt 2
	sqrt2inv_cos6 = 311978311033955632  // (1/sqrt 2)*cos 6*pi/16
	sqrt2inv_sin6 = 753182269664427492  // (1/sqrt 2)*sin 6*pi/16
)

// fix rounds a 60-bit fixed-point constant to b fraction bits.
func fix(x uint64, b int) int32 {
	return int32((x + (1 << (59 - b))) >> (60 - b))
}

// dctBox is a rotation and scaling with three multiplies.
func dctBox(x0, x1, kcos, ksin int32) (y0, y1 int32) {
	ksum := kcos * (x0 + x1)
	return ksum + (ksin-kcos)*x1, ksum - (kcos+ksin)*x0
}

// idct8 is image/jpeg's idct: rows, then columns, outputs in place. A row
// of zeros gives zeros, so those rows are skipped.
func idct8(b *[blockSize]int32) {
	for i := 0; i < 8; i++ {
		x := b[8*i : 8*i+8 : 8*i+8]
		if x[1]|x[2]|x[3]|x[4]|x[5]|x[6]|x[7] == 0 {
			if x[0] != 0 {
				v := x[0] << 17
				x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7] = v, v, v, v, v, v, v, v
			}
			continue
		}
		x0, x7, x2, x5, x1, x6, x3, x4 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
		x0 <<= 17
		x1 <<= 17
		x0, x1 = x0+x1, x0-x1
		x2, x3 = dctBox(x2, x3, fix(sqrt2inv_cos6, 18), -fix(sqrt2inv_sin6, 18))
		x1, x2 = x1+x2, x1-x2
		x0, x3 = x0+x3, x0-x3
		x4 <<= 7
		x7 <<= 7
		x7, x4 = x7+x4, x7-x4
		x6 = x6 * fix(sqrt2inv, 8)
		x5 = x5 * fix(sqrt2inv, 8)
		x7, x5 = x7+x5, x7-x5
		x4, x6 = x4+x6, x4-x6
		x4, x7 = dctBox(x4>>2, x7>>2, fix(cos3, 12), -fix(sin3, 12))
		x5, x6 = dctBox(x5>>2, x6>>2, fix(cos1, 12), -fix(sin1, 12))
		x0, x7 = x0+x7, x0-x7
		x1, x6 = x1+x6, x1-x6
		x2, x5 = x2+x5, x2-x5
		x3, x4 = x3+x4, x3-x4
		x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7] = x0, x1, x2, x3, x4, x5, x6, x7
	}
	for i := 0; i < 8; i++ {
		x0, x7, x2, x5 := b[0*8+i], b[1*8+i], b[2*8+i], b[3*8+i]
		x1, x6, x3, x4 := b[4*8+i], b[5*8+i], b[6*8+i], b[7*8+i]
		x0 += 1 << 19
		x0, x1 = (x0+x1)>>2, (x0-x1)>>2
		x2, x3 = dctBox(x2>>13, x3>>13, fix(sqrt2inv_cos6, 12), -fix(sqrt2inv_sin6, 12))
		x1, x2 = x1+x2, x1-x2
		x0, x3 = x0+x3, x0-x3
		x7, x4 = x7+x4, x7-x4
		x5 = (x5 >> 13) * fix(sqrt2inv, 14)
		x6 = (x6 >> 13) * fix(sqrt2inv, 14)
		x7, x5 = x7+x5, x7-x5
		x4, x6 = x4+x6, x4-x6
		x4, x7 = dctBox(x4>>14, x7>>14, fix(cos3, 12), -fix(sin3, 12))
		x5, x6 = dctBox(x5>>14, x6>>14, fix(cos1, 12), -fix(sin1, 12))
		x0, x7 = x0+x7, x0-x7
		x1, x6 = x1+x6, x1-x6
		x2, x5 = x2+x5, x2-x5
		x3, x4 = x3+x4, x3-x4
		b[0*8+i], b[1*8+i], b[2*8+i], b[3*8+i] = x0>>18, x1>>18, x2>>18, x3>>18
		b[4*8+i], b[5*8+i], b[6*8+i], b[7*8+i] = x4>>18, x5>>18, x6>>18, x7>>18
	}
}

// The reduced inverse DCTs follow libjpeg's jidctred.c: each 8-point 1-D
// IDCT is replaced by one that yields the averages of adjacent pairs (4
// outputs) or quadruples (2 outputs) of the 8, derived from the LL&M
// islow IDCT; coefficients that cannot reach those averages (row and
// column 4 for 4 outputs; 2, 4, 6 for 2) are not read. 13-bit constants,
// 2 extra bits between the passes, results rounded half up.
const (
	constBits = 13
	pass1Bits = 2
)

// k13 is round(x * 2^13) for the reduced IDCT constants.
const (
	k0_211164243 = 1730
	k0_509795579 = 4176
	k0_601344887 = 4926
	k0_720959822 = 5906
	k0_765366865 = 6270
	k0_850430095 = 6967
	k0_899976223 = 7373
	k1_061594337 = 8697
	k1_272758580 = 10426
	k1_451774981 = 11893
	k1_847759065 = 15137
	k2_172734803 = 17799
	k2_562915447 = 20995
	k3_624509785 = 29692
)

// idct4x4Step is the 8-to-4 step on coefficients c0..c7 (c4 unused): the
// even part from c0, c2, c6 and the odd part from c1, c3, c5, c7, both
// scaled by 2^(constBits+1) relative to the input.
func idct4x4Step(c0, c1, c2, c3, c5, c6, c7 int32) (o0, o1, o2, o3 int32) {
	t0 := c0 << (constBits + 1)
	t2 := c2*k1_847759065 - c6*k0_765366865
	t10, t12 := t0+t2, t0-t2
	odd0 := -c7*k0_211164243 + c5*k1_451774981 - c3*k2_172734803 + c1*k1_061594337
	odd2 := -c7*k0_509795579 - c5*k0_601344887 + c3*k0_899976223 + c1*k2_562915447
	return t10 + odd2, t12 + odd0, t12 - odd0, t10 - odd2
}

// idct4 writes the 4x4 samples of a block at 1/2 scale: columns 0..7 but
// 4 to four work rows, then each row to four samples. Written out
// (constant indices, no loops or bounds checks), the same int32 operations
// in the same order as the loops it replaced (TestOutputsPinned).
func idct4(b *[blockSize]int32, dst []byte, stride int) {
	const s1 = constBits - pass1Bits + 1
	const s2 = constBits + pass1Bits + 3 + 1
	var ws [8 * 4]int32 // columns 0..7 (4 unused) x 4 rows
	if b[8]|b[16]|b[24]|b[40]|b[48]|b[56] == 0 {
		v := b[0] << pass1Bits
		ws[0], ws[8], ws[16], ws[24] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[0], b[8], b[16], b[24], b[40], b[48], b[56])
		ws[0], ws[8], ws[16], ws[24] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[9]|b[17]|b[25]|b[41]|b[49]|b[57] == 0 {
		v := b[1] << pass1Bits
		ws[1], ws[9], ws[17], ws[25] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[1], b[9], b[17], b[25], b[41], b[49], b[57])
		ws[1], ws[9], ws[17], ws[25] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[10]|b[18]|b[26]|b[42]|b[50]|b[58] == 0 {
		v := b[2] << pass1Bits
		ws[2], ws[10], ws[18], ws[26] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[2], b[10], b[18], b[26], b[42], b[50], b[58])
		ws[2], ws[10], ws[18], ws[26] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[11]|b[19]|b[27]|b[43]|b[51]|b[59] == 0 {
		v := b[3] << pass1Bits
		ws[3], ws[11], ws[19], ws[27] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[3], b[11], b[19], b[27], b[43], b[51], b[59])
		ws[3], ws[11], ws[19], ws[27] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[13]|b[21]|b[29]|b[45]|b[53]|b[61] == 0 {
		v := b[5] << pass1Bits
		ws[5], ws[13], ws[21], ws[29] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[5], b[13], b[21], b[29], b[45], b[53], b[61])
		ws[5], ws[13], ws[21], ws[29] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[14]|b[22]|b[30]|b[46]|b[54]|b[62] == 0 {
		v := b[6] << pass1Bits
		ws[6], ws[14], ws[22], ws[30] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[6], b[14], b[22], b[30], b[46], b[54], b[62])
		ws[6], ws[14], ws[22], ws[30] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if b[15]|b[23]|b[31]|b[47]|b[55]|b[63] == 0 {
		v := b[7] << pass1Bits
		ws[7], ws[15], ws[23], ws[31] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(b[7], b[15], b[23], b[31], b[47], b[55], b[63])
		ws[7], ws[15], ws[23], ws[31] = descale(o0, s1), descale(o1, s1), descale(o2, s1), descale(o3, s1)
	}
	if out := dst[0 : 0+4 : 0+4]; ws[1]|ws[2]|ws[3]|ws[5]|ws[6]|ws[7] == 0 {
		v := clampSample(descale(ws[0], pass1Bits+3))
		out[0], out[1], out[2], out[3] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(ws[0], ws[1], ws[2], ws[3], ws[5], ws[6], ws[7])
		out[0], out[1], out[2], out[3] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2)),
			clampSample(descale(o2, s2)), clampSample(descale(o3, s2))
	}
	if out := dst[1*stride : 1*stride+4 : 1*stride+4]; ws[9]|ws[10]|ws[11]|ws[13]|ws[14]|ws[15] == 0 {
		v := clampSample(descale(ws[8], pass1Bits+3))
		out[0], out[1], out[2], out[3] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(ws[8], ws[9], ws[10], ws[11], ws[13], ws[14], ws[15])
		out[0], out[1], out[2], out[3] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2)),
			clampSample(descale(o2, s2)), clampSample(descale(o3, s2))
	}
	if out := dst[2*stride : 2*stride+4 : 2*stride+4]; ws[17]|ws[18]|ws[19]|ws[21]|ws[22]|ws[23] == 0 {
		v := clampSample(descale(ws[16], pass1Bits+3))
		out[0], out[1], out[2], out[3] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(ws[16], ws[17], ws[18], ws[19], ws[21], ws[22], ws[23])
		out[0], out[1], out[2], out[3] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2)),
			clampSample(descale(o2, s2)), clampSample(descale(o3, s2))
	}
	if out := dst[3*stride : 3*stride+4 : 3*stride+4]; ws[25]|ws[26]|ws[27]|ws[29]|ws[30]|ws[31] == 0 {
		v := clampSample(descale(ws[24], pass1Bits+3))
		out[0], out[1], out[2], out[3] = v, v, v, v
	} else {
		o0, o1, o2, o3 := idct4x4Step(ws[24], ws[25], ws[26], ws[27], ws[29], ws[30], ws[31])
		out[0], out[1], out[2], out[3] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2)),
			clampSample(descale(o2, s2)), clampSample(descale(o3, s2))
	}
}

// idct2x2Step is the 8-to-2 step on c0, c1, c3, c5, c7, scaled by
// 2^(constBits+2).
func idct2x2Step(c0, c1, c3, c5, c7 int32) (o0, o1 int32) {
	t10 := c0 << (constBits + 2)
	t0 := -c7*k0_720959822 + c5*k0_850430095 - c3*k1_272758580 + c1*k3_624509785
	return t10 + t0, t10 - t0
}

// idct2 writes the 2x2 samples of a block at 1/4 scale: columns 0, 1, 3,
// 5, 7 to two work rows (r0c, r1c), then each row to two samples. Written
// out (constant indices, no loop or bounds checks), the same int32
// operations in the same order as the loop it replaced, so the samples are
// the same (TestOutputsPinned).
func idct2(b *[blockSize]int32, dst []byte, stride int) {
	const s1 = constBits - pass1Bits + 2
	const s2 = constBits + pass1Bits + 3 + 2
	var r00, r10 int32
	if b[8]|b[24]|b[40]|b[56] == 0 {
		r00 = b[0] << pass1Bits
		r10 = r00
	} else {
		o0, o1 := idct2x2Step(b[0], b[8], b[24], b[40], b[56])
		r00, r10 = descale(o0, s1), descale(o1, s1)
	}
	var r01, r11 int32
	if b[9]|b[25]|b[41]|b[57] == 0 {
		r01 = b[1] << pass1Bits
		r11 = r01
	} else {
		o0, o1 := idct2x2Step(b[1], b[9], b[25], b[41], b[57])
		r01, r11 = descale(o0, s1), descale(o1, s1)
	}
	var r03, r13 int32
	if b[11]|b[27]|b[43]|b[59] == 0 {
		r03 = b[3] << pass1Bits
		r13 = r03
	} else {
		o0, o1 := idct2x2Step(b[3], b[11], b[27], b[43], b[59])
		r03, r13 = descale(o0, s1), descale(o1, s1)
	}
	var r05, r15 int32
	if b[13]|b[29]|b[45]|b[61] == 0 {
		r05 = b[5] << pass1Bits
		r15 = r05
	} else {
		o0, o1 := idct2x2Step(b[5], b[13], b[29], b[45], b[61])
		r05, r15 = descale(o0, s1), descale(o1, s1)
	}
	var r07, r17 int32
	if b[15]|b[31]|b[47]|b[63] == 0 {
		r07 = b[7] << pass1Bits
		r17 = r07
	} else {
		o0, o1 := idct2x2Step(b[7], b[15], b[31], b[47], b[63])
		r07, r17 = descale(o0, s1), descale(o1, s1)
	}
	out0 := dst[0 : 0+2 : 0+2]
	if r01|r03|r05|r07 == 0 {
		v := clampSample(descale(r00, pass1Bits+3))
		out0[0], out0[1] = v, v
	} else {
		o0, o1 := idct2x2Step(r00, r01, r03, r05, r07)
		out0[0], out0[1] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2))
	}
	out1 := dst[stride : stride+2 : stride+2]
	if r11|r13|r15|r17 == 0 {
		v := clampSample(descale(r10, pass1Bits+3))
		out1[0], out1[1] = v, v
	} else {
		o0, o1 := idct2x2Step(r10, r11, r13, r15, r17)
		out1[0], out1[1] = clampSample(descale(o0, s2)), clampSample(descale(o1, s2))
	}
}
