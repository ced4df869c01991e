package transforms

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"testing"

	"warehouse-etl/dtype"
)

// exifAPP1 builds an APP1 segment by hand: Exif header, TIFF header in the
// given byte order, IFD0 with the given entries (tag, type, count, value as
// the 4-byte field), next-IFD offset 0.
func exifAPP1(order binary.AppendByteOrder, entries [][4]uint32) []byte {
	var tiff []byte
	if order == binary.AppendByteOrder(binary.LittleEndian) {
		tiff = []byte("II*\x00")
	} else {
		tiff = []byte("MM\x00*")
	}
	tiff = order.AppendUint32(tiff, 8) // IFD0 right after the header
	tiff = order.AppendUint16(tiff, uint16(len(entries)))
	for _, e := range entries {
		tiff = order.AppendUint16(tiff, uint16(e[0]))
		tiff = order.AppendUint16(tiff, uint16(e[1]))
		tiff = order.AppendUint32(tiff, e[2])
		if e[1] == typeShort && e[2] == 1 {
			tiff = order.AppendUint16(tiff, uint16(e[3])) // left-justified
			tiff = append(tiff, 0, 0)
		} else {
			tiff = order.AppendUint32(tiff, e[3])
		}
	}
	tiff = order.AppendUint32(tiff, 0)
	payload := append([]byte("Exif\x00\x00"), tiff...)
	seg := []byte{0xFF, 0xE1}
	seg = binary.BigEndian.AppendUint16(seg, uint16(2+len(payload)))
	return append(seg, payload...)
}

// orientationAPP1 is an APP1 with one Orientation entry (plus a harmless
// ImageWidth entry before it, as real files have several).
func orientationAPP1(order binary.AppendByteOrder, o int) []byte {
	return exifAPP1(order, [][4]uint32{
		{0x0100, 4, 1, 640}, // ImageWidth, LONG
		{tagOrientation, typeShort, 1, uint32(o)},
	})
}

// spliceAfterSOI inserts segments right after the SOI marker of a JPEG.
func spliceAfterSOI(jpg []byte, segments ...[]byte) []byte {
	out := append([]byte{}, jpg[:2]...)
	for _, s := range segments {
		out = append(out, s...)
	}
	return append(out, jpg[2:]...)
}

