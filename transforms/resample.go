package transforms

import (
	"slices"

	"warehouse-etl/transforms/internal/simd"
)

//go:generate go run gen_kernels.go

// Fixed-point format of the resampling weights: each output pixel's weights
// are non-negative integers summing to exactly weightOne. With 8-bit inputs
// the accumulator stays below 255*2^22 + 2^21 < 2^31, so int32 suffices.
const (
	weightBits = 22
	weightOne  = 1 << weightBits
	weightHalf = 1 << (weightBits - 1) // rounding term: round half up
)

// axisWeights is the triangle filter of one axis, from srcSize to dstSize
// samples: output i reads count[i] consecutive source samples from start[i]
// with the weights coeff[i*taps : i*taps+count[i]].
type axisWeights struct {
	srcSize, dstSize int
	taps             int
	start, count     []int32
	coeff            []int32
	first            []int32 // see pad
	padded           []int32

	// scratch for computing one output's weights
	num   []int64
	order []int
}

// prepare makes a hold the weights for srcSize -> dstSize, recomputing them
// only when the sizes changed since the last call and reusing the storage.
//
// The weights are computed in pure integer arithmetic, so they are the same
// on every architecture. The filter is the Pillow/imaging antialiased
// triangle: output pixel v (0-based) has its centre at source coordinate
// c = (v+0.5)*S/D - 0.5, and source pixel u gets the weight
// max(0, 1 - |u-c|/scale) with scale = max(1, S/D), i.e. when downscaling
// the support widens to cover every source pixel. Multiplying through by
// 2*D*scale = 2*M with M = max(S, D) gives the integer numerator
//
//	n(u) = max(0, 2M - |(2u+1)D - (2v+1)S|)
//
// Source pixels outside the image are left out (the filter is renormalized
// over the pixels that exist, as Pillow and imaging do). Each weight is
// n(u)*2^22 / sum(n) rounded down, and the remaining units (fewer than the
// number of taps) go one each to the largest remainders, ties to the lower
// index, so every output's weights sum to exactly 2^22: a flat image stays
// exactly flat.
func (a *axisWeights) prepare(srcSize, dstSize int) {
	if a.srcSize == srcSize && a.dstSize == dstSize && a.start != nil {
		return
	}
	S, D := int64(srcSize), int64(dstSize)
	M := max(S, D)
	a.srcSize, a.dstSize = srcSize, dstSize
	a.start = resize(a.start, dstSize)
	a.count = resize(a.count, dstSize)

	// Pass 1: the range of source pixels with n(u) > 0, i.e. with
	// c-2M < (2u+1)D < c+2M where c = (2v+1)S.
	a.taps = 0
	for v := range dstSize {
		c := (2*int64(v) + 1) * S
		lo := max(0, floorDiv(c-2*M-D, 2*D)+1)
		hi := min(S-1, ceilDiv(c+2*M-D, 2*D)-1)
		a.start[v] = int32(lo)
		a.count[v] = int32(hi - lo + 1)
		a.taps = max(a.taps, int(hi-lo+1))
	}

	// Pass 2: the quantized weights.
	a.coeff = resize(a.coeff, dstSize*a.taps)
	clear(a.coeff)
	for v := range dstSize {
		c := (2*int64(v) + 1) * S
		lo, n := int64(a.start[v]), int(a.count[v])
		a.num = resize(a.num, n)
		var sum int64
		for k := range n {
			d := (2*(lo+int64(k))+1)*D - c
			a.num[k] = 2*M - max(d, -d)
			sum += a.num[k]
		}
		w := a.coeff[v*a.taps : v*a.taps+n]
		var total int64
		for k := range n {
			q := (a.num[k] << weightBits) / sum
			w[k] = int32(q)
			total += q
			a.num[k] = (a.num[k] << weightBits) % sum // the remainder from here on
		}
		if deficit := int(weightOne - total); deficit > 0 {
			a.order = resize(a.order, n)
			for k := range a.order {
				a.order[k] = k
			}
			rem := a.num
			slices.SortFunc(a.order, func(i, j int) int {
				if rem[i] != rem[j] {
					if rem[i] > rem[j] {
						return -1
					}
					return 1
				}
				return i - j
			})
			for _, k := range a.order[:deficit] {
				w[k]++
			}
		}
	}
	a.pad()
}

