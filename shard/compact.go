package shard

import (
	"fmt"
	"sync/atomic"
)

// The compact image section (Version5, U8 only; docs/format/shard.md,
// "Compact images"). It replaces the images section:
//
//	+--------------------------------------------+ image_offset = 80
//	| regions: sample i's C x h_i x w_i u8 bytes, |
//	|          back to back in sample order      |
//	| zero padding to a multiple of 8            |
//	+--------------------------------------------+ compact_offset
//	| compact header                  16 bytes   |
//	| table [N] of 16-byte entries               |
//	+--------------------------------------------+ boxes_offset = compact_offset + 16 + 16*N
//
// The compact header:
//
//	off size field
//	0   4    magic "TWCP"
//	4   4    compact_version u32 (1)
//	8   1    pad_value u8
//	9   7    zero
//
// One table entry:
//
//	off size field
//	0   8    region_offset u64 (absolute file offset of the region)
//	8   2    x u16, 10 y u16, 12 w u16, 14 h u16
//
// Sample i's image is pad_value everywhere outside the rectangle
// [x, x+w) x [y, y+h) of every channel; inside it, channel c's row r is the
// w bytes at region_offset + (c*h + r)*w. A region with w or h 0 is empty
// (then x, y, w and h are all 0) and the image all pad_value. The Writer
// stores the smallest rectangle that holds every pixel differing from the
// pad value in any channel, so restoring is exact for any image.
//
// Sample i's CRC-32C covers its table entry, then its region bytes, then
// its boxes, mask, record and extras: everything its restored image
// depends on except pad_value, which readers compare with the warehouse
// manifest (it is part of the Layout).

// CompactMagic is the first four bytes of the compact header.
const CompactMagic = "TWCP"

// CompactHeaderSize is the size of the compact header; the table follows it.
const CompactHeaderSize = 16

// compactEntrySize is the size of one entry of the compact table.
const compactEntrySize = 16

// CompactVersion is the compact_version field of the compact header.
type CompactVersion uint32

const (
	// CompactVersion1 is the region table of 16-byte entries.
	CompactVersion1 CompactVersion = 1

	MinSupportedCompactVersion = CompactVersion1
	MaxSupportedCompactVersion = CompactVersion1
)

// compactEntryBytes is what the compact table adds per sample: 16 for a
// Compact layout, 0 otherwise.
func (l Layout) compactEntryBytes() int64 {
	if l.Compact {
		return compactEntrySize
	}
	return 0
}

// Region is where a compact shard's sample keeps its image: the rectangle
// [X, X+W) x [Y, Y+H) of every channel, its C*W*H bytes at Offset in the
// file; every other pixel is the pad value.
type Region struct {
	Offset     int64
	X, Y, W, H int
}

// Bytes is the size of the region's stored bytes for c channels.
func (g Region) Bytes(c int) int { return c * g.W * g.H }

// compactSections places the sections of a compact shard of samples samples
// whose regions take regionBytes bytes.
func (l Layout) compactSections(samples, regionBytes uint64, c sizeCalc, withMeta, withChecksums bool) (s sections, ok bool) {
	s.imageOffset = HeaderSize
	s.compactOffset = c.add(c.add(s.imageOffset, regionBytes), sectionAlign-1) &^ (sectionAlign - 1)
	s.boxesOffset = c.add(c.add(s.compactOffset, CompactHeaderSize), c.mul(samples, compactEntrySize))
	return l.sectionsFrom(s, samples, c, withMeta, withChecksums)
}

// CompactFileSizeRange is the smallest and the largest size of a compact
// shard of l holding samples samples (every image all pad, every image
// stored whole); -1, -1 when l is not Compact or the size overflows.
func (l Layout) CompactFileSizeRange(samples int) (lo, hi int64) {
	if !l.Compact || l.Validate() != nil || samples < 0 {
		return -1, -1
	}
	var c sizeCalc
	smin, ok1 := l.compactSections(uint64(samples), 0, c, true, true)
	smax, ok2 := l.sections(uint64(samples), true, true)
	if !ok1 || !ok2 {
		return -1, -1
	}
	return int64(smin.fileSize), int64(smax.fileSize)
}