func TestJPEGOrientation(t *testing.T) {
	jpg := encodeJPEG(t, image.NewGray(image.Rect(0, 0, 8, 8)), 90)
	le, be := binary.AppendByteOrder(binary.LittleEndian), binary.AppendByteOrder(binary.BigEndian)
	xmp := append([]byte{0xFF, 0xE1, 0, 30}, []byte("http://ns.adobe.com/xap/1.0/\x00")[:28]...)
	tests := []struct {
		name string
		data []byte
		want int
	}{
		{"no exif", jpg, 1},
		{"little-endian 6", spliceAfterSOI(jpg, orientationAPP1(le, 6)), 6},
		{"big-endian 8", spliceAfterSOI(jpg, orientationAPP1(be, 8)), 8},
		{"big-endian 3", spliceAfterSOI(jpg, orientationAPP1(be, 3)), 3},
		{"after XMP segment", spliceAfterSOI(jpg, xmp, orientationAPP1(le, 5)), 5},
		{"fill bytes before marker", spliceAfterSOI(jpg, []byte{0xFF, 0xFF}, orientationAPP1(le, 7)), 7},
		{"value 0", spliceAfterSOI(jpg, orientationAPP1(le, 0)), 1},
		{"value 9", spliceAfterSOI(jpg, orientationAPP1(be, 9)), 1},
		{"wrong type LONG", spliceAfterSOI(jpg, exifAPP1(le, [][4]uint32{{tagOrientation, 4, 1, 6}})), 1},
		{"count 2", spliceAfterSOI(jpg, exifAPP1(le, [][4]uint32{{tagOrientation, typeShort, 2, 6}})), 1},
		{"no orientation tag", spliceAfterSOI(jpg, exifAPP1(le, [][4]uint32{{0x0100, 4, 1, 640}})), 1},
		{"not a JPEG", []byte("\x89PNG\r\n\x1a\n"), 1},
		{"empty", nil, 1},
		{"only SOI", []byte{0xFF, 0xD8}, 1},
		{"exif after SOS is ignored", append(append([]byte{}, jpg[:len(jpg)-2]...), orientationAPP1(le, 6)...), 1},
	}
	// Corruptions of a valid little-endian segment: every one must read as 1.
	valid := orientationAPP1(le, 6)
	corrupt := func(name string, f func(seg []byte) []byte) {
		seg := f(append([]byte{}, valid...))
		tests = append(tests, struct {
			name string
			data []byte
			want int
		}{name, spliceAfterSOI(jpg, seg), 1})
	}
	// Segment layout: FF E1 len(2) "Exif\0\0"(6) TIFF: order(2) 42(2) off(4) count(2) entries...
	const tiffAt = 4 + 6
	corrupt("bad byte order", func(s []byte) []byte { s[tiffAt] = 'X'; return s })
	corrupt("bad magic 42", func(s []byte) []byte { s[tiffAt+2] = 43; return s })
	corrupt("IFD offset beyond end", func(s []byte) []byte {
		binary.LittleEndian.PutUint32(s[tiffAt+4:], 1<<30)
		return s
	})
	corrupt("IFD offset inside header", func(s []byte) []byte {
		binary.LittleEndian.PutUint32(s[tiffAt+4:], 2)
		return s
	})
	corrupt("entry count beyond end", func(s []byte) []byte {
		binary.LittleEndian.PutUint16(s[tiffAt+8:], 500)
		binary.LittleEndian.PutUint16(s[tiffAt+10+12:], 0x9999) // orientation entry no longer read first
		return s
	})
	corrupt("segment length past end of file", func(s []byte) []byte {
		binary.BigEndian.PutUint16(s[2:], 0xFFFF)
		return s
	})
	corrupt("segment length below 2", func(s []byte) []byte {
		binary.BigEndian.PutUint16(s[2:], 1)
		return s
	})
	corrupt("missing Exif header", func(s []byte) []byte { s[4] = 'e'; return s })
	corrupt("truncated TIFF header", func(s []byte) []byte {
		s = s[:tiffAt+6]
		binary.BigEndian.PutUint16(s[2:], uint16(len(s)-2))
		return s
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jpegOrientation(tt.data); got != tt.want {
				t.Fatalf("jpegOrientation = %d, want %d", got, tt.want)
			}
		})
	}
	// Every prefix of a file with a valid segment must parse without panic.
	data := spliceAfterSOI(jpg, orientationAPP1(be, 6))
	for n := range len(data) {
		if o := jpegOrientation(data[:n]); o != 1 && o != 6 {
			t.Fatalf("prefix %d: orientation %d", n, o)
		}
	}
}

// TestOrient checks each orientation on a 3x2 image whose pixels are
// numbered 1..6 (row 0: 1 2 3, row 1: 4 5 6). The expected layouts are
// drawn by hand from the EXIF definitions.
func TestOrient(t *testing.T) {
	tests := []struct {
		o      int
		w, h   int
		layout []int // displayed pixel numbers, row by row
	}{
		{1, 3, 2, []int{1, 2, 3, 4, 5, 6}},
		{2, 3, 2, []int{3, 2, 1, 6, 5, 4}}, // mirror left-right
		{3, 3, 2, []int{6, 5, 4, 3, 2, 1}}, // rotate 180
		{4, 3, 2, []int{4, 5, 6, 1, 2, 3}}, // mirror top-bottom
		{5, 2, 3, []int{1, 4, 2, 5, 3, 6}}, // transpose
		{6, 2, 3, []int{4, 1, 5, 2, 6, 3}}, // rotate 90 clockwise
		{7, 2, 3, []int{6, 3, 5, 2, 4, 1}}, // transverse
		{8, 2, 3, []int{3, 6, 2, 5, 1, 4}}, // rotate 90 counter-clockwise
	}
	pixel := func(k int) [3]byte { return [3]byte{byte(k), byte(10 * k), byte(100 + k)} }
	src := make([]byte, 0, 18)
	for k := 1; k <= 6; k++ {
		p := pixel(k)
		src = append(src, p[:]...)
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.o), func(t *testing.T) {
			dst := make([]byte, len(src))
			w, h := orient(dst, src, 3, 2, tt.o)
			if w != tt.w || h != tt.h {
				t.Fatalf("size %dx%d, want %dx%d", w, h, tt.w, tt.h)
			}
			var want []byte
			for _, k := range tt.layout {
				p := pixel(k)
				want = append(want, p[:]...)
			}
			if !bytes.Equal(dst, want) {
				t.Fatalf("got %v\nwant %v", dst, want)
			}
		})
	}
}