// pad derives the kernels' form of the weights from start/count/coeff:
// every output reads exactly taps source samples from first[v], with
// first[v]+taps <= srcSize, and the weights padded[v*taps:(v+1)*taps], zero
// where the filter has no support. Zero weights add nothing, so the sums,
// and the output bytes, are those of the exact support; in exchange the
// kernels have no per-output tap count and no reads past the source.
func (a *axisWeights) pad() {
	a.first = resize(a.first, a.dstSize)
	a.padded = resize(a.padded, a.dstSize*a.taps)
	clear(a.padded)
	for v := range a.dstSize {
		first := min(int(a.start[v]), a.srcSize-a.taps)
		a.first[v] = int32(first)
		shift := int(a.start[v]) - first
		copy(a.padded[v*a.taps+shift:], a.coeff[v*a.taps:v*a.taps+int(a.count[v])])
	}
}

// resampleRow resamples one row of srcSize pixels of bpp bytes each (the
// first three R, G, B; a fourth, alpha or padding, is skipped) into dst,
// dstSize packed RGB pixels.
func (a *axisWeights) resampleRow(dst, src []byte, bpp int) {
	dst = dst[:3*a.dstSize]
	if k := rowKernel(bpp, a.taps); k != nil {
		k(dst, src, a.first, a.padded)
		return
	}
	resampleRowGeneric(dst, src, bpp, a.first, a.padded)
}

// resampleRowGeneric is resampleRow for any pixel size and tap count
// (len(coeff)/len(first)): what the kernels in resample_kernels.go compute,
// and the reference their tests compare them with. In use it only runs the
// cases without a kernel: one tap (a source one pixel wide).
func resampleRowGeneric(dst, src []byte, bpp int, first, coeff []int32) {
	taps := len(coeff) / len(first)
	for x, first := range first {
		w := coeff[x*taps : (x+1)*taps]
		s := src[bpp*int(first) : bpp*(int(first)+taps)]
		r, g, b := int32(weightHalf), int32(weightHalf), int32(weightHalf)
		for k, c := range w {
			p := s[bpp*k : bpp*k+3 : bpp*k+3]
			r += int32(p[0]) * c
			g += int32(p[1]) * c
			b += int32(p[2]) * c
		}
		// Non-negative weights summing to one keep every result in
		// 0..255: no clamping needed (a kernel with negative lobes, such
		// as Lanczos, would need it).
		d := dst[3*x : 3*x+3 : 3*x+3]
		d[0], d[1], d[2] = uint8(r>>weightBits), uint8(g>>weightBits), uint8(b>>weightBits)
	}
}

// resampleColumn computes output row v of the vertical pass into dst (one
// row of len(dst) bytes), reading rows first[v].. of src at the given
// stride. acc is scratch of len(dst) for the kernels that need it. The
// loops run along rows, not down columns, so memory is read sequentially.
func (a *axisWeights) resampleColumn(dst []byte, acc []int32, src []byte, stride, v int) {
	src = src[int(a.first[v])*stride:]
	w := a.padded[v*a.taps : (v+1)*a.taps]
	if len(w) == 1 {
		copy(dst, src) // a one-tap filter has the single weight one
		return
	}
	// With AVX2, 16 bytes a step (transforms/internal/simd), the same
	// integers; the kernels below do the rest of the row.
	if n := simd.ColumnWeighted(dst, src, stride, w, weightHalf, weightBits); n > 0 {
		dst, src = dst[n:], src[n:]
		if len(dst) == 0 {
			return
		}
	}
	if k := columnKernel(len(w)); k != nil {
		k(dst, acc, src, stride, w)
		return
	}
	resampleColumnGeneric(dst, acc, src, stride, w)
}

// resampleColumnGeneric is resampleColumn's work for any tap count: the
// reference for the kernels, as resampleRowGeneric is for rows.
func resampleColumnGeneric(dst []byte, acc []int32, src []byte, stride int, w []int32) {
	acc = acc[:len(dst)]
	for i := range acc {
		acc[i] = weightHalf
	}
	for k, c := range w {
		row := src[k*stride : k*stride+len(acc)]
		for i, p := range row {
			acc[i] += int32(p) * c
		}
	}
	for i, s := range acc {
		dst[i] = uint8(s >> weightBits) // in range, see resampleRowGeneric
	}
}

// floorDiv is a/b rounded toward minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv is a/b rounded toward plus infinity, for b > 0.
func ceilDiv(a, b int64) int64 {
	return -floorDiv(-a, b)
}

// resize returns s with length n, reusing its storage when large enough.
// The contents are unspecified.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
