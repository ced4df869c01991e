// Package shard implements the TWH1 tensor shard: a file of fixed-shape,
// CHW images of one dtype plus padded boxes, box masks and per-sample
// metadata, laid out so that training can mmap it and index samples without
// decoding anything.
//
// The byte-level contract for other languages is docs/format/shard.md; the
// names there are the names here.
//
// # File layout
//
// All integers and floats are little-endian. f16 is IEEE 754 binary16, f32
// IEEE 754 binary32. N is samples, C/H/W the channels/height/width, B is
// max_boxes, E is extra_f32, d the image element size (1 for U8, 2 for F16,
// 4 for F32) and b the box element size (2 for F16, 4 for F32 and U8).
//
//	+--------------------------------------------+ 0
//	| header                          80 bytes   |  exactly the original TWH1 header
//	+--------------------------------------------+ image_offset = 80
//	| images  [N][C][H][W] dtype                 |
//	| zero padding to a multiple of 8 (U8 only)  |
//	+--------------------------------------------+ boxes_offset = 80 + N*C*H*W*d (U8: rounded up to 8)
//	| boxes   [N][B][4] box dtype (x0,y0,x1,y1)  |
//	+--------------------------------------------+ mask_offset = boxes_offset + N*B*4*b
//	| mask    [N][B] box dtype (1 real, 0 pad)   |
//	+--------------------------------------------+ mask_offset + N*B*b
//	| zero padding to a multiple of 8            |
//	+--------------------------------------------+ meta_offset (0 only in a Version1 shard without one)
//	| meta header                     24 bytes   |
//	| records [N] of record_size bytes           |
//	| extras  [N][E] f32                         |
//	| zero padding to a multiple of 8            |
//	+--------------------------------------------+ checksum_offset (0 in Version2, and in a Version1 shard without one)
//	| checksum header                 16 bytes   |
//	| crc32c  [N] u32, one per sample            |
//	| table_crc32c u32                           |
//	+--------------------------------------------+ end of file, exactly
//
// The header:
//
//	off size field
//	0   4    magic "TWH1"
//	4   4    shard_version u32   (Version: 3, 4 for U8; see Versions)
//	8   4    dtype u32           (DType)
//	12  4    endianness u32      (0 = little; 1 = big is rejected)
//	16  4    width u32
//	20  4    height u32
//	24  4    channels u32
//	28  4    max_boxes u32
//	32  8    samples u64
//	40  8    image_offset u64
//	48  8    boxes_offset u64
//	56  8    mask_offset u64
//	64  8    meta_offset u64     (reserved = 0 in the original layout)
//	72  8    checksum_offset u64 (reserved = 0 in the original layout; the shard sha256 lives in the manifest)
//
// # Versions
//
// Each shard_version adds one feature, and a shard carries the lowest version
// that has every feature it uses (Layout.Version):
//
//	version  adds                                  header
//	1        the original layout, f32 and f16      meta_offset, checksum_offset 0 (but see below)
//	2        the meta section (TWMD)               meta_offset != 0, checksum_offset 0
//	3        the checksum section (TWCK)           meta_offset != 0, checksum_offset != 0
//	4        dtype U8 (u8 images, padding after)   as 3; dtype may be 2
//	5        compact images (TWCP, compact.go)     as 3; dtype must be 2
//
// The Writer writes 3, or 4 for U8, or 5 for a Compact layout. From Version2 on a reader decides by
// the version: a section the version has must have a non-zero offset, one it
// does not have a zero offset, and dtype 2 needs Version4; anything else is
// corrupt. Shards written before versions named features (code_version
// warehouse-etl/1 to warehouse-etl/3) all carry 1 whatever they hold, and
// signal the meta section by meta_offset != 0, the checksum section by
// checksum_offset != 0 and U8 by dtype 2: in a Version1 shard, and only
// there, a reader detects those features (the legacy rule). Versions outside
// MinSupportedVersion..MaxSupportedVersion are rejected.
//
// The 80-byte header is the same in every version. A reader of the original
// layout that ignores shard_version reads images, boxes and mask of any
// F16 or F32 shard at the offsets in the header, never looks past the mask
// and never reads meta_offset or checksum_offset; one that insists on
// shard_version 1 rejects the shards written now.
//
// The meta section:
//
//	off size field
//	0   4    magic "TWMD"
//	4   4    meta_version u32 (MetaVersion)
//	8   4    record_size u32  (80 + 4*B rounded up to a multiple of 8)
//	12  4    extra_f32 u32    (E)
//	16  8    samples u64      (equal to the header's samples)
//	24  ...  records, then extras
//
// One record (see Meta for the meaning of each field):
//
//	off size field
//	0   4    source_index u32
//	4   4    flags u32 (reserved, 0)
//	8   8    frame_id u64
//	16  8    input_seq u64
//	24  8    unix_time_ns i64
//	32  8    sim_time f64
//	40  4    src_width u32
//	44  4    src_height u32
//	48  4    resized_width u32
//	52  4    resized_height u32
//	56  4    pad_x u32
//	60  4    pad_y u32
//	64  4    scale_x f32
//	68  4    scale_y f32
//	72  4    box_count u32
//	76  4    boxes_dropped u32
//	80  4*B  class_index [B]i32 (-1 for padding)
//	...      zero padding to record_size
//
// The checksum section starts at the end of the extras (of the mask in a
// Version1 shard without a meta section) rounded up to a multiple of 8:
//
//	off    size field
//	0      4    magic "TWCK"
//	4      4    checksum_version u32 (ChecksumVersion)
//	8      8    samples u64 (equal to the header's samples)
//	16     4*N  crc32c [N]u32: CRC-32C of sample i's image, boxes, mask,
//	            record and extras bytes, in that order, as stored
//	16+4N  4    table_crc32c u32: CRC-32C of the 16+4N bytes before it
//
// CRC-32C is the Castagnoli polynomial (0x1EDC6F41, reflected 0x82F63B78)
// with the usual initial value and final xor 0xFFFFFFFF (iSCSI, hash/crc32's
// Castagnoli table): "123456789" has the checksum 0xE3069283. A sample's
// CRC covers exactly the bytes a reader hands out for it; the paddings and
// section headers are covered by Parse's structural checks, the table by its
// own CRC, and the whole file by the sha256 in the manifest.
//
// # Alignment
//
// Every array starts at an offset that is a multiple of its element size:
// image_offset is 80, each image, box row and mask row is a whole number of
// dtype elements, the meta section starts on a multiple of 8, record_size is a
// multiple of 8 (so every u64/f64 field is 8-aligned and class_index 4-aligned)
// and the extras follow the records on a multiple of 8; the checksum section
// starts on a multiple of 8, so every CRC is 4-aligned. Given a base address
// aligned to 8 (an mmap is page aligned), the Reader can hand out []uint16 and
// []float32 views without copying.
package shard