// TestApplyEXIFOrientation runs real JPEGs through Apply: a 64x32 image of
// four 32x16 quadrants A B / C D, with an APP1 Exif segment of each
// orientation spliced into the encoder's output. The displayed quadrant
// layouts are worked out by hand; JPEG is lossy, so the quadrant centres
// are compared with a tolerance.
func TestApplyEXIFOrientation(t *testing.T) {
	A := [3]int{230, 30, 30}
	B := [3]int{30, 230, 30}
	C := [3]int{30, 30, 230}
	D := [3]int{230, 230, 230}
	stored := image.NewRGBA(image.Rect(0, 0, 64, 32))
	for y := range 32 {
		for x := range 64 {
			q := [2][2][3]int{{A, B}, {C, D}}[y/16][x/32]
			stored.Set(x, y, color.RGBA{uint8(q[0]), uint8(q[1]), uint8(q[2]), 255})
		}
	}
	jpg := encodeJPEG(t, stored, 100)
	tests := []struct {
		o      int
		layout [4][3]int // displayed top-left, top-right, bottom-left, bottom-right
	}{
		{1, [4][3]int{A, B, C, D}},
		{2, [4][3]int{B, A, D, C}},
		{3, [4][3]int{D, C, B, A}},
		{4, [4][3]int{C, D, A, B}},
		{5, [4][3]int{A, C, B, D}},
		{6, [4][3]int{C, A, D, B}},
		{7, [4][3]int{D, B, C, A}},
		{8, [4][3]int{B, D, A, C}},
	}
	for _, tt := range tests {
		for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
			t.Run(fmt.Sprintf("%d/%v", tt.o, order), func(t *testing.T) {
				data := spliceAfterSOI(jpg, orientationAPP1(order, tt.o))
				w, h, format, err := DecodeConfig(data)
				if err != nil {
					t.Fatal(err)
				}
				wantW, wantH := 64, 32
				if tt.o >= 5 {
					wantW, wantH = 32, 64
				}
				if w != wantW || h != wantH || format != "jpeg" {
					t.Fatalf("DecodeConfig = %dx%d %s, want %dx%d jpeg", w, h, format, wantW, wantH)
				}
				spec := Spec{Width: wantW, Height: wantH, Mode: None, DType: dtype.F32}
				out := make([]byte, spec.OutputBytes())
				g, err := mustTransformer(t, spec).Apply(data, out)
				if err != nil {
					t.Fatal(err)
				}
				rgb := outputRGB(t, out, spec, g)
				centres := [4][2]int{{w / 4, h / 4}, {3 * w / 4, h / 4}, {w / 4, 3 * h / 4}, {3 * w / 4, 3 * h / 4}}
				for q, c := range centres {
					i := 3 * (c[1]*w + c[0])
					for ch := range 3 {
						if d := int(rgb[i+ch]) - tt.layout[q][ch]; d < -24 || d > 24 {
							t.Fatalf("quadrant %d at %v: got %v, want about %v", q, c, rgb[i:i+3], tt.layout[q])
						}
					}
				}
			})
		}
	}
}
