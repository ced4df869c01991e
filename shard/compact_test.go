package shard

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// letterboxSamples returns n random samples of l whose images are pad
// outside a random rectangle per sample (some all pad, some whole), with
// random pixels inside that may equal the pad value too: what a letterbox
// gives, and the edge cases of the region search.
func letterboxSamples(rng *rand.Rand, l Layout, n int) []Sample {
	out := randomSamples(rng, l, n)
	W, H := l.Width, l.Height
	for i := range out {
		img := out[i].Image
		x0, x1 := rng.IntN(W+1), rng.IntN(W+1)
		y0, y1 := rng.IntN(H+1), rng.IntN(H+1)
		switch i % 5 {
		case 0:
			x0, x1, y0, y1 = 0, 0, 0, 0 // all pad
		case 1:
			x0, x1, y0, y1 = 0, W, 0, H // no pad
		case 2:
			x0, x1 = 0, W // a landscape letterbox: full-width rows, pad above and below
			if y0 == y1 {
				y0, y1 = min(y0, H-1), min(y0, H-1)+1
			}
		}
		x0, x1 = min(x0, x1), max(x0, x1)
		y0, y1 = min(y0, y1), max(y0, y1)
		for c := range l.Channels {
			for y := range H {
				for x := range W {
					k := (c*H+y)*W + x
					switch {
					case x < x0 || x >= x1 || y < y0 || y >= y1:
						img[k] = l.Pad
					case rng.IntN(3) == 0:
						img[k] = l.Pad
					}
				}
			}
		}
		if i%5 == 2 { // the region's first row spans the width
			img[y0*W], img[y0*W+W-1] = l.Pad^1, l.Pad^1
		}
	}
	return out
}

// TestCompactRoundTrip writes U8 samples compact and not, and checks that
// every image read back from the compact shard (Image, ImageInto,
// RestoreImage of RegionSpan's bytes) is the image written, byte for byte,
// every CRC verifies, the compact shard is smaller and a rewrite is
// byte-identical (deterministic).
func TestCompactRoundTrip(t *testing.T) {
	for _, pad := range []uint8{0, 114, 255} {
		full := Layout{DType: U8, Width: 9, Height: 7, Channels: 3, MaxBoxes: 3, ExtraF32: 2}
		l := full
		l.Compact, l.Pad = true, pad
		rng := rand.New(rand.NewPCG(uint64(pad), 7))
		samples := letterboxSamples(rng, l, 23)
		b, res := writeShard(t, l, len(samples), samples)
		if res.Bytes != int64(len(b)) || res.SHA256 != sha256.Sum256(b) {
			t.Fatalf("pad %d: Result %+v does not describe the %d-byte file", pad, res, len(b))
		}
		if lo, hi := l.CompactFileSizeRange(len(samples)); res.Bytes < lo || res.Bytes > hi || res.Bytes >= full.FileSize(len(samples)) {
			t.Fatalf("pad %d: %d bytes, want within [%d, %d] and below the full layout's %d", pad, res.Bytes, lo, hi, full.FileSize(len(samples)))
		}
		r := mustParse(t, b)
		if r.Layout() != l || !r.IsCompact() || r.Header().Version != Version5 {
			t.Fatalf("pad %d: Layout %+v compact %v version %d", pad, r.Layout(), r.IsCompact(), r.Header().Version)
		}
		if err := r.Check(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, l.ImageBytes())
		for i, s := range samples {
			compareSample(t, r, i, s)
			r.ImageInto(buf, i)
			if !bytes.Equal(buf, s.Image) {
				t.Fatalf("pad %d sample %d: ImageInto differs", pad, i)
			}
			off, n := r.RegionSpan(i, 1)
			for _, stream := range []bool{false, true} {
				clear(buf)
				r.RestoreImage(buf, b[off:off+int64(n)], i, stream)
				if !bytes.Equal(buf, s.Image) {
					t.Fatalf("pad %d sample %d: RestoreImage (stream %v) differs", pad, i, stream)
				}
			}
			if err := r.VerifySample(i, nil); err != nil {
				t.Fatal(err)
			}
			if err := r.VerifySample(i, buf); err != nil {
				t.Fatal(err)
			}
			region := bytes.Clone(b[off : off+int64(n)])
			if err := r.VerifyRegion(i, region); err != nil {
				t.Fatal(err)
			}
			g := r.Region(i)
			if i%5 == 0 && g.W != 0 || i%5 == 1 && (g.W != l.Width || g.H != l.Height) {
				t.Fatalf("pad %d sample %d: region %+v", pad, i, g)
			}
			if g.W != 0 {
				buf[(g.Y*l.Width + g.X)] ^= 1 // a flip inside the region of the copy is refused
				if err := r.VerifySample(i, buf); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("pad %d sample %d: flipped copy: %v", pad, i, err)
				}
				region[len(region)-1] ^= 0x80 // and so is one in the stored region's copy
				want, _ := r.SampleChecksum(i)
				msg := fmt.Sprintf("shard: corrupt: sample %d: crc32c 0x%08x, the checksum table says 0x%08x",
					i, r.tailChecksum(crc32c(0, r.compactEntry(i), region), i), want)
				if err := r.VerifyRegion(i, region); !errors.Is(err, ErrCorrupt) || err.Error() != msg {
					t.Fatalf("pad %d sample %d: flipped region: %v, want %q", pad, i, err, msg)
				}
			}
			if i%5 == 2 && g.W != l.Width {
				t.Fatalf("pad %d sample %d: region %+v, want full-width rows", pad, i, g)
			}
		}
		// The regions of a run are one range, in order.
		off, n := r.RegionSpan(2, 5)
		if g := r.Region(2); off != g.Offset || int64(n) != r.Region(7).Offset-g.Offset {
			t.Fatalf("RegionSpan(2, 5) = %d, %d", off, n)
		}
		again, _ := writeShard(t, l, len(samples), samples)
		if !bytes.Equal(again, b) {
			t.Fatalf("pad %d: a second write differs", pad)
		}
		// A short shard (late failures) is valid too.
		short, _ := writeShard(t, l, len(samples)+3, samples[:len(samples)-2])
		rs := mustParse(t, short)
		for i, s := range samples[:len(samples)-2] {
			compareSample(t, rs, i, s)
		}
	}
}

