package shard

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"unsafe"
)

// Reader reads a shard held in memory: an mmap (Open) or a byte slice
// (Parse). It validates the structure once, up front; after that every
// accessor is an offset computation.
//
// Sample indices follow slice semantics: an index outside [0, Len()) panics,
// because accessors sit on the training hot path and an out-of-range index
// is a bug in the caller, not a property of the file.
//
// Image, ImageF16, ImageF32 and Extras return views into the shard's memory
// (when ImageF16/ImageF32/Extras cannot view, see below, they return a
// decoded copy); the caller must not modify them, and they are invalid after
// Close. Boxes, Mask, ClassIndex and Meta return decoded copies.
//
// A Reader is safe for concurrent use by multiple goroutines until Close.
type Reader struct {
	data    []byte
	header  Header
	layout  Layout
	samples int
	hasMeta bool
	// crcs is the checksum table (samples little-endian u32), nil without
	// a checksum section.
	crcs []byte

	// Section offsets and per-sample sizes, as ints for slicing.
	imageOffset, boxesOffset, maskOffset, recordsOffset, extrasOffset int
	imageBytes, boxBytes, maskBytes, recordSize, extraBytes           int

	// compact is true for a Version5 shard: images in the compact image
	// section, whose table starts at compactTable.
	compact      bool
	compactTable int

	// typedViews is true when the data can be reinterpreted as []uint16,
	// []float32 in place: the host is little-endian and the base address is
	// 8-aligned. Every typed array starts at a multiple of its element size
	// from the base (see the package doc), so the base alignment is the only
	// runtime condition. An mmap base is page aligned; a Go-allocated []byte
	// of 8 bytes or more is 8-aligned.
	typedViews bool

	unmap func() error
}

// Open maps the shard at path read-only and validates it. Close unmaps it.
// Errors name the path.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// The mapping outlives the descriptor.
	defer f.Close()
	return OpenFile(f)
}

// OpenFile is Open for a file the caller opened: it maps f read-only and
// validates it, and leaves f open, so the caller may also read the shard
// with f.ReadAt (see ImageSpan) and must close f itself. Errors name
// f.Name().
func OpenFile(f *os.File) (*Reader, error) {
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	// Check the size before mapping: mmap of 0 bytes fails, and a file
	// shorter than the header needs no mapping to be rejected.
	if err := checkFileSize(fi.Size()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(int(fi.Size())) != fi.Size() { // int is 32 bits on some platforms
		return nil, fmt.Errorf("%s: %w", path, corruptf("file is %d bytes, too large to map", fi.Size()))
	}
	adviseLabels(f, fi.Size())
	data, unmap, err := mapFile(f, int(fi.Size()))
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", path, err)
	}
	r, err := Parse(data)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.unmap = unmap
	return r, nil
}

// Close releases the mapping of a Reader from Open; for a Reader from Parse
// it only detaches the slice. The Reader and every view it returned must not
// be used afterwards.
func (r *Reader) Close() error {
	r.data = nil
	if r.unmap == nil {
		return nil
	}
	unmap := r.unmap
	r.unmap = nil
	return unmap()
}

// adviseLabels tells the kernel, where it takes the hint (advise_linux.go),
// that the sections from boxes_offset to the end of f (boxes, masks, meta,
// extras, checksums: what Parse validates and batches copy from the
// mapping) will be read soon. On a cold page cache Parse's page faults then
// wait for that one read instead of each reading its own window around the
// faulting page (as many as read_ahead_kb, megabytes of images, per fault).
// The header is read with one pread; a header that names no offset inside
// the file gets no advice and is left to Parse to reject.
func adviseLabels(f *os.File, size int64) {
	var h [HeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		return
	}
	if off := le.Uint64(h[offBoxesOffset:]); off < uint64(size) {
		WillNeed(f, int64(off), size-int64(off))
	}
}

func checkFileSize(n int64) error {
	if n < HeaderSize {
		return corruptf("file is %d bytes, shorter than the %d-byte header", n, HeaderSize)
	}
	return nil
}