import (
	"fmt"
	"math"
	"math/bits"

	"warehouse-etl/dtype"
)

// Magic is the first four bytes of every shard.
const Magic = "TWH1"

// MetaMagic is the first four bytes of the meta section.
const MetaMagic = "TWMD"

// HeaderSize is the size of the fixed header; images start right after it.
const HeaderSize = 80

// MetaHeaderSize is the size of the meta section's own header.
const MetaHeaderSize = 24

// ChecksumMagic is the first four bytes of the checksum section.
const ChecksumMagic = "TWCK"

// ChecksumHeaderSize is the size of the checksum section's own header; the
// per-sample CRCs follow it.
const ChecksumHeaderSize = 16

// checksumBytes is the size of one CRC-32C: one per sample, and the table's
// own at the end of the section.
const checksumBytes = 4

// recordFixedSize is the size of a record before its class_index array.
const recordFixedSize = 80

// sectionAlign is the alignment of the meta section and of record_size.
const sectionAlign = 8

// Header field offsets, one per field of the 80-byte header.
const (
	offMagic          = 0
	offVersion        = 4
	offDType          = 8
	offEndianness     = 12
	offWidth          = 16
	offHeight         = 20
	offChannels       = 24
	offMaxBoxes       = 28
	offSamples        = 32
	offImageOffset    = 40
	offBoxesOffset    = 48
	offMaskOffset     = 56
	offMetaOffset     = 64
	offChecksumOffset = 72
)

// Meta header field offsets, relative to meta_offset.
const (
	offMetaMagic      = 0
	offMetaVersion    = 4
	offMetaRecordSize = 8
	offMetaExtraF32   = 12
	offMetaSamples    = 16
)