// TestCompactCorrupt flips the compact section's fields and checks each is
// refused with its own message, and that a flipped region byte fails the
// sample's CRC.
func TestCompactCorrupt(t *testing.T) {
	l := Layout{DType: U8, Width: 5, Height: 4, Channels: 3, MaxBoxes: 2, Compact: true, Pad: 9}
	samples := letterboxSamples(rand.New(rand.NewPCG(3, 4)), l, 6)
	b, _ := writeShard(t, l, len(samples), samples)
	r := mustParse(t, b)
	h := r.Header()
	compactOffset := int(h.BoxesOffset) - CompactHeaderSize - compactEntrySize*len(samples)
	g2 := r.Region(2)
	cases := []struct {
		name string
		edit func(b []byte)
		want string
	}{
		{"magic", func(b []byte) { b[compactOffset] = 'X' }, `bad compact magic "XWCP", want "TWCP"`},
		{"version", func(b []byte) { b[compactOffset+4] = 2 }, "unsupported compact_version 2, want 1..1"},
		{"reserved", func(b []byte) { b[compactOffset+12] = 1 }, "compact header byte 12 is 1, want 0"},
		{"offset", func(b []byte) { b[compactOffset+16+2*16] ^= 1 }, "sample 2: region_offset"},
		{"outside", func(b []byte) { le.PutUint16(b[compactOffset+16+2*16+8:], uint16(l.Width)) }, "outside the 5x4 image"},
		{"empty region", func(b []byte) { le.PutUint16(b[compactOffset+16+2*16+12:], 0) }, "sample 2: empty region"},
		{"boxes_offset", func(b []byte) { le.PutUint64(b[offBoxesOffset:], 8) }, "boxes_offset 8: no room for the compact table"},
		{"dtype", func(b []byte) { le.PutUint32(b[offDType:], uint32(F16)) }, "shard_version 5 has compact images, dtype 1 (F16), want 2 (U8)"},
	}
	for _, c := range cases {
		bad := bytes.Clone(b)
		c.edit(bad)
		_, err := Parse(bad)
		if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if g2.W == 0 {
		t.Fatal("sample 2 has an empty region; pick another seed")
	}
	bad := bytes.Clone(b)
	bad[g2.Offset] ^= 0x10
	if err := mustParse(t, bad).VerifySample(2, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped region byte: %v", err)
	}
}

// TestCompactSeeds writes the compact shards of testdata/fuzz/FuzzParse
// (run with -update-fuzz-seeds to refresh them).
func TestCompactSeeds(t *testing.T) {
	l := Layout{DType: U8, Width: 4, Height: 3, Channels: 3, MaxBoxes: 2, ExtraF32: 1, Compact: true, Pad: 114}
	samples := letterboxSamples(rand.New(rand.NewPCG(5, 6)), l, 6)
	b, _ := writeShard(t, l, len(samples), samples)
	mustParse(t, b)
	path := filepath.Join("testdata", "fuzz", "FuzzParse", "compact-u8")
	want := []byte("go test fuzz v1\n[]byte(" + quoteBytes(b) + ")\n")
	got, err := os.ReadFile(path)
	if err == nil && bytes.Equal(got, want) {
		return
	}
	if os.Getenv("UPDATE_FUZZ_SEEDS") == "" {
		t.Fatalf("%s is missing or stale: rerun with UPDATE_FUZZ_SEEDS=1", path)
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
}

// quoteBytes is b as a Go string literal, as the fuzz corpus files write it.
func quoteBytes(b []byte) string {
	const hex = "0123456789abcdef"
	out := []byte{'"'}
	for _, c := range b {
		out = append(out, '\\', 'x', hex[c>>4], hex[c&15])
	}
	return string(append(out, '"'))
}

// TestCompactWorkedExample is the worked example of docs/format/shard.md,
// "Compact images", byte for byte where it gives offsets.
func TestCompactWorkedExample(t *testing.T) {
	l := Layout{DType: U8, Width: 4, Height: 3, Channels: 3, MaxBoxes: 1, Compact: true, Pad: 9}
	img0 := bytes.Repeat([]byte{9}, int(l.ImageBytes()))
	img0[1*4+1], img0[2*12+1*4+2] = 200, 7 // (1,1) in channel 0, (2,1) in channel 2
	img1 := bytes.Repeat([]byte{9}, int(l.ImageBytes()))
	b, _ := writeShard(t, l, 2, []Sample{{Image: img0}, {Image: img1}})
	r := mustParse(t, b)
	h := r.Header()
	if h.ImageOffset != 80 || h.BoxesOffset != 136 || h.MaskOffset != 168 || h.MetaOffset != 176 || h.ChecksumOffset != 376 || len(b) != 404 {
		t.Fatalf("header %+v, %d bytes", h, len(b))
	}
	if g := r.Region(0); g != (Region{Offset: 80, X: 1, Y: 1, W: 2, H: 1}) {
		t.Fatalf("region 0 %+v", g)
	}
	if g := r.Region(1); g != (Region{Offset: 86}) {
		t.Fatalf("region 1 %+v", g)
	}
	if got := b[80:88]; !bytes.Equal(got, []byte{200, 9, 9, 9, 9, 7, 0, 0}) {
		t.Fatalf("regions and padding % x", got)
	}
	if got := b[88:104]; !bytes.Equal(got, append([]byte("TWCP\x01\x00\x00\x00\x09"), make([]byte, 7)...)) {
		t.Fatalf("compact header % x", got)
	}
	if !bytes.Equal(r.Image(0), img0) || !bytes.Equal(r.Image(1), img1) {
		t.Fatal("images differ")
	}
}

// BenchmarkRestore restores a 384x384 letterboxed 1080p frame (the
// 384x216 region, pad above and below): bytes/s are the image bytes handed
// out, to compare with what a disk delivers.
func BenchmarkRestore(b *testing.B) {
	l := Layout{DType: U8, Width: 384, Height: 384, Channels: 3, Compact: true, Pad: 114}
	g := Region{X: 0, Y: 84, W: 384, H: 216}
	src := make([]byte, g.Bytes(3))
	for k := range src {
		src[k] = byte(k * 7)
	}
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			// The rows of a 32-row batch, as the Go reader restores into
			// (one image would stay in the caches).
			batch := make([]byte, 32*l.ImageBytes())
			b.SetBytes(l.ImageBytes())
			k := 0
			for b.Loop() {
				restore(batch[k*int(l.ImageBytes()):(k+1)*int(l.ImageBytes())], src, l, g, nil, stream)
				k = (k + 1) % 32
			}
		})
	}
}