// Parse validates b as a shard and returns a Reader over it. b is not
// copied and must not change while the Reader is in use. Every structural
// problem is an error wrapping ErrCorrupt, checked in this order: size,
// magic, shard_version and the sections it has, dtype, endianness,
// dimensions, samples, offsets, meta header, checksum_offset, checksum
// header, file size, checksum table CRC, records (docs/format/shard.md,
// Validation). The per-sample CRCs are
// not checked here but by VerifySample, when a sample is read.
func Parse(b []byte) (*Reader, error) {
	if err := checkFileSize(int64(len(b))); err != nil {
		return nil, err
	}
	if m := string(b[offMagic : offMagic+len(Magic)]); m != Magic {
		return nil, corruptf("bad magic %q, want %q", m, Magic)
	}
	h := decodeHeader(b)
	if h.Version < MinSupportedVersion || h.Version > MaxSupportedVersion {
		return nil, corruptf("unsupported shard_version %d, want %d..%d", h.Version, MinSupportedVersion, MaxSupportedVersion)
	}
	// From Version2 on the version says which sections the shard has; a
	// Version1 shard signals each by a non-zero offset (the legacy rule).
	legacy := h.Version == Version1
	hasMeta := h.Version.HasMeta() || legacy && h.MetaOffset != 0
	hasChecksums := h.Version.HasChecksums() || legacy && h.ChecksumOffset != 0
	switch {
	case legacy:
	case h.MetaOffset == 0:
		return nil, corruptf("shard_version %d has a meta section, meta_offset is 0", h.Version)
	case hasChecksums && h.ChecksumOffset == 0:
		return nil, corruptf("shard_version %d has a checksum section, checksum_offset is 0", h.Version)
	case !hasChecksums && h.ChecksumOffset != 0:
		return nil, corruptf("shard_version %d has no checksum section, checksum_offset is %d", h.Version, h.ChecksumOffset)
	}
	if h.DType.Size() == 0 {
		return nil, corruptf("unknown dtype %d", uint32(h.DType))
	}
	if h.DType == U8 && !legacy && !h.Version.HasU8() {
		return nil, corruptf("shard_version %d has no dtype %d (U8), shard_version %d adds it", h.Version, uint32(U8), Version4)
	}
	switch h.Endianness {
	case EndianLittle:
	case EndianBig:
		return nil, corruptf("big-endian shards unsupported")
	default:
		return nil, corruptf("unknown endianness %d", h.Endianness)
	}
	l := Layout{
		DType:    h.DType,
		Width:    int(h.Width),
		Height:   int(h.Height),
		Channels: int(h.Channels),
		MaxBoxes: int(h.MaxBoxes),
	}
	if problem := l.problem(); problem != "" {
		return nil, corruptf("%s", problem)
	}
	if h.Samples == 0 {
		return nil, corruptf("samples is 0")
	}
	if h.Version >= Version5 {
		if h.DType != U8 {
			return nil, corruptf("shard_version %d has compact images, dtype %d (%s), want %d (U8)", h.Version, uint32(h.DType), h.DType, uint32(U8))
		}
		l.Compact = true
	}
	// sectionsOf places the sections; a compact shard's images end where
	// its header's boxes_offset says (parseCompact checks the regions).
	sectionsOf := func(withMeta, withChecksums bool) (sections, bool) {
		if !l.Compact {
			return l.sections(h.Samples, withMeta, withChecksums)
		}
		var c sizeCalc
		table := c.add(HeaderSize+CompactHeaderSize, c.mul(h.Samples, compactEntrySize))
		if c.overflow || h.BoxesOffset < table || h.BoxesOffset%sectionAlign != 0 {
			return sections{}, false
		}
		return l.compactSections(h.Samples, h.BoxesOffset-table, c, withMeta, withChecksums)
	}
	if l.Compact {
		if _, ok := sectionsOf(false, false); !ok {
			return nil, corruptf("boxes_offset %d: no room for the compact table of %d samples (or not a multiple of 8)", h.BoxesOffset, h.Samples)
		}
	}
	s, ok := sectionsOf(true, false)
	if !ok {
		return nil, corruptf("samples %d overflow the file size", h.Samples)
	}
	switch {
	case h.ImageOffset != s.imageOffset:
		return nil, corruptf("image_offset %d, want %d", h.ImageOffset, s.imageOffset)
	case h.BoxesOffset != s.boxesOffset:
		return nil, corruptf("boxes_offset %d, want %d", h.BoxesOffset, s.boxesOffset)
	case h.MaskOffset != s.maskOffset:
		return nil, corruptf("mask_offset %d, want %d", h.MaskOffset, s.maskOffset)
	case hasMeta && h.MetaOffset != s.metaOffset:
		return nil, corruptf("meta_offset %d, want %s%d", h.MetaOffset, zeroOr(legacy), s.metaOffset)
	}
	size := uint64(len(b))
	if hasMeta {
		if size < s.recordsOffset {
			return nil, corruptf("file is %d bytes, too short for the meta header at %d", size, s.metaOffset)
		}
		extra, err := parseMetaHeader(b[s.metaOffset:s.recordsOffset], l, h.Samples)
		if err != nil {
			return nil, err
		}
		l.ExtraF32 = extra
	}
	// Where the checksum section starts depends on extra_f32, so it is
	// checked after the meta header.
	s, ok = sectionsOf(hasMeta, hasChecksums)
	if !ok {
		return nil, corruptf("samples %d overflow the file size", h.Samples)
	}
	if !hasMeta {
		s.recordsOffset, s.extrasOffset = s.maskEnd, s.maskEnd
	}
	if hasChecksums {
		if h.ChecksumOffset != s.checksumOffset {
			return nil, corruptf("checksum_offset %d, want %s%d", h.ChecksumOffset, zeroOr(legacy), s.checksumOffset)
		}
		if size < s.crcOffset {
			return nil, corruptf("file is %d bytes, too short for the checksum header at %d", size, s.checksumOffset)
		}
		if err := parseChecksumHeader(b[s.checksumOffset:s.crcOffset], h.Samples); err != nil {
			return nil, err
		}
	}
	if size != s.fileSize {
		return nil, corruptf("file is %d bytes, header implies %d", size, s.fileSize)
	}
	var crcs []byte
	if hasChecksums {
		table := b[s.checksumOffset : s.fileSize-checksumBytes]
		if got, want := crc32c(0, table), le.Uint32(b[s.fileSize-checksumBytes:]); got != want {
			return nil, corruptf("checksum table crc32c 0x%08x, table_crc32c says 0x%08x", got, want)
		}
		crcs = b[s.crcOffset : s.fileSize-checksumBytes]
	}
	if l.Compact {
		pad, err := parseCompact(b, l, int(h.Samples), s)
		if err != nil {
			return nil, err
		}
		l.Pad = pad
	}

	r := &Reader{
		data:          b,
		header:        h,
		layout:        l,
		samples:       int(h.Samples),
		hasMeta:       hasMeta,
		crcs:          crcs,
		imageOffset:   int(s.imageOffset),
		boxesOffset:   int(s.boxesOffset),
		maskOffset:    int(s.maskOffset),
		recordsOffset: int(s.recordsOffset),
		extrasOffset:  int(s.extrasOffset),
		imageBytes:    int(l.ImageBytes()),
		boxBytes:      int(l.boxBytes()),
		maskBytes:     int(l.maskBytes()),
		recordSize:    l.RecordSize(),
		extraBytes:    int(l.extraBytes()),
		compact:       l.Compact,
		compactTable:  int(s.compactOffset) + CompactHeaderSize,
		typedViews:    hostLittleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0,
	}
	if hasMeta {
		// Accessors slice class indices by box_count: bound it here so no
		// accepted file can make them panic.
		for i := range r.samples {
			if n := r.recordBoxCount(i); n > uint32(l.MaxBoxes) {
				return nil, corruptf("sample %d: box_count %d exceeds max_boxes %d", i, n, l.MaxBoxes)
			}
		}
	}
	return r, nil
}

