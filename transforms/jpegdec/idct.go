package jpegdec

// reconstruct turns a dequantized block into samples at scale 1/scale:
// 8x8, 4x4, 2x2 or 1x1 of them at dst, rows stride apart.
func reconstruct(blk *[blockSize]int32, scale int, dst []byte, stride int) {
	switch scale {
	case 1:
		idct8(blk)
		for y := 0; y < 8; y++ {
			row := dst[y*stride : y*stride+8 : y*stride+8]
			b := blk[8*y : 8*y+8 : 8*y+8]
			for x := range row {
				row[x] = level8(b[x])
			}
		}
	case 2:
		idct4(blk, dst, stride)
	case 4:
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

// level8 is image/jpeg's level shift and clip of an 8x8 IDCT output.
func level8(c int32) byte {
	switch {
	case c < -128:
		return 0
	case c > 127:
		return 255
	}
	return byte(c + 128)
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

// idct4 writes the 4x4 samples of a block at 1/2 scale.
func idct4(b *[blockSize]int32, dst []byte, stride int) {
	var ws [8 * 4]int32 // columns 0..7 (4 unused) x 4 rows
	for col := 0; col < 8; col++ {
		if col == 4 {
			continue
		}
		if b[8+col]|b[16+col]|b[24+col]|b[40+col]|b[48+col]|b[56+col] == 0 {
			v := b[col] << pass1Bits
			ws[col], ws[8+col], ws[16+col], ws[24+col] = v, v, v, v
			continue
		}
		o0, o1, o2, o3 := idct4x4Step(b[col], b[8+col], b[16+col], b[24+col], b[40+col], b[48+col], b[56+col])
		const s = constBits - pass1Bits + 1
		ws[col], ws[8+col], ws[16+col], ws[24+col] = descale(o0, s), descale(o1, s), descale(o2, s), descale(o3, s)
	}
	for r := 0; r < 4; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+4 : r*stride+4]
		if w[1]|w[2]|w[3]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			out[0], out[1], out[2], out[3] = v, v, v, v
			continue
		}
		o0, o1, o2, o3 := idct4x4Step(w[0], w[1], w[2], w[3], w[5], w[6], w[7])
		const s = constBits + pass1Bits + 3 + 1
		out[0], out[1], out[2], out[3] = clampSample(descale(o0, s)), clampSample(descale(o1, s)),
			clampSample(descale(o2, s)), clampSample(descale(o3, s))
	}
}

// idct2x2Step is the 8-to-2 step on c0, c1, c3, c5, c7, scaled by
// 2^(constBits+2).
func idct2x2Step(c0, c1, c3, c5, c7 int32) (o0, o1 int32) {
	t10 := c0 << (constBits + 2)
	t0 := -c7*k0_720959822 + c5*k0_850430095 - c3*k1_272758580 + c1*k3_624509785
	return t10 + t0, t10 - t0
}

// idct2 writes the 2x2 samples of a block at 1/4 scale.
func idct2(b *[blockSize]int32, dst []byte, stride int) {
	var ws [8 * 2]int32
	for _, col := range [...]int{0, 1, 3, 5, 7} {
		if b[8+col]|b[24+col]|b[40+col]|b[56+col] == 0 {
			v := b[col] << pass1Bits
			ws[col], ws[8+col] = v, v
			continue
		}
		o0, o1 := idct2x2Step(b[col], b[8+col], b[24+col], b[40+col], b[56+col])
		const s = constBits - pass1Bits + 2
		ws[col], ws[8+col] = descale(o0, s), descale(o1, s)
	}
	for r := 0; r < 2; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+2 : r*stride+2]
		if w[1]|w[3]|w[5]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			out[0], out[1] = v, v
			continue
		}
		o0, o1 := idct2x2Step(w[0], w[1], w[3], w[5], w[7])
		const s = constBits + pass1Bits + 3 + 2
		out[0], out[1] = clampSample(descale(o0, s)), clampSample(descale(o1, s))
	}
}