// Checksum header field offsets, relative to checksum_offset.
const (
	offChecksumMagic   = 0
	offChecksumVersion = 4
	offChecksumSamples = 8
)

// Record field offsets, relative to the start of a record.
const (
	offRecSourceIndex   = 0
	offRecFlags         = 4
	offRecFrameID       = 8
	offRecInputSeq      = 16
	offRecUnixTimeNs    = 24
	offRecSimTime       = 32
	offRecSrcWidth      = 40
	offRecSrcHeight     = 44
	offRecResizedWidth  = 48
	offRecResizedHeight = 52
	offRecPadX          = 56
	offRecPadY          = 60
	offRecScaleX        = 64
	offRecScaleY        = 68
	offRecBoxCount      = 72
	offRecBoxesDropped  = 76
	offRecClassIndex    = recordFixedSize
)

// Limits a Layout must respect. They keep every size computation far from
// overflow and reject headers that no dataset of ours would produce.
const (
	DimensionLimit = 16384 // width and height
	ChannelsLimit  = 4
	MaxBoxesLimit  = 65535
	ExtraF32Limit  = 65535
)

// Version is the shard_version field of the header. Each version adds one
// feature to the one before it, as pebble's sstable TableFormat does, and a
// shard carries the lowest version that has every feature it uses (see
// Layout.Version). From Version2 on the version alone says which sections a
// shard has; Parse rejects a header whose offsets or dtype disagree with it.
type Version uint32

const (
	// Version1 is the original TWH1 layout: header, images, boxes and mask,
	// in f32 or f16.
	//
	// It is also the version of every shard written before versions named
	// features (code_version warehouse-etl/1 to warehouse-etl/3), which
	// signal theirs instead: the meta section by meta_offset != 0, the
	// checksum section by checksum_offset != 0 and u8 images by dtype 2. A
	// reader detects those three features in a Version1 shard, and only
	// there (the legacy rule).
	Version1 Version = 1

	// Version2 adds the meta section (TWMD): per-sample records and f32
	// extras. meta_offset is not 0.
	Version2 Version = 2

	// Version3 adds the checksum section (TWCK): one CRC-32C per sample
	// and one for the table. A Version3 shard has a meta section and a
	// checksum section: neither meta_offset nor checksum_offset is 0.
	Version3 Version = 3

	// Version4 adds dtype U8: u8 images, zero padding after them to a
	// multiple of 8, f32 boxes and mask. Shards of the other dtypes may
	// carry it too; the Writer gives them Version3.
	Version4 Version = 4

	// Version5 adds the compact image section (TWCP, compact.go): a U8
	// shard stores of each image only the rectangle that differs from the
	// pad value, and a table of the rectangles; readers restore the pad.
	// Version5 shards are U8 only.
	Version5 Version = 5

	// MinSupportedVersion and MaxSupportedVersion bound the versions this
	// package reads; any other shard_version is rejected.
	MinSupportedVersion = Version1
	MaxSupportedVersion = Version5
)

// HasMeta reports whether every shard of version v has a meta section:
// Version2 and later. It is false for Version1, whose shards may have one
// all the same (meta_offset != 0, the legacy rule).
func (v Version) HasMeta() bool { return v >= Version2 }

// HasChecksums reports whether every shard of version v has a checksum
// section: Version3 and later. It is false for Version2, whose shards have
// none, and for Version1, whose shards may have one (checksum_offset != 0,
// the legacy rule).
func (v Version) HasChecksums() bool { return v >= Version3 }

// HasU8 reports whether version v has dtype U8: Version4 and later. It is
// false for Version1, whose shards may be U8 all the same (dtype 2, the
// legacy rule).
func (v Version) HasU8() bool { return v >= Version4 }

// Version returns the shard_version the Writer writes for shards of l: the
// lowest version that has every feature they use. The Writer always writes
// the meta and checksum sections, so that is Version3, or Version4 for U8.
func (l Layout) Version() Version {
	if l.Compact {
		return Version5
	}
	if l.DType == U8 {
		return Version4
	}
	return Version3
}

// MetaVersion is the meta_version field of the meta section.
type MetaVersion uint32

const (
	// MetaVersion1 adds the per-sample records (source, frame, timing and
	// letterbox geometry, class indices) and the f32 extras.
	MetaVersion1 MetaVersion = 1

	// MinSupportedMetaVersion and MaxSupportedMetaVersion bound the meta
	// versions this package reads.
	MinSupportedMetaVersion = MetaVersion1
	MaxSupportedMetaVersion = MetaVersion1
)