// zeroOr is how an offset error names the values a section's offset may
// have: "0 or " precedes the computed offset in a Version1 shard, where a
// zero offset means the section is absent.
func zeroOr(legacy bool) string {
	if legacy {
		return "0 or "
	}
	return ""
}

// parseMetaHeader validates the meta section header b against the shard
// header and returns extra_f32.
func parseMetaHeader(b []byte, l Layout, samples uint64) (int, error) {
	if m := string(b[offMetaMagic : offMetaMagic+len(MetaMagic)]); m != MetaMagic {
		return 0, corruptf("bad meta magic %q, want %q", m, MetaMagic)
	}
	if v := MetaVersion(le.Uint32(b[offMetaVersion:])); v < MinSupportedMetaVersion || v > MaxSupportedMetaVersion {
		return 0, corruptf("unsupported meta_version %d, want %d..%d", v, MinSupportedMetaVersion, MaxSupportedMetaVersion)
	}
	if rs := le.Uint32(b[offMetaRecordSize:]); rs != uint32(l.RecordSize()) {
		return 0, corruptf("record_size %d, want %d", rs, l.RecordSize())
	}
	extra := le.Uint32(b[offMetaExtraF32:])
	if extra > ExtraF32Limit {
		return 0, corruptf("extra_f32 %d out of range [0, %d]", extra, ExtraF32Limit)
	}
	if n := le.Uint64(b[offMetaSamples:]); n != samples {
		return 0, corruptf("meta samples %d, header samples %d", n, samples)
	}
	return int(extra), nil
}