// findRegion returns the smallest rectangle of a CHW u8 image of l that
// holds every pixel differing from pad in any channel.
func findRegion(l Layout, img []byte) (x, y, w, h int) {
	W, H := l.Width, l.Height
	x0, y0, x1, y1 := W, H, -1, -1
	for c := range l.Channels {
		plane := img[c*W*H : (c+1)*W*H]
		for r := range H {
			row := plane[r*W : (r+1)*W]
			first := -1
			for k, v := range row {
				if v != l.Pad {
					first = k
					break
				}
			}
			if first < 0 {
				continue
			}
			last := W - 1
			for row[last] == l.Pad {
				last--
			}
			x0, x1 = min(x0, first), max(x1, last)
			y0, y1 = min(y0, r), max(y1, r)
		}
	}
	if x1 < 0 {
		return 0, 0, 0, 0
	}
	return x0, y0, x1 - x0 + 1, y1 - y0 + 1
}

// encodeCompactEntry writes g into a 16-byte table entry.
func encodeCompactEntry(b []byte, g Region) {
	le.PutUint64(b[0:], uint64(g.Offset))
	le.PutUint16(b[8:], uint16(g.X))
	le.PutUint16(b[10:], uint16(g.Y))
	le.PutUint16(b[12:], uint16(g.W))
	le.PutUint16(b[14:], uint16(g.H))
}

func decodeCompactEntry(b []byte) Region {
	return Region{Offset: int64(le.Uint64(b[0:])), X: int(le.Uint16(b[8:])), Y: int(le.Uint16(b[10:])),
		W: int(le.Uint16(b[12:])), H: int(le.Uint16(b[14:]))}
}

// encodeCompactHeader writes the compact header for pad into b.
func encodeCompactHeader(b []byte, pad uint8) {
	clear(b[:CompactHeaderSize])
	copy(b, CompactMagic)
	le.PutUint32(b[4:], uint32(CompactVersion1))
	b[8] = pad
}

// parseCompact validates the compact section of a shard whose header and
// other sections Parse accepted: the compact header at s.compactOffset,
// every table entry (inside the image, regions back to back from
// image_offset in sample order) and that the regions end where the padding
// before compact_offset starts. It returns pad_value.
func parseCompact(b []byte, l Layout, samples int, s sections) (uint8, error) {
	hdr := b[s.compactOffset : s.compactOffset+CompactHeaderSize]
	if m := string(hdr[:len(CompactMagic)]); m != CompactMagic {
		return 0, corruptf("bad compact magic %q, want %q", m, CompactMagic)
	}
	if v := CompactVersion(le.Uint32(hdr[4:])); v < MinSupportedCompactVersion || v > MaxSupportedCompactVersion {
		return 0, corruptf("unsupported compact_version %d, want %d..%d", v, MinSupportedCompactVersion, MaxSupportedCompactVersion)
	}
	for k := 9; k < CompactHeaderSize; k++ {
		if hdr[k] != 0 {
			return 0, corruptf("compact header byte %d is %d, want 0", k, hdr[k])
		}
	}
	table := b[s.compactOffset+CompactHeaderSize : s.boxesOffset]
	next := uint64(s.imageOffset)
	for i := range samples {
		g := decodeCompactEntry(table[i*compactEntrySize:])
		switch {
		case uint64(g.Offset) != next:
			return 0, corruptf("sample %d: region_offset %d, want %d", i, uint64(g.Offset), next)
		case (g.W == 0 || g.H == 0) && g != Region{Offset: g.Offset}:
			return 0, corruptf("sample %d: empty region %dx%d at (%d, %d), want 0x0 at (0, 0)", i, g.W, g.H, g.X, g.Y)
		case g.X+g.W > l.Width || g.Y+g.H > l.Height:
			return 0, corruptf("sample %d: region %dx%d at (%d, %d) outside the %dx%d image", i, g.W, g.H, g.X, g.Y, l.Width, l.Height)
		}
		// At most 4*65535*65535 per sample and samples <= len(b)/16:
		// no overflow in 64 bits.
		next += uint64(g.Bytes(l.Channels))
		if next > s.compactOffset {
			return 0, corruptf("sample %d: region ends at %d, after compact_offset %d", i, next, s.compactOffset)
		}
	}
	if want := (next + sectionAlign - 1) &^ (sectionAlign - 1); want != s.compactOffset {
		return 0, corruptf("regions end at %d, compact_offset is %d, want %d", next, s.compactOffset, want)
	}
	for off := next; off < s.compactOffset; off++ {
		if b[off] != 0 {
			return 0, corruptf("padding byte at %d is %d, want 0", off, b[off])
		}
	}
	return hdr[8], nil
}