// ChecksumVersion is the checksum_version field of the checksum section.
type ChecksumVersion uint32

const (
	// ChecksumVersion1 is one CRC-32C per sample over its image, boxes,
	// mask, record and extras bytes, then the CRC-32C of the table.
	ChecksumVersion1 ChecksumVersion = 1

	// MinSupportedChecksumVersion and MaxSupportedChecksumVersion bound
	// the checksum versions this package reads.
	MinSupportedChecksumVersion = ChecksumVersion1
	MaxSupportedChecksumVersion = ChecksumVersion1
)

// Endianness values of the header. Only little-endian shards exist; the field
// is kept because the original header has it.
const (
	EndianLittle uint32 = 0
	EndianBig    uint32 = 1
)

// DType is the element type of images, boxes and mask: package dtype's
// enum, whose numbering is the header's dtype field. Boxes and mask are
// DType.BoxDType(): the image dtype for F16 and F32, F32 for U8 (whose
// images are the resampled pixels before normalization, which the manifest
// records and readers apply).
type DType = dtype.DType

// The dtypes, by the names the manifest and DType.String use.
const (
	F32 = dtype.F32
	F16 = dtype.F16
	U8  = dtype.U8
)

// ParseDType is the inverse of DType.String for the known dtypes.
func ParseDType(s string) (DType, error) {
	d, err := dtype.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("shard: %w", err)
	}
	return d, nil
}

// Header is the decoded 80-byte header.
type Header struct {
	Version        Version
	DType          DType
	Endianness     uint32
	Width          uint32
	Height         uint32
	Channels       uint32
	MaxBoxes       uint32
	Samples        uint64
	ImageOffset    uint64
	BoxesOffset    uint64
	MaskOffset     uint64
	MetaOffset     uint64
	ChecksumOffset uint64
}

// Layout is the per-sample shape of a shard: everything but the sample count.
type Layout struct {
	DType    DType
	Width    int
	Height   int
	Channels int
	MaxBoxes int
	// ExtraF32 is the number of f32 extras per sample in the meta section;
	// 0 for image-only sources.
	ExtraF32 int
	// Compact stores the images in the compact image section (Version5,
	// U8 only): each image's rectangle of pixels that differ from Pad, the
	// rest restored by readers. Pad is 0 when Compact is false.
	Compact bool
	Pad     uint8
}

// Validate reports whether the layout is within the format's limits.
// MaxBoxes and ExtraF32 may be 0; every other dimension is >= 1.
func (l Layout) Validate() error {
	if problem := l.problem(); problem != "" {
		return fmt.Errorf("shard: layout: %s", problem)
	}
	return nil
}

// problem says what is out of range in l, or returns "". Parse reports the
// same problems in a header as corruption.
func (l Layout) problem() string {
	switch {
	case l.DType.Size() == 0:
		return fmt.Sprintf("unknown dtype %d", uint32(l.DType))
	case l.Width < 1 || l.Width > DimensionLimit:
		return fmt.Sprintf("width %d out of range [1, %d]", l.Width, DimensionLimit)
	case l.Height < 1 || l.Height > DimensionLimit:
		return fmt.Sprintf("height %d out of range [1, %d]", l.Height, DimensionLimit)
	case l.Channels < 1 || l.Channels > ChannelsLimit:
		return fmt.Sprintf("channels %d out of range [1, %d]", l.Channels, ChannelsLimit)
	case l.MaxBoxes < 0 || l.MaxBoxes > MaxBoxesLimit:
		return fmt.Sprintf("max_boxes %d out of range [0, %d]", l.MaxBoxes, MaxBoxesLimit)
	case l.ExtraF32 < 0 || l.ExtraF32 > ExtraF32Limit:
		return fmt.Sprintf("extra_f32 %d out of range [0, %d]", l.ExtraF32, ExtraF32Limit)
	case l.Compact && l.DType != U8:
		return fmt.Sprintf("compact images need dtype U8, not %s", l.DType)
	case !l.Compact && l.Pad != 0:
		return fmt.Sprintf("pad %d without compact images", l.Pad)
	}
	return ""
}

