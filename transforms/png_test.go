package transforms

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/internal/fuzzmem"
)

// pngChunk is one chunk of a hand-built PNG file.
type pngChunk struct {
	typ  string
	data []byte
}

// buildPNG writes the signature and chunks, each with its CRC.
func buildPNG(chunks ...pngChunk) []byte {
	b := []byte(pngSignature)
	for _, c := range chunks {
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.data)))
		start := len(b)
		b = append(b, c.typ...)
		b = append(b, c.data...)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	}
	return b
}

func ihdr(w, h int, depth, colorType, interlace byte) pngChunk {
	d := binary.BigEndian.AppendUint32(nil, uint32(w))
	d = binary.BigEndian.AppendUint32(d, uint32(h))
	return pngChunk{"IHDR", append(d, depth, colorType, 0, 0, interlace)}
}

// filterRows applies PNG filters (spec section 9) to rows of w*bpp bytes,
// row y with filters[y % len(filters)], and returns the raw image data:
// a filter byte before each filtered row. Written from the spec, not from
// the decoder, so it checks unfilterRow independently.
func filterRows(pix []byte, w, h, bpp int, filters []byte) []byte {
	stride := w * bpp
	var raw []byte
	prev := make([]byte, stride)
	for y := range h {
		cur := pix[y*stride : (y+1)*stride]
		ft := filters[y%len(filters)]
		raw = append(raw, ft)
		for i := range stride {
			var a, b, c int
			if i >= bpp {
				a, c = int(cur[i-bpp]), int(prev[i-bpp])
			}
			b = int(prev[i])
			var pred int
			switch ft {
			case filterSub:
				pred = a
			case filterUp:
				pred = b
			case filterAverage:
				pred = (a + b) / 2
			case filterPaeth:
				p := a + b - c
				pa, pb, pc := abs(p-a), abs(p-b), abs(p-c)
				switch {
				case pa <= pb && pa <= pc:
					pred = a
				case pb <= pc:
					pred = b
				default:
					pred = c
				}
			}
			raw = append(raw, cur[i]-byte(pred))
		}
		prev = cur
	}
	return raw
}

func zlibCompress(t testing.TB, raw []byte, level int) []byte {
	var buf bytes.Buffer
	zw, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(raw)
	zw.Close()
	return buf.Bytes()
}

// fastPNG makes an 8-bit RGB (bpp 3) or RGBA (bpp 4) PNG of the noise
// image with the given filters, its zlib stream split into IDAT chunks of
// at most idatSize bytes, and extra chunks before the first IDAT.
func fastPNG(t testing.TB, w, h, bpp int, filters []byte, level, idatSize int, extra ...pngChunk) []byte {
	pix := make([]byte, w*h*bpp)
	fillRandom(pix, uint64(w*h+bpp))
	// Smooth it a little so the filters and matches have something to do.
	for i := bpp; i < len(pix); i++ {
		pix[i] = pix[i-bpp]/2 + pix[i]/4
	}
	z := zlibCompress(t, filterRows(pix, w, h, bpp, filters), level)
	colorType := byte(2)
	if bpp == 4 {
		colorType = 6
	}
	chunks := append([]pngChunk{ihdr(w, h, 8, colorType, 0)}, extra...)
	for len(z) > 0 {
		n := min(len(z), idatSize)
		chunks = append(chunks, pngChunk{"IDAT", z[:n]})
		z = z[n:]
	}
	return buildPNG(append(chunks, pngChunk{"IEND", nil})...)
}

// stdPixels decodes with image/png and returns the R, G, B of every pixel,
// or the error.
func stdPixels(data []byte) ([]byte, int, int, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, 0, 0, err
	}
	b := img.Bounds()
	rgb := make([]byte, 3*b.Dx()*b.Dy())
	convertToRGB(rgb, b.Dx(), img)
	return rgb, b.Dx(), b.Dy(), nil
}

