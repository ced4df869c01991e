package transforms

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"

	"warehouse-etl/dtype"
)

// normalizer turns 8-bit RGB into the output elements through one lookup
// table per channel, built once from the Spec: no float arithmetic happens
// per pixel, so the output bits depend only on the table, which is computed
// the same way everywhere (see Spec.encodeValue). For U8 it only splits the
// packed pixels into CHW planes.
type normalizer struct {
	dtype      dtype.DType
	width      int // target width in elements
	planeBytes int // bytes of one channel plane
	f32        [3][256]uint32
	f16        [3][256]uint16
	pad        [3][4]byte // little-endian bytes of the pad value per channel

	// value is the float value each output element decodes to (the U8
	// one through NormalizeTable), for the content sums writeRow adds up
	// as it writes (sums.go).
	value [3][256]float64
	sums  contentSums
}

func newNormalizer(s Spec) normalizer {
	n := normalizer{dtype: s.DType, width: s.Width, planeBytes: s.Width * s.Height * s.DType.Size()}
	for c := range 3 {
		for v := range 256 {
			n.f32[c][v], n.f16[c][v], _ = s.encodeValue(c, v)
		}
		for v := range 256 {
			if s.DType == dtype.F16 {
				n.value[c][v] = float64(float16.Frombits(n.f16[c][v]).Float32())
			} else {
				n.value[c][v] = float64(math.Float32frombits(n.f32[c][v]))
			}
		}
		switch s.DType {
		case dtype.F32:
			binary.LittleEndian.PutUint32(n.pad[c][:], n.f32[c][s.Pad])
		case dtype.F16:
			binary.LittleEndian.PutUint16(n.pad[c][:], n.f16[c][s.Pad])
		case dtype.U8:
			n.pad[c][0] = s.Pad
		}
	}
	return n
}

// writeRow normalizes one packed RGB row (len(rgb)/3 pixels) into the three
// CHW planes of out, at target row y starting at column x0.
func (n *normalizer) writeRow(out []byte, y, x0 int, rgb []byte) {
	pixels := len(rgb) / 3
	n.sums.addRow(&n.value, rgb)
	switch n.dtype {
	case dtype.F32:
		off := (y*n.width + x0) * 4
		r := out[off : off+4*pixels]
		g := out[n.planeBytes+off : n.planeBytes+off+4*pixels]
		b := out[2*n.planeBytes+off : 2*n.planeBytes+off+4*pixels]
		for x := range pixels {
			p := rgb[3*x : 3*x+3]
			binary.LittleEndian.PutUint32(r[4*x:], n.f32[0][p[0]])
			binary.LittleEndian.PutUint32(g[4*x:], n.f32[1][p[1]])
			binary.LittleEndian.PutUint32(b[4*x:], n.f32[2][p[2]])
		}
	case dtype.F16:
		off := (y*n.width + x0) * 2
		r := out[off : off+2*pixels]
		g := out[n.planeBytes+off : n.planeBytes+off+2*pixels]
		b := out[2*n.planeBytes+off : 2*n.planeBytes+off+2*pixels]
		for x := range pixels {
			p := rgb[3*x : 3*x+3]
			binary.LittleEndian.PutUint16(r[2*x:], n.f16[0][p[0]])
			binary.LittleEndian.PutUint16(g[2*x:], n.f16[1][p[1]])
			binary.LittleEndian.PutUint16(b[2*x:], n.f16[2][p[2]])
		}
	case dtype.U8:
		off := y*n.width + x0
		r := out[off : off+pixels]
		g := out[n.planeBytes+off : n.planeBytes+off+pixels]
		b := out[2*n.planeBytes+off : 2*n.planeBytes+off+pixels]
		for x := range pixels {
			p := rgb[3*x : 3*x+3]
			r[x], g[x], b[x] = p[0], p[1], p[2]
		}
	}
}

// fillPadding writes the pad value into every element of out outside the
// image rectangle of g: the rows above and below it and the columns left and
// right of it. Together with writeRow every byte of out is written, so the
// caller's buffer may hold anything beforehand.
func (n *normalizer) fillPadding(out []byte, g Geometry) {
	size := n.dtype.Size()
	rowBytes := n.width * size
	for c := range 3 {
		plane := out[c*n.planeBytes : (c+1)*n.planeBytes]
		pat := n.pad[c][:size]
		fillRepeated(plane[:g.PadY*rowBytes], pat)
		fillRepeated(plane[(g.PadY+g.NewH)*rowBytes:], pat)
		if g.NewW == n.width {
			continue
		}
		for y := g.PadY; y < g.PadY+g.NewH; y++ {
			row := plane[y*rowBytes : (y+1)*rowBytes]
			fillRepeated(row[:g.PadX*size], pat)
			fillRepeated(row[(g.PadX+g.NewW)*size:], pat)
		}
	}
}

// fillRepeated fills dst (a multiple of len(pat) long) with copies of pat,
// doubling the copied span each step.
func fillRepeated(dst, pat []byte) {
	if len(dst) == 0 {
		return
	}
	n := copy(dst, pat)
	for n < len(dst) {
		n += copy(dst[n:], dst[:n])
	}
}