// TestCheckedCopies: a sample's image bytes copied from the file with
// CopyCRC32C and checked with CheckImageCRC, and a compact sample's region
// bytes restored with RestoreImageChecked, hand out the image Image does
// and pass; with one stored byte of the sample flipped they fail with
// VerifySample's error (the CRC of the stored bytes against the table's)
// and still hand out what is stored. Sizes reach the fold (images and
// region bands of 1,024 bytes or more) and stay below it (9-byte rows), in
// one call or, for full images, in pieces as the Go reader copies them.
func TestCheckedCopies(t *testing.T) {
	for _, l := range []Layout{
		{DType: U8, Width: 9, Height: 7, Channels: 3, MaxBoxes: 2, ExtraF32: 1},
		{DType: F16, Width: 384, Height: 384, Channels: 3, MaxBoxes: 2},
		{DType: U8, Width: 9, Height: 7, Channels: 3, MaxBoxes: 2, ExtraF32: 1, Compact: true, Pad: 114},
		{DType: U8, Width: 384, Height: 288, Channels: 3, MaxBoxes: 2, Compact: true},
	} {
		t.Run(l.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(l.Width), 11))
			samples := letterboxSamples(rng, l, 10)
			b, _ := writeShard(t, l, len(samples), samples)
			dst := make([]byte, l.ImageBytes()+64)
			// checked copies sample i of r, whose file is file, into dst.
			checked := func(r *Reader, file []byte, i int, stream bool) error {
				if l.Compact {
					off, n := r.RegionSpan(i, 1)
					return r.RestoreImageChecked(i, dst, file[off:off+int64(n)], stream)
				}
				off, n := r.ImageSpan(i, 1)
				src, crc := file[off:off+int64(n)], uint32(0)
				for p := 0; p < n; p += 40000 { // in pieces, each continuing the CRC
					crc = CopyCRC32C(crc, dst[p:], src[p:min(p+40000, n)], stream)
				}
				return r.CheckImageCRC(i, crc)
			}
			r := mustParse(t, b)
			for i, s := range samples {
				for k := range dst {
					dst[k] = 0xEE
				}
				if err := checked(r, b, i, i%2 == 0); err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
				if !bytes.Equal(dst[:l.ImageBytes()], s.Image) {
					t.Fatalf("sample %d: the copy differs from the image written", i)
				}
				if bytes.Count(dst[l.ImageBytes():], []byte{0xEE}) != 64 {
					t.Fatalf("sample %d: bytes past the image written", i)
				}
			}
			for i := range samples {
				bad := bytes.Clone(b)
				var at int64
				if l.Compact {
					g := r.Region(i)
					if g.W == 0 {
						continue // nothing stored to flip
					}
					at = g.Offset + int64(g.Bytes(l.Channels))/2
				} else {
					off, n := r.ImageSpan(i, 1)
					at = off + int64(n)/2
				}
				bad[at] ^= 0x04
				rb := mustParse(t, bad)
				want := rb.VerifySample(i, nil)
				if !errors.Is(want, ErrCorrupt) {
					t.Fatalf("sample %d: VerifySample of the flipped shard: %v", i, want)
				}
				if err := checked(rb, bad, i, false); err == nil || err.Error() != want.Error() {
					t.Fatalf("sample %d, flipped: %v, want %v", i, err, want)
				}
				img := make([]byte, l.ImageBytes())
				rb.ImageInto(img, i)
				if !bytes.Equal(dst[:l.ImageBytes()], img) {
					t.Fatalf("sample %d, flipped: the copy is not what is stored", i)
				}
			}
		})
	}
}