// parseChecksumHeader validates the checksum section header b against the
// shard header.
func parseChecksumHeader(b []byte, samples uint64) error {
	if m := string(b[offChecksumMagic : offChecksumMagic+len(ChecksumMagic)]); m != ChecksumMagic {
		return corruptf("bad checksum magic %q, want %q", m, ChecksumMagic)
	}
	if v := ChecksumVersion(le.Uint32(b[offChecksumVersion:])); v < MinSupportedChecksumVersion || v > MaxSupportedChecksumVersion {
		return corruptf("unsupported checksum_version %d, want %d..%d", v, MinSupportedChecksumVersion, MaxSupportedChecksumVersion)
	}
	if n := le.Uint64(b[offChecksumSamples:]); n != samples {
		return corruptf("checksum samples %d, header samples %d", n, samples)
	}
	return nil
}

var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Header returns the decoded header.
func (r *Reader) Header() Header { return r.header }

// Layout returns the shard's layout; ExtraF32 is 0 without a meta section.
func (r *Reader) Layout() Layout { return r.layout }

// Len returns the number of samples.
func (r *Reader) Len() int { return r.samples }

// HasMeta reports whether the shard has a meta section. Shards of the
// original layout do not; for them Meta returns the zero Meta and ClassIndex
// and Extras return nil.
func (r *Reader) HasMeta() bool { return r.hasMeta }

// HasSampleChecksums reports whether the shard has a checksum section: a
// CRC-32C per sample, checked by VerifySample. Shards written before it
// existed do not; their samples cannot be checked one by one (the sha256 in
// the manifest still covers the whole file).
func (r *Reader) HasSampleChecksums() bool { return r.crcs != nil }

// SampleChecksum returns the CRC-32C the checksum table records for sample
// i; ok is false without a checksum section.
func (r *Reader) SampleChecksum(i int) (crc uint32, ok bool) {
	r.checkIndex(i)
	if r.crcs == nil {
		return 0, false
	}
	return le.Uint32(r.crcs[checksumBytes*i:]), true
}

// ComputeSampleChecksum computes the CRC-32C of sample i as the checksum
// table defines it: its image, boxes, mask, record and extras bytes, in
// that order. image, when not nil, stands in for the image bytes in the
// shard: a caller that copied the image out of the file (ImageSpan) checks
// its copy, which is what it hands out. The other sections are read from
// the shard.
//
// For a compact shard the image part of the CRC is the sample's table
// entry and its stored region bytes; image, when not nil, is the whole
// restored image, whose region rows are checked.
func (r *Reader) ComputeSampleChecksum(i int, image []byte) uint32 {
	if r.compact {
		g := r.Region(i)
		crc := crc32c(0, r.compactEntry(i))
		if image == nil {
			crc = crc32c(crc, r.data[g.Offset:g.Offset+int64(g.Bytes(r.layout.Channels))])
		} else {
			crc = regionCRC(crc, image, r.layout, g)
		}
		return r.tailChecksum(crc, i)
	}
	if image == nil {
		image = r.Image(i)
	} else {
		r.checkIndex(i)
	}
	return r.tailChecksum(crc32c(0, image), i)
}

// tailChecksum continues crc over sample i's boxes, mask, record and
// extras.
func (r *Reader) tailChecksum(crc uint32, i int) uint32 {
	crc = crc32c(crc, r.BoxesRaw(i), r.MaskRaw(i))
	if r.hasMeta {
		crc = crc32c(crc, r.record(i), r.section(r.extrasOffset, r.extraBytes, i))
	}
	return crc
}