// fastPixels packs the fast path's pixels as RGB.
func fastPixels(p pixels) []byte {
	rgb := make([]byte, 0, 3*p.w*p.h)
	for y := range p.h {
		row := p.pix[y*p.stride:]
		for x := range p.w {
			rgb = append(rgb, row[p.bpp*x:p.bpp*x+3]...)
		}
	}
	return rgb
}

// Valid RGB and RGBA files, every filter type (alone and mixed), every
// block type (stored, fixed, dynamic Huffman), one or many IDAT chunks,
// ancillary chunks: the fast path takes them all and gives image/png's
// pixels.
func TestPNGFastPathMatchesImagePNG(t *testing.T) {
	all := []byte{filterNone, filterSub, filterUp, filterAverage, filterPaeth}
	text := pngChunk{"tEXt", []byte("Comment\x00made by png_test.go")}
	tests := []struct {
		name          string
		w, h, bpp     int
		filters       []byte
		level, split  int
		extra         []pngChunk
		stdlibEncoder bool // encode with image/png instead
	}{
		{"rgba none", 37, 11, 4, []byte{filterNone}, 6, 1 << 20, nil, false},
		{"rgba sub", 37, 11, 4, []byte{filterSub}, 6, 1 << 20, nil, false},
		{"rgba up", 37, 11, 4, []byte{filterUp}, 6, 1 << 20, nil, false},
		{"rgba average", 37, 11, 4, []byte{filterAverage}, 6, 1 << 20, nil, false},
		{"rgba paeth", 37, 11, 4, []byte{filterPaeth}, 6, 1 << 20, nil, false},
		{"rgb mixed", 41, 13, 3, all, 6, 1 << 20, nil, false},
		{"rgb average first row", 41, 13, 3, []byte{filterAverage, filterPaeth}, 6, 1 << 20, nil, false},
		{"rgba stored blocks", 64, 9, 4, all, zlib.NoCompression, 1 << 20, nil, false},
		{"rgba huffman only", 64, 9, 4, all, zlib.HuffmanOnly, 1 << 20, nil, false},
		{"rgba best compression", 300, 200, 4, all, zlib.BestCompression, 1 << 20, nil, false},
		{"rgb fixed huffman (tiny)", 2, 2, 3, all, 6, 1 << 20, nil, false},
		{"rgba 1x1", 1, 1, 4, []byte{filterPaeth}, 6, 1 << 20, nil, false},
		{"rgba many IDAT chunks", 120, 40, 4, all, 6, 97, nil, false},
		{"rgba ancillary chunk", 30, 10, 4, all, 6, 1 << 20, []pngChunk{text}, false},
		{"rgba empty IDAT chunk", 30, 10, 4, all, 6, 1 << 20, []pngChunk{{"IDAT", nil}}, false},
		{"image/png rgba", 200, 150, 4, nil, 0, 0, nil, true},
		{"image/png rgb", 200, 150, 3, nil, 0, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			if tt.stdlibEncoder {
				rgb := gradientNoiseRGB(tt.w, tt.h, 61, 20)
				if tt.bpp == 4 {
					data = encodePNG(t, withAlpha(rgb, tt.w, tt.h))
				} else {
					data = encodePNG(t, rgbToRGBA(rgb, tt.w, tt.h))
				}
			} else {
				data = fastPNG(t, tt.w, tt.h, tt.bpp, tt.filters, tt.level, tt.split, tt.extra...)
			}
			want, w, h, err := stdPixels(data)
			if err != nil {
				t.Fatalf("image/png: %v", err)
			}
			var d pngDecoder
			p, err := d.decode(data)
			if err != nil {
				t.Fatalf("fast path: %v", err)
			}
			if p.w != w || p.h != h || p.bpp != tt.bpp {
				t.Fatalf("fast path: %dx%d bpp %d, want %dx%d bpp %d", p.w, p.h, p.bpp, w, h, tt.bpp)
			}
			if got := fastPixels(p); !bytes.Equal(got, want) {
				t.Fatal("fast path pixels differ from image/png")
			}
		})
	}
}