// ImageBytes is the size of one sample's CHW image tensor. Like every size
// method of Layout it is meaningful only for a valid layout.
func (l Layout) ImageBytes() int64 {
	return int64(l.Channels) * int64(l.Height) * int64(l.Width) * int64(l.DType.Size())
}

// boxBytes is the size of one sample's box rows.
func (l Layout) boxBytes() int64 { return int64(l.MaxBoxes) * 4 * int64(l.DType.BoxDType().Size()) }

// maskBytes is the size of one sample's mask row.
func (l Layout) maskBytes() int64 { return int64(l.MaxBoxes) * int64(l.DType.BoxDType().Size()) }

// extraBytes is the size of one sample's extras.
func (l Layout) extraBytes() int64 { return int64(l.ExtraF32) * 4 }

// RecordSize is the size of one meta record: 80 fixed bytes plus one i32 class
// index per box slot, rounded up to a multiple of 8.
func (l Layout) RecordSize() int {
	return alignUp(recordFixedSize+4*l.MaxBoxes, sectionAlign)
}

// SampleBytes is what one sample adds to a shard across all sections, its
// CRC-32C included. The file size is HeaderSize + samples*SampleBytes + at
// most 7 bytes of padding after the images (U8 only) + at most 7 bytes of
// padding + MetaHeaderSize + at most 7 bytes of padding + the checksum
// section's header and table CRC.
//
// For a Compact layout it is the most a sample can add (its whole image
// stored, and its 16-byte entry in the compact table).
func (l Layout) SampleBytes() int64 {
	return l.ImageBytes() + l.compactEntryBytes() + l.boxBytes() + l.maskBytes() + int64(l.RecordSize()) + l.extraBytes() + checksumBytes
}

// FileSize is the exact size of a shard of this layout holding samples
// samples, as the Writer makes it: meta and checksum sections included (for
// a Compact layout, the largest: every image stored whole; see
// CompactFileSizeRange). It
// returns -1 if the layout is invalid, samples is negative, or the size does
// not fit in an int.
func (l Layout) FileSize(samples int) int64 {
	return l.fileSize(samples, true)
}

// FileSizeWithoutChecksums is FileSize for a shard written before the
// checksum section existed (meta section, no per-sample CRCs): what the
// shards of older warehouses measure.
func (l Layout) FileSizeWithoutChecksums(samples int) int64 {
	return l.fileSize(samples, false)
}

func (l Layout) fileSize(samples int, withChecksums bool) int64 {
	if l.Validate() != nil || samples < 0 {
		return -1
	}
	s, ok := l.sections(uint64(samples), true, withChecksums)
	if !ok {
		return -1
	}
	return int64(s.fileSize)
}

// fixedOverhead bounds the bytes of a shard that do not grow with samples:
// the header, the worst-case padding after the images (U8), before the meta
// section and before the checksum section, the meta header, and the
// checksum header and table CRC.
// A compact shard adds its compact header (CompactHeaderSize).
const fixedOverhead = HeaderSize + 3*(sectionAlign-1) + MetaHeaderSize + ChecksumHeaderSize + checksumBytes

// SamplesPerShard returns how many samples of layout l fit in a shard of at
// most targetBytes, and at least 1 (a single sample may exceed the target).
func SamplesPerShard(l Layout, targetBytes int64) int {
	per := l.SampleBytes()
	overhead := int64(fixedOverhead)
	if l.Compact {
		overhead += CompactHeaderSize
	}
	if l.Validate() != nil || per <= 0 || targetBytes <= overhead {
		return 1
	}
	n := (targetBytes - overhead) / per
	if n < 1 {
		return 1
	}
	if int64(int(n)) != n { // int is 32 bits on some platforms
		return math.MaxInt
	}
	return int(n)
}

// sections holds the absolute offsets of every section of a shard.
type sections struct {
	imageOffset uint64
	// compactOffset is where the compact header is (Compact only; 0
	// otherwise): the end of the stored regions rounded up to 8.
	compactOffset uint64
	boxesOffset   uint64
	maskOffset    uint64
	maskEnd       uint64
	metaOffset    uint64 // 0 when there is no meta section
	recordsOffset uint64
	extrasOffset  uint64
	dataEnd       uint64 // end of the extras, or of the mask without a meta section
	// checksumOffset is 0 when there is no checksum section.
	checksumOffset uint64
	crcOffset      uint64 // the first per-sample CRC
	fileSize       uint64
}