// TestRestoreStreamed: restore writes the image the definition gives (the
// pad outside the region, the region's rows inside), byte for byte, with
// and without stores past the caches, for pad bands above and below
// streamFillMin, pads 0 and not, a destination aligned and not (Copy then
// falls back), and regions that are bands, columns, all pad and whole.
func TestRestoreStreamed(t *testing.T) {
	for _, l := range []Layout{
		{DType: U8, Width: 384, Height: 384, Channels: 3, Compact: true},
		{DType: U8, Width: 203, Height: 157, Channels: 3, Compact: true},
	} {
		W, H := l.Width, l.Height
		for _, g := range []Region{
			{X: 0, Y: (H - H*9/16) / 2, W: W, H: H * 9 / 16}, // letterbox: bands above and below
			{X: (W - W*9/16) / 2, Y: 0, W: W * 9 / 16, H: H}, // pillarbox: columns
			{X: 3, Y: 5, W: W - 7, H: H - 11},
			{},                       // all pad
			{X: 0, Y: 0, W: W, H: H}, // no pad
		} {
			src := make([]byte, g.Bytes(l.Channels))
			for k := range src {
				src[k] = byte(k*31 + 7)
			}
			for _, padValue := range []byte{0, 114, 255} {
				l.Pad = padValue
				want := make([]byte, l.ImageBytes())
				for c := range l.Channels {
					for y := range H {
						for x := range W {
							v := padValue
							if g.W > 0 && x >= g.X && x < g.X+g.W && y >= g.Y && y < g.Y+g.H {
								v = src[(c*g.H+y-g.Y)*g.W+x-g.X]
							}
							want[(c*H+y)*W+x] = v
						}
					}
				}
				for _, skew := range []int{0, 1} {
					for _, stream := range []bool{false, true} {
						buf := make([]byte, int(l.ImageBytes())+64)
						base := (32 - int(uintptr(unsafe.Pointer(&buf[0]))%32)) % 32 // a 32-byte boundary
						dst := buf[base+skew : base+skew+int(l.ImageBytes())]
						for k := range dst {
							dst[k] = 0xA5
						}
						restore(dst, src, l, g, nil, stream)
						if !bytes.Equal(dst, want) {
							t.Fatalf("%dx%d region %+v pad %d skew %d stream %v: the image differs", W, H, g, padValue, skew, stream)
						}
					}
				}
			}
		}
	}
}