// Files the fast path declines, each with its exact reason. Whatever the
// reason, Apply gives exactly image/png's answer: its pixels when it
// decodes the file, ErrDecode when it does not.
func TestPNGFastPathDeclines(t *testing.T) {
	good := fastPNG(t, 16, 8, 4, []byte{filterPaeth, filterSub}, 6, 40)
	rgbIHDR := ihdr(16, 8, 8, 2, 0)
	pix := make([]byte, 16*8*3)
	fillRandom(pix, 71)
	z := zlibCompress(t, filterRows(pix, 16, 8, 3, []byte{filterUp}), 6)
	iend := pngChunk{"IEND", nil}
	flip := func(data []byte, i int) []byte {
		b := bytes.Clone(data)
		b[i] ^= 0x40
		return b
	}
	withBadFilter := func() []byte {
		raw := filterRows(pix, 16, 8, 3, []byte{filterUp})
		raw[3*(1+16*3)] = 5 // row 3's filter type
		return buildPNG(rgbIHDR, pngChunk{"IDAT", zlibCompress(t, raw, 6)}, iend)
	}
	// The zlib stream with its Adler-32 trailer changed.
	badAdler := bytes.Clone(z)
	badAdler[len(badAdler)-1] ^= 1
	// A zlib stream with a preset dictionary flag (FDICT) and a valid FCHECK.
	fdict := append([]byte{0x78, 0xbb}, z[2:]...)

	gray := image.NewGray(image.Rect(0, 0, 5, 4))
	pal := palettedImage(5, 4, 72)
	deep := image.NewNRGBA64(image.Rect(0, 0, 5, 4))
	fillRandom(deep.Pix, 73)

	tests := []struct {
		name    string
		data    []byte
		fastErr error // the fast path's exact error
		stdOK   bool  // image/png decodes it
	}{
		{"gray", encodePNG(t, gray), errPNGUnsupported, true},
		{"paletted", encodePNG(t, pal), errPNGUnsupported, true},
		{"16-bit", encodePNG(t, deep), errPNGUnsupported, true},
		{"interlaced", buildPNG(ihdr(16, 8, 8, 2, 1), pngChunk{"IDAT", z}, iend), errPNGUnsupported, false},
		{"tRNS", buildPNG(rgbIHDR, pngChunk{"tRNS", []byte{0, 1, 0, 2, 0, 3}}, pngChunk{"IDAT", z}, iend), errPNGUnsupported, true},
		{"suggested palette", buildPNG(rgbIHDR, pngChunk{"PLTE", []byte{1, 2, 3}}, pngChunk{"IDAT", z}, iend), errPNGUnsupported, true},
		{"ancillary chunk before IHDR", buildPNG(pngChunk{"tEXt", []byte("a\x00b")}, rgbIHDR, pngChunk{"IDAT", z}, iend), errPNGUnsupported, true},
		{"not a PNG", []byte("GIF89a......"), errPNGStructure, false},
		{"bad CRC", flip(good, 30), errPNGStructure, false},
		{"truncated", good[:len(good)-20], errPNGStructure, false},
		{"no IEND", good[:len(good)-12], errPNGStructure, false},
		{"IDAT before IHDR", buildPNG(pngChunk{"IDAT", z}, rgbIHDR, iend), errPNGStructure, false},
		{"IEND without IDAT", buildPNG(rgbIHDR, iend), errPNGStructure, false},
		{"IEND with data", buildPNG(rgbIHDR, pngChunk{"IDAT", z}, pngChunk{"IEND", []byte{0}}), errPNGStructure, false},
		{"unknown filter type", withBadFilter(), errPNGFilter, false},
		{"bad Adler-32", buildPNG(rgbIHDR, pngChunk{"IDAT", badAdler}, iend), errZlibChecksum, false},
		{"preset dictionary", buildPNG(rgbIHDR, pngChunk{"IDAT", fdict}, iend), errZlibHeader, false},
		// image/png ignores bytes after the zlib stream when its read-ahead
		// happened to swallow them; the fast path leaves such files to it.
		{"bytes after the zlib stream", buildPNG(rgbIHDR, pngChunk{"IDAT", append(bytes.Clone(z), 0, 0)}, iend), errZlibTrailing, true},
		{"zlib stream cut short", buildPNG(rgbIHDR, pngChunk{"IDAT", z[:len(z)-9]}, iend), errInflateTruncated, false},
		{"too little pixel data", buildPNG(ihdr(16, 9, 8, 2, 0), pngChunk{"IDAT", z}, iend), errInflateSize, false},
		{"too much pixel data", buildPNG(ihdr(16, 7, 8, 2, 0), pngChunk{"IDAT", z}, iend), errInflateSize, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d pngDecoder
			if _, err := d.decode(tt.data); !errors.Is(err, tt.fastErr) {
				t.Fatalf("fast path error %v, want %v", err, tt.fastErr)
			}
			want, w, h, stdErr := stdPixels(tt.data)
			if (stdErr == nil) != tt.stdOK {
				t.Fatalf("image/png error %v; the test expects success %v", stdErr, tt.stdOK)
			}
			if !tt.stdOK {
				_, _, _, cfgErr := DecodeConfig(tt.data)
				spec := Spec{Width: 8, Height: 8, Mode: Letterbox, DType: dtype.F16}
				_, err := mustTransformer(t, spec).Apply(tt.data, make([]byte, spec.OutputBytes()))
				if !errors.Is(err, ErrDecode) {
					t.Fatalf("Apply = %v (DecodeConfig %v), want ErrDecode", err, cfgErr)
				}
				return
			}
			spec := Spec{Width: w, Height: h, Mode: None, DType: dtype.F32}
			out := make([]byte, spec.OutputBytes())
			g, err := mustTransformer(t, spec).Apply(tt.data, out)
			if err != nil {
				t.Fatal(err)
			}
			if got := outputRGB(t, out, spec, g); !bytes.Equal(got, want) {
				t.Fatal("Apply pixels differ from image/png")
			}
		})
	}
}