// sections computes where every section of a shard of l with samples samples
// lies. The arithmetic is overflow checked: ok is false when any offset would
// exceed math.MaxInt, so a header claiming 2^63 samples is an error instead of
// a wrapped size. l must be valid.
//
// For a Compact layout the images are taken at their largest, every image
// stored whole (compactSections places them as stored).
func (l Layout) sections(samples uint64, withMeta, withChecksums bool) (s sections, ok bool) {
	var c sizeCalc
	if l.Compact {
		return l.compactSections(samples, c.mul(samples, uint64(l.ImageBytes())), c, withMeta, withChecksums)
	}
	s.imageOffset = HeaderSize
	// U8 images are followed by zero padding to a multiple of 8, where
	// their F32 boxes start; F16 and F32 boxes follow the images directly
	// (their offset is a multiple of the element size already).
	s.boxesOffset = c.add(s.imageOffset, c.mul(samples, uint64(l.ImageBytes())))
	if l.DType == U8 {
		s.boxesOffset = c.add(s.boxesOffset, sectionAlign-1) &^ (sectionAlign - 1)
	}
	return l.sectionsFrom(s, samples, c, withMeta, withChecksums)
}

// sectionsFrom completes s, whose imageOffset and boxesOffset are set,
// with the sections after the images.
func (l Layout) sectionsFrom(s sections, samples uint64, c sizeCalc, withMeta, withChecksums bool) (sections, bool) {
	s.maskOffset = c.add(s.boxesOffset, c.mul(samples, uint64(l.boxBytes())))
	s.maskEnd = c.add(s.maskOffset, c.mul(samples, uint64(l.maskBytes())))
	s.dataEnd = s.maskEnd
	if withMeta {
		s.metaOffset = c.add(s.maskEnd, sectionAlign-1) &^ (sectionAlign - 1)
		s.recordsOffset = c.add(s.metaOffset, MetaHeaderSize)
		s.extrasOffset = c.add(s.recordsOffset, c.mul(samples, uint64(l.RecordSize())))
		s.dataEnd = c.add(s.extrasOffset, c.mul(samples, uint64(l.extraBytes())))
	}
	s.fileSize = s.dataEnd
	if withChecksums {
		s.checksumOffset = c.add(s.dataEnd, sectionAlign-1) &^ (sectionAlign - 1)
		s.crcOffset = c.add(s.checksumOffset, ChecksumHeaderSize)
		s.fileSize = c.add(c.add(s.crcOffset, c.mul(samples, checksumBytes)), checksumBytes)
	}
	return s, !c.overflow
}

// sizeCalc does unsigned size arithmetic and remembers whether any result
// left [0, math.MaxInt], the range every offset must fit to index a []byte.
type sizeCalc struct{ overflow bool }

func (c *sizeCalc) mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 || lo > math.MaxInt {
		c.overflow = true
	}
	return lo
}

func (c *sizeCalc) add(a, b uint64) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if carry != 0 || sum > math.MaxInt {
		c.overflow = true
	}
	return sum
}

func alignUp(n, align int) int { return (n + align - 1) &^ (align - 1) }

// Meta is the per-sample record of the meta section, minus the fields that
// are derived from the sample's boxes (box_count, class_index).
type Meta struct {
	// SourceIndex indexes the manifest's sources/runs table.
	SourceIndex uint32
	// FrameID is the frame id of the source sample.
	FrameID uint64
	// InputSeq is the position of the sample in the build's scan order over
	// all inputs, kept or not.
	InputSeq uint64
	// UnixTimeNs is the capture time; 0 when unknown.
	UnixTimeNs int64
	// SimTime is the simulation time of the frame.
	SimTime float64
	// SrcWidth and SrcHeight are the decoded source image size.
	SrcWidth, SrcHeight uint32
	// ResizedWidth and ResizedHeight are the size of the image content
	// inside the target (the letterbox's new size).
	ResizedWidth, ResizedHeight uint32
	// PadX and PadY are the offset of the content inside the target.
	PadX, PadY uint32
	// ScaleX and ScaleY map source pixels to target pixels.
	ScaleX, ScaleY float32
	// BoxesDropped counts boxes lost to max_boxes truncation or degenerate
	// after clamping.
	BoxesDropped uint32
}