// IsCompact reports whether the shard stores its images in the compact
// image section (Version5).
func (r *Reader) IsCompact() bool { return r.compact }

// Region returns where a compact shard keeps sample i's image. It panics
// on a shard that is not compact.
func (r *Reader) Region(i int) Region {
	r.checkIndex(i)
	if !r.compact {
		panic("shard: Region on a shard that is not compact")
	}
	return decodeCompactEntry(r.compactEntry(i))
}

func (r *Reader) compactEntry(i int) []byte {
	off := r.compactTable + i*compactEntrySize
	return r.data[off : off+compactEntrySize : off+compactEntrySize]
}

// RegionSpan returns where the stored regions of samples [i, i+n) of a
// compact shard lie in the file: one contiguous range (regions are stored
// back to back in sample order). It panics on a shard that is not compact
// or when [i, i+n) is not within [0, Len()).
func (r *Reader) RegionSpan(i, n int) (off int64, length int) {
	r.checkRun(i, n)
	if !r.compact {
		panic("shard: RegionSpan on a shard that is not compact")
	}
	if n == 0 {
		return int64(r.imageOffset), 0
	}
	first, last := r.Region(i), r.Region(i+n-1)
	return first.Offset, int(last.Offset-first.Offset) + last.Bytes(r.layout.Channels)
}

// ImageInto writes sample i's whole image into dst (ImageBytes long): a
// copy of the stored image, or for a compact shard the restored one.
func (r *Reader) ImageInto(dst []byte, i int) {
	if !r.compact {
		copy(dst[:r.imageBytes], r.Image(i))
		return
	}
	g := r.Region(i)
	r.RestoreImage(dst, r.data[g.Offset:g.Offset+int64(g.Bytes(r.layout.Channels))], i, false)
}

// RestoreImage writes sample i's whole image into dst (ImageBytes long)
// from src, its stored region bytes (as RegionSpan places them): the pad
// value around the region, the region's rows inside it. It panics on a
// shard that is not compact, or when src is not the region's size. With
// stream its stores go past the caches where they can (restore).
func (r *Reader) RestoreImage(dst, src []byte, i int, stream bool) {
	restore(dst[:r.imageBytes], src, r.layout, r.storedRegion(i, src), nil, stream)
}

// storedRegion is Region(i) for a caller holding src, its copy of sample
// i's stored region bytes: it panics, naming the sample, when src is not
// the region's size (and, as Region, on a shard that is not compact).
func (r *Reader) storedRegion(i int, src []byte) Region {
	g := r.Region(i)
	if len(src) != g.Bytes(r.layout.Channels) {
		panic(fmt.Sprintf("shard: sample %d: %d region bytes, want %d", i, len(src), g.Bytes(r.layout.Channels)))
	}
	return g
}

// RestoreImageChecked is RestoreImage that also checks sample i against
// the checksum table, in the same pass as it copies src, the sample's
// stored region bytes as the caller read them (CopyCRC32C): what it
// checks is what it restored, as VerifyRegion(i, src) before RestoreImage
// would, without reading src twice. With stream the copies store past the
// caches (CopyCRC32C). The result is VerifyRegion's: nil on a match or
// without a checksum section, an error wrapping ErrCorrupt otherwise; dst
// is restored either way. It panics on a shard that is not compact, or
// when src is not the region's size.
func (r *Reader) RestoreImageChecked(i int, dst, src []byte, stream bool) error {
	g, l := r.storedRegion(i, src), r.layout
	want, ok := r.SampleChecksum(i)
	if !ok {
		restore(dst[:r.imageBytes], src, l, g, nil, stream)
		return nil
	}
	sum := &restoreSum{crc: crc32c(0, r.compactEntry(i))}
	restore(dst[:r.imageBytes], src, l, g, sum, stream)
	return checkSampleCRC(i, r.tailChecksum(sum.crc, i), want)
}

// restoreSum is the CRC restore continues over the region bytes it copies
// (CopyCRC32C).
type restoreSum struct{ crc uint32 }