// Hand-computed rows for each filter: bpp 3, two pixels, the row above
// (10, 20, 30, 40, 50, 60).
func TestUnfilterRowHandComputed(t *testing.T) {
	prev := []byte{10, 20, 30, 40, 50, 60}
	filtered := []byte{1, 2, 3, 4, 5, 6}
	tests := []struct {
		ft   byte
		prev []byte
		want []byte
	}{
		{filterNone, prev, []byte{1, 2, 3, 4, 5, 6}},
		// Sub: 4+1, 5+2, 6+3.
		{filterSub, prev, []byte{1, 2, 3, 5, 7, 9}},
		{filterUp, prev, []byte{11, 22, 33, 44, 55, 66}},
		{filterUp, nil, []byte{1, 2, 3, 4, 5, 6}},
		// Average: 1+10/2, 2+20/2, 3+30/2 = 6, 12, 18; then 4+(6+40)/2 = 27,
		// 5+(12+50)/2 = 36, 6+(18+60)/2 = 45.
		{filterAverage, prev, []byte{6, 12, 18, 27, 36, 45}},
		{filterAverage, nil, []byte{1, 2, 3, 4, 6, 7}},
		// Paeth, first pixel: a = c = 0, b = 10: pa = 10, pb = 0 -> b.
		// 11, 22, 33. Second: a = 11, b = 40, c = 10: p = 41, pa = 30,
		// pb = 1, pc = 31 -> b: 44; likewise 55, 66.
		{filterPaeth, prev, []byte{11, 22, 33, 44, 55, 66}},
		{filterPaeth, nil, []byte{1, 2, 3, 5, 7, 9}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("filter %d prev %v", tt.ft, tt.prev != nil), func(t *testing.T) {
			cur := bytes.Clone(filtered)
			if !unfilterRow(tt.ft, cur, tt.prev, 3) {
				t.Fatal("filter refused")
			}
			if !bytes.Equal(cur, tt.want) {
				t.Fatalf("got %v, want %v", cur, tt.want)
			}
		})
	}
	if unfilterRow(5, bytes.Clone(filtered), prev, 3) {
		t.Fatal("filter type 5 accepted")
	}
}