// VerifySample checks sample i against the checksum table: nil when its
// CRC-32C matches, or without a checksum section; otherwise an error
// wrapping ErrCorrupt that names the sample and both CRCs. image is as for
// ComputeSampleChecksum: nil checks the image in the shard.
func (r *Reader) VerifySample(i int, image []byte) error {
	want, ok := r.SampleChecksum(i)
	if !ok {
		return nil
	}
	return checkSampleCRC(i, r.ComputeSampleChecksum(i, image), want)
}

// VerifyRegion checks sample i of a compact shard against the checksum
// table as VerifySample does, with region standing in for its stored region
// bytes: the copy a caller read from the file (RegionSpan) and restores
// from (RestoreImage). One contiguous CRC, where a restored image's region
// is a band per channel or, narrower than the image, a row at a time. It
// panics on a shard that is not compact, or when region is not the
// region's size.
func (r *Reader) VerifyRegion(i int, region []byte) error {
	r.storedRegion(i, region)
	want, ok := r.SampleChecksum(i)
	if !ok {
		return nil
	}
	return checkSampleCRC(i, r.tailChecksum(crc32c(0, r.compactEntry(i), region), i), want)
}

func checkSampleCRC(i int, got, want uint32) error {
	if got != want {
		return corruptf("sample %d: crc32c 0x%08x, the checksum table says 0x%08x", i, got, want)
	}
	return nil
}

func (r *Reader) checkIndex(i int) {
	if uint(i) >= uint(r.samples) {
		panic(fmt.Sprintf("shard: sample index %d out of range [0:%d]", i, r.samples))
	}
}

// section returns the i-th of the per-sample slots of size n at off.
func (r *Reader) section(off, n, i int) []byte {
	r.checkIndex(i)
	start := off + i*n
	return r.data[start : start+n : start+n]
}

// Image returns the raw bytes of sample i's CHW tensor in the shard dtype:
// a view into the shard, or for a compact shard a newly allocated restored
// copy (ImageInto restores into a buffer of the caller's).
func (r *Reader) Image(i int) []byte {
	if r.compact {
		r.checkIndex(i)
		out := make([]byte, r.imageBytes)
		r.ImageInto(out, i)
		return out
	}
	return r.section(r.imageOffset, r.imageBytes, i)
}

// ImageF16 returns sample i's image as binary16 bit patterns. It panics if
// the shard's dtype is not F16.
func (r *Reader) ImageF16(i int) []uint16 {
	if r.layout.DType != F16 {
		panic("shard: ImageF16 on a " + r.layout.DType.String() + " shard")
	}
	b := r.Image(i)
	if r.typedViews {
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
	}
	out := make([]uint16, len(b)/2)
	for k := range out {
		out[k] = le.Uint16(b[2*k:])
	}
	return out
}

// ImageF32 returns sample i's image as float32. It panics if the shard's
// dtype is not F32.
func (r *Reader) ImageF32(i int) []float32 {
	if r.layout.DType != F32 {
		panic("shard: ImageF32 on a " + r.layout.DType.String() + " shard")
	}
	return r.float32s(r.Image(i))
}

// float32s views b as little-endian float32s, in place when possible.
func (r *Reader) float32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if r.typedViews {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	for k := range out {
		out[k] = math.Float32frombits(le.Uint32(b[4*k:]))
	}
	return out
}

// BoxesRaw returns the raw bytes of sample i's [max_boxes][4] box rows,
// padding included, in the shard dtype.
func (r *Reader) BoxesRaw(i int) []byte { return r.section(r.boxesOffset, r.boxBytes, i) }

// MaskRaw returns the raw bytes of sample i's [max_boxes] mask in the shard
// dtype.
func (r *Reader) MaskRaw(i int) []byte { return r.section(r.maskOffset, r.maskBytes, i) }

// BoxCount returns the number of real boxes of sample i: box_count from the
// meta record, or, without a meta section, the number of leading non-zero
// mask entries.
func (r *Reader) BoxCount(i int) int {
	if r.hasMeta {
		r.checkIndex(i)
		return int(r.recordBoxCount(i))
	}
	mask := r.MaskRaw(i)
	bd := r.layout.DType.BoxDType()
	d := bd.Size()
	n := 0
	for n < r.layout.MaxBoxes && element(mask[n*d:], bd) != 0 {
		n++
	}
	return n
}