// restore fills the CHW image dst of l with l.Pad around region g and the
// rows of src inside it; with sum not nil it continues sum.crc over src as
// it copies it (CopyCRC32C: one pass over the region bytes). With stream
// the region's copies and the pad bands of streamFillMin or more store
// past the caches (Copy): into a batch that has left the caches, writing
// the pad through them first read each of its lines (Go `load`, warm
// compact epochs, 28,799 -> 36,063 samples/s with both streamed; with only
// the region's copies, 30,314 against 27,368 in another run).
func restore(dst, src []byte, l Layout, g Region, sum *restoreSum, stream bool) {
	W, H := l.Width, l.Height
	pad := func(b []byte) { fillStream(b, l.Pad, stream) }
	if g.W == 0 {
		pad(dst)
		return
	}
	put := func(d, s []byte) {
		if sum == nil {
			Copy(d, s, stream)
		} else {
			sum.crc = CopyCRC32C(sum.crc, d, s, stream)
		}
	}
	for c := range l.Channels {
		plane := dst[c*W*H : (c+1)*W*H]
		pad(plane[:g.Y*W])
		if g.W == W { // full-width rows: one band
			put(plane[g.Y*W:(g.Y+g.H)*W], src[c*g.H*W:(c+1)*g.H*W])
			pad(plane[(g.Y+g.H)*W:])
			continue
		}
		for r := range g.H {
			row := plane[(g.Y+r)*W : (g.Y+r+1)*W]
			pad(row[:g.X])
			put(row[g.X:g.X+g.W], src[(c*g.H+r)*g.W:(c*g.H+r+1)*g.W])
			pad(row[g.X+g.W:])
		}
		pad(plane[(g.Y+g.H)*W:])
	}
}

// fillStream is fill, with stream and b at least streamFillMin long
// through Copy's stores past the caches from padPattern(v).
func fillStream(b []byte, v byte, stream bool) {
	if !stream || len(b) < streamFillMin {
		fill(b, v)
		return
	}
	pat := padPattern(v)
	for len(b) > 0 {
		m := min(len(b), len(pat))
		Copy(b[:m], pat[:m], true)
		b = b[m:]
	}
}

// streamFillMin is the least pad band a streaming restore writes with
// stores past the caches (fillStream).
const streamFillMin = 4 << 10

var padPatterns [256]atomic.Pointer[[]byte]

// padPattern is 16 KiB of v, made once per value (two goroutines may both
// make it; either copy serves).
func padPattern(v byte) []byte {
	if p := padPatterns[v].Load(); p != nil {
		return *p
	}
	b := make([]byte, 16<<10)
	fill(b, v)
	padPatterns[v].Store(&b)
	return b
}

// fill sets every byte of b to v.
func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	if v == 0 {
		clear(b)
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// regionCRC continues crc over the bytes of region g of the whole CHW image
// img of l, row by row in the order they are stored: what the CRC of the
// stored region bytes is when img was restored from them.
func regionCRC(crc uint32, img []byte, l Layout, g Region) uint32 {
	W, H := l.Width, l.Height
	for c := range l.Channels {
		if g.W == W { // full-width rows: one band
			off := c*W*H + g.Y*W
			crc = crc32c(crc, img[off:off+g.H*W])
			continue
		}
		for r := range g.H {
			off := c*W*H + (g.Y+r)*W + g.X
			crc = crc32c(crc, img[off:off+g.W])
		}
	}
	return crc
}

// appendRegion appends the rows of region g of the CHW image img of l to
// out, in stored order.
func appendRegion(out, img []byte, l Layout, g Region) []byte {
	W, H := l.Width, l.Height
	for c := range l.Channels {
		for r := range g.H {
			off := c*W*H + (g.Y+r)*W + g.X
			out = append(out, img[off:off+g.W]...)
		}
	}
	return out
}

// String is how errors show a layout: the fields as %+v shows a struct,
// Compact and Pad only when Compact is set (so the messages about the
// other layouts read as before those fields existed).
func (l Layout) String() string {
	s := fmt.Sprintf("{DType:%s Width:%d Height:%d Channels:%d MaxBoxes:%d ExtraF32:%d", l.DType, l.Width, l.Height, l.Channels, l.MaxBoxes, l.ExtraF32)
	if l.Compact || l.Pad != 0 {
		s += fmt.Sprintf(" Compact:%v Pad:%d", l.Compact, l.Pad)
	}
	return s + "}"
}