// Wraparound: byte sums are modulo 256, in the SWAR Up filter too.
func TestAddBytesWraps(t *testing.T) {
	dst := []byte{200, 255, 0, 128, 1, 2, 3, 4, 250, 7}
	src := []byte{100, 1, 0, 128, 255, 254, 253, 252, 10, 9}
	want := make([]byte, len(dst))
	for i := range dst {
		want[i] = dst[i] + src[i]
	}
	addBytes(dst, src)
	if !bytes.Equal(dst, want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
}

// A Transformer decodes fast-path PNGs without allocating.
func TestApplyPNGDoesNotAllocate(t *testing.T) {
	data := fastPNG(t, 320, 180, 4, []byte{filterAverage, filterPaeth, filterSub}, 6, 8192)
	spec := Spec{Width: 160, Height: 160, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	if _, err := tr.Apply(data, out); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		if _, err := tr.Apply(data, out); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per Apply, want 0", allocs)
	}
}

// fixCRCs rewrites the CRC of every complete chunk, so that fuzzed bytes
// reach the chunk contents instead of stopping at the checksum.
func fixCRCs(data []byte) []byte {
	b := bytes.Clone(data)
	for p := len(pngSignature); p+12 <= len(b); {
		n := int(binary.BigEndian.Uint32(b[p:]))
		if n < 0 || n > len(b)-p-12 {
			break
		}
		binary.BigEndian.PutUint32(b[p+8+n:], crc32.ChecksumIEEE(b[p+4:p+8+n]))
		p += 12 + n
	}
	return b
}

func pngFuzzSeeds(t testing.TB) map[string][]byte {
	all := []byte{filterNone, filterSub, filterUp, filterAverage, filterPaeth}
	return map[string][]byte{
		"rgba-all-filters": fastPNG(t, 9, 7, 4, all, zlib.DefaultCompression, 1<<20),
		"rgb-all-filters":  fastPNG(t, 9, 7, 3, all, zlib.BestCompression, 1<<20),
		"rgba-stored":      fastPNG(t, 6, 3, 4, all, zlib.NoCompression, 1<<20),
		"rgb-split-idat":   fastPNG(t, 12, 5, 3, all, zlib.DefaultCompression, 16),
		"image-png-rgba":   encodePNG(t, withAlpha(gradientNoiseRGB(10, 6, 91, 30), 10, 6)),
	}
}

// FuzzPNG holds the fast path to its promise: whenever it accepts a file,
// image/png decodes it to the same pixels. Chunk CRCs are repaired first
// so mutations get past them.
//
// Seeds: testdata/fuzz/FuzzPNG (written by TestPNGFuzzSeedCorpus -update).
func FuzzPNG(f *testing.F) {
	var d pngDecoder
	f.Fuzz(func(t *testing.T, data []byte) {
		data = fixCRCs(data)
		p, err := fuzzmem.Call(t, pngAllocBound, func() (pixels, error) { return d.decode(data) })
		if err != nil {
			return
		}
		want, w, h, err := stdPixels(data)
		if err != nil {
			t.Fatalf("fast path accepts %dx%d, image/png: %v", p.w, p.h, err)
		}
		if p.w != w || p.h != h || !bytes.Equal(fastPixels(p), want) {
			t.Fatal("fast path pixels differ from image/png")
		}
	})
}

// The FuzzPNG and FuzzInflate seed corpora: every file is on the fast path
// (PNG) or a valid stream (zlib). With -update they are rewritten.
func TestPNGFuzzSeedCorpus(t *testing.T) {
	dirs := map[string]map[string][]byte{"testdata/fuzz/FuzzPNG": pngFuzzSeeds(t), "testdata/fuzz/FuzzInflate": {}}
	for name, p := range testPayloads() {
		if len(p) < 2000 {
			dirs["testdata/fuzz/FuzzInflate"][name] = zlibCompress(t, p, zlib.BestCompression)
		}
	}
	dirs["testdata/fuzz/FuzzInflate"]["fixed-and-matches"] = zlibCompress(t, bytes.Repeat([]byte("warehouse "), 40), zlib.DefaultCompression)
	dirs["testdata/fuzz/FuzzInflate"]["stored"] = zlibCompress(t, []byte("stored block"), zlib.NoCompression)
	for dir, seeds := range dirs {
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range seeds {
				if err := os.WriteFile(filepath.Join(dir, name), encodeCorpusFile(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("%s: %v (run go test -run TestPNGFuzzSeedCorpus -update to create it)", dir, err)
		}
		for _, e := range entries {
			file, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			data, err := decodeCorpusFile(file)
			if err != nil {
				t.Fatalf("%s/%s: %v", dir, e.Name(), err)
			}
			if strings.HasPrefix(e.Name(), "regress-") {
				continue // a failing input kept as a regression test (docs/fuzzing.md)
			}
			if strings.HasSuffix(dir, "FuzzPNG") {
				var d pngDecoder
				if _, err := d.decode(data); err != nil {
					t.Errorf("%s: not on the fast path: %v", e.Name(), err)
				}
				continue
			}
			want, _, err := stdInflate(data, 1<<20)
			if err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			var inf inflater
			if err := inf.inflateZlib(make([]byte, len(want)), data); err != nil {
				t.Errorf("%s: %v", e.Name(), err)
			}
		}
	}
}

// The fast PNG path through every resampler pass combination (both axes,
// one, none, upscale): its tensor equals ApplyRGB of image/png's pixels,
// for RGB and RGBA and every filter type.
func TestApplyPNGMatchesStdPixels(t *testing.T) {
	all := []byte{filterNone, filterSub, filterUp, filterAverage, filterPaeth}
	for _, bpp := range []int{3, 4} {
		data := fastPNG(t, 48, 32, bpp, all, 6, 1<<20)
		want, w, h, err := stdPixels(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range []Spec{
			{Width: 24, Height: 24, Mode: Letterbox, DType: dtype.F16},
			{Width: 48, Height: 20, Mode: Stretch, DType: dtype.F32},
			{Width: 30, Height: 32, Mode: Stretch, DType: dtype.F16},
			{Width: 48, Height: 32, Mode: None, DType: dtype.F32},
			{Width: 96, Height: 96, Mode: Letterbox, DType: dtype.F16},
		} {
			name := fmt.Sprintf("bpp%d %s %dx%d", bpp, spec.Mode, spec.Width, spec.Height)
			tr := mustTransformer(t, spec)
			got := make([]byte, spec.OutputBytes())
			if _, err := tr.Apply(data, got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			exp := make([]byte, spec.OutputBytes())
			if _, err := mustTransformer(t, spec).ApplyRGB(want, w, h, 3*w, exp); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !bytes.Equal(got, exp) {
				t.Errorf("%s: Apply of the PNG differs from ApplyRGB of image/png's pixels", name)
			}
			// The same Transformer again, its buffers reused.
			if _, err := tr.Apply(data, got); err != nil || !bytes.Equal(got, exp) {
				t.Errorf("%s: second Apply differs (err %v)", name, err)
			}
		}
	}
}