// Boxes returns sample i's real boxes (the first BoxCount rows), decoded.
func (r *Reader) Boxes(i int) [][4]float32 {
	raw := r.BoxesRaw(i)
	n := r.BoxCount(i)
	bd := r.layout.DType.BoxDType()
	d := bd.Size()
	out := make([][4]float32, n)
	for j := range out {
		for k := range 4 {
			out[j][k] = element(raw[(4*j+k)*d:], bd)
		}
	}
	return out
}

// Mask returns sample i's full [max_boxes] mask, decoded.
func (r *Reader) Mask(i int) []float32 {
	raw := r.MaskRaw(i)
	bd := r.layout.DType.BoxDType()
	d := bd.Size()
	out := make([]float32, r.layout.MaxBoxes)
	for j := range out {
		out[j] = element(raw[j*d:], bd)
	}
	return out
}

// record returns sample i's meta record; the shard must have a meta section.
func (r *Reader) record(i int) []byte { return r.section(r.recordsOffset, r.recordSize, i) }

// recordBoxCount reads box_count of sample i without a bounds check on i.
func (r *Reader) recordBoxCount(i int) uint32 {
	return le.Uint32(r.data[r.recordsOffset+i*r.recordSize+offRecBoxCount:])
}

// Meta returns sample i's metadata, or the zero Meta without a meta section.
func (r *Reader) Meta(i int) Meta {
	if !r.hasMeta {
		r.checkIndex(i)
		return Meta{}
	}
	return decodeRecordMeta(r.record(i))
}

// ClassIndex returns the class index of each of sample i's real boxes, or
// nil without a meta section.
func (r *Reader) ClassIndex(i int) []int32 {
	if !r.hasMeta {
		r.checkIndex(i)
		return nil
	}
	rec := r.record(i)
	out := make([]int32, r.recordBoxCount(i))
	for j := range out {
		out[j] = int32(le.Uint32(rec[offRecClassIndex+4*j:]))
	}
	return out
}

// Extras returns sample i's extra_f32 values; nil when there are none.
func (r *Reader) Extras(i int) []float32 {
	if !r.hasMeta {
		r.checkIndex(i)
		return nil
	}
	return r.float32s(r.section(r.extrasOffset, r.extraBytes, i))
}

// Check verifies what Parse does not: the content rules of every sample.
// Each mask entry is 0 or 1 with the ones first; their count equals
// box_count; real boxes are within [0, 1] with x0 <= x1 and y0 <= y1;
// padding box rows are all zero; real boxes have a class index >= 0 and
// padding slots -1. It reads the whole boxes, mask and meta sections but no
// image, and returns the first violation, wrapping ErrCorrupt.
func (r *Reader) Check() error {
	for i := range r.samples {
		if err := r.checkSample(i); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) checkSample(i int) error {
	mask := r.Mask(i)
	ones := 0
	for j, m := range mask {
		switch {
		case m == 1 && ones == j:
			ones++
		case m == 1:
			return corruptf("sample %d: mask[%d] is 1 after a 0", i, j)
		case m != 0:
			return corruptf("sample %d: mask[%d] is %v, want 0 or 1", i, j, m)
		}
	}
	if n := r.BoxCount(i); n != ones {
		return corruptf("sample %d: box_count %d, mask has %d ones", i, n, ones)
	}
	for j, b := range r.Boxes(i) {
		if problem := boxProblem(b); problem != "" {
			return corruptf("sample %d: box %d %v: %s", i, j, b, problem)
		}
	}
	raw := r.BoxesRaw(i)
	row := 4 * r.layout.DType.BoxDType().Size()
	for j := ones; j < r.layout.MaxBoxes; j++ {
		for _, c := range raw[j*row : (j+1)*row] {
			if c != 0 {
				return corruptf("sample %d: padding box %d is not zero", i, j)
			}
		}
	}
	if !r.hasMeta {
		return nil
	}
	rec := r.record(i)
	for j := range r.layout.MaxBoxes {
		c := int32(le.Uint32(rec[offRecClassIndex+4*j:]))
		if j < ones && c < 0 {
			return corruptf("sample %d: class_index[%d] is %d, want >= 0", i, j, c)
		}
		if j >= ones && c != -1 {
			return corruptf("sample %d: padding class_index[%d] is %d, want -1", i, j, c)
		}
	}
	return nil
}
