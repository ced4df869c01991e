// Package container reads and writes the Shard v2 container that WShard
// episode files (role 0x05) and their chunk manifests (role 0x04) are
// stored in: a fixed header, an index of named blocks, a string table of
// block names, and the blocks themselves, each optionally compressed with
// zstd or lz4 and checksummed with CRC32C.
//
// The container knows nothing of episodes: dtypes, shapes and time steps
// live in JSON blocks that package wshard interprets. A Reader parses and
// checks the header, index and string table up front, then reads one block
// at a time through an io.ReaderAt, so reading a 40-byte reward block from a
// 2 GB episode reads the index and those 40 bytes, nothing else.
//
// # File layout
//
// All integers are little-endian. Offsets are absolute file offsets.
//
//	+--------------------------------------------+ 0
//	| header                         64 bytes    |
//	+--------------------------------------------+ 64
//	| index   [entry_count] x 48 bytes           |
//	+--------------------------------------------+ string_table_offset
//	| string table: names concatenated,          |
//	| no separators, no NUL terminators          |
//	| zero padding to the alignment              |
//	+--------------------------------------------+ data_section_offset
//	| blocks, each starting at a multiple of     |
//	| the alignment, zero padding between them   |
//	+--------------------------------------------+ total_file_size, exactly
//
// The header:
//
//	off size field
//	0   4    magic "SHRD"
//	4   1    version u8              (2)
//	5   1    role u8                 (0x05 WShard, 0x04 manifest, 0x01/0x02/0x08 others)
//	6   2    flags u16               (0x02 little-endian, 0x10 schema, 0x20 checksums,
//	                                  0x40 streaming, 0x80 content types; informational)
//	8   1    alignment u8            (0, 16, 32 or 64)
//	9   1    compression u8          (default for blocks flagged compressed without an
//	                                  algorithm: 0 none, 1 zstd, 2 lz4)
//	10  2    index_entry_size u16    (48)
//	12  4    entry_count u32
//	16  8    string_table_offset u64
//	24  8    data_section_offset u64
//	32  8    schema_offset u64       (0 = none)
//	40  8    total_file_size u64
//	48  16   reserved
//
// An index entry:
//
//	off size field
//	0   8    name_hash u64     xxHash64 of the name's UTF-8 bytes
//	8   4    name_offset u32   into the string table
//	12  2    name_length u16
//	14  2    flags u16         0x1 compressed, 0x2 zstd, 0x4 lz4 (zstd = 0x0003, lz4 = 0x0005)
//	16  8    data_offset u64   absolute
//	24  8    disk_size u64     bytes stored
//	32  8    original_size u64 bytes after decompression (= disk_size when raw)
//	40  4    crc32c u32        Castagnoli CRC of the uncompressed bytes
//	44  2    content_type u16  (0 raw, 2 JSON, ...)
//	46  2    reserved (the reference writer's tag bits; ignored)
//
// zstd blocks are standard zstd frames; lz4 blocks are the lz4 block format
// with no frame header, whose decoded size is original_size.
//
// # What a Reader checks
//
// Before any block is read (NewReader), in this order, each with its own
// message wrapping ErrCorrupt: the file holds the 64-byte header; magic;
// version; index entry size; alignment; default compression; the header's
// total size equals the file's size (a truncated or extended file is
// rejected whole); the index fits between the header and the string table
// and the entry count is within Limits; the string table lies before the
// data section, which lies inside the file; the schema offset is inside
// the file. Then for every entry: its name lies inside the string table, is
// valid UTF-8 and not empty; its xxHash64 equals name_hash (a mismatch wraps
// ErrChecksum); no name repeats; its flags name a known compression (an
// unknown one wraps ErrDecompress); a raw block's disk and original sizes
// agree; the block starts at or after the data section, at a multiple of
// the alignment, and ends inside the file; no two blocks overlap.
//
// Reading a block (ReadBlock) checks that its original size is within
// Limits.MaxBlockBytes and, for zstd, that the stored bytes can decode to
// it (at most 32768:1) before allocating (a decompression bomb wraps
// ErrDecompress), decompresses it to exactly that size, and checks its
// CRC32C over the uncompressed bytes (ErrChecksum). A stored CRC of zero is
// checked only when the header's checksums flag (0x20) is set, as the
// reference reader does: writers that leave the flag unset may write 0.
package container

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Magic opens every Shard container.
const Magic = "SHRD"

// Version2 is the only container version this package reads and writes.
const Version2 = 2

// Fixed sizes of the header and of one index entry.
const (
	HeaderSize = 64
	EntrySize  = 48
)

// Header field offsets.
const (
	offMagic             = 0
	offVersion           = 4
	offRole              = 5
	offFlags             = 6
	offAlignment         = 8
	offCompression       = 9
	offEntrySize         = 10
	offEntryCount        = 12
	offStringTableOffset = 16
	offDataOffset        = 24
	offSchemaOffset      = 32
	offFileSize          = 40
)

// Index entry field offsets.
const (
	offEntryHash        = 0
	offEntryNameOffset  = 8
	offEntryNameLength  = 12
	offEntryFlags       = 14
	offEntryDataOffset  = 16
	offEntryDiskSize    = 24
	offEntryOrigSize    = 32
	offEntryCRC         = 40
	offEntryContentType = 44
)

// Role says what a container holds.
type Role uint8

// Known roles. Only RoleWShard and RoleManifest are read by package wshard.
const (
	RoleMoSH      Role = 0x01
	RolePTShard   Role = 0x02
	RoleGemmPanel Role = 0x03
	RoleManifest  Role = 0x04 // a chunked episode's manifest: one JSON block meta/manifest
	RoleWShard    Role = 0x05 // one episode (or one chunk of one)
	RoleOther     Role = 0x08
)

// Header flag bits. They describe the file; no reading decision depends on
// them except FlagHasChecksums (see the package documentation).
const (
	FlagLittleEndian    uint16 = 0x0002
	FlagHasSchema       uint16 = 0x0010
	FlagHasChecksums    uint16 = 0x0020
	FlagStreaming       uint16 = 0x0040
	FlagHasContentTypes uint16 = 0x0080
)

// Compression is a block compression algorithm.
type Compression uint8

// Compression algorithms, as numbered in the header's default field.
const (
	CompressNone Compression = 0
	CompressZstd Compression = 1
	CompressLZ4  Compression = 2
)

func (c Compression) String() string {
	switch c {
	case CompressNone:
		return "none"
	case CompressZstd:
		return "zstd"
	case CompressLZ4:
		return "lz4"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Entry flag bits.
const (
	EntryCompressed uint16 = 0x0001
	EntryZstd       uint16 = 0x0002
	EntryLZ4        uint16 = 0x0004
	entryKnownFlags        = EntryCompressed | EntryZstd | EntryLZ4
)

// Content types seen in WShard files.
const (
	ContentRaw  uint16 = 0
	ContentJSON uint16 = 2
)

// crc32c is the Castagnoli table: WShard checksums are CRC32C, not the IEEE
// CRC of hash/crc32's default.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b, as stored in an index entry.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, crc32c) }

// Header is the parsed 64-byte container header.
type Header struct {
	Version           uint8
	Role              Role
	Flags             uint16
	Alignment         uint8
	Compression       Compression // default for blocks flagged compressed without an algorithm
	EntrySize         uint16
	EntryCount        uint32
	StringTableOffset uint64
	DataOffset        uint64
	SchemaOffset      uint64
	FileSize          uint64
}

func parseHeader(b []byte) Header {
	le := binary.LittleEndian
	return Header{
		Version:           b[offVersion],
		Role:              Role(b[offRole]),
		Flags:             le.Uint16(b[offFlags:]),
		Alignment:         b[offAlignment],
		Compression:       Compression(b[offCompression]),
		EntrySize:         le.Uint16(b[offEntrySize:]),
		EntryCount:        le.Uint32(b[offEntryCount:]),
		StringTableOffset: le.Uint64(b[offStringTableOffset:]),
		DataOffset:        le.Uint64(b[offDataOffset:]),
		SchemaOffset:      le.Uint64(b[offSchemaOffset:]),
		FileSize:          le.Uint64(b[offFileSize:]),
	}
}

// Entry is one block's index entry, with its name resolved.
type Entry struct {
	Name        string
	NameHash    uint64
	Flags       uint16
	Offset      uint64 // absolute offset of the stored bytes
	DiskSize    uint64 // stored bytes
	OrigSize    uint64 // bytes after decompression
	CRC         uint32 // CRC32C of the uncompressed bytes
	ContentType uint16

	compression Compression // resolved from Flags and the header default
}

// Compression returns the algorithm the block is stored with.
func (e Entry) Compression() Compression { return e.compression }

// rawEntry is an index entry before its name is looked up.
type rawEntry struct {
	hash        uint64
	nameOffset  uint32
	nameLength  uint16
	flags       uint16
	offset      uint64
	diskSize    uint64
	origSize    uint64
	crc         uint32
	contentType uint16
}

func parseEntry(b []byte) rawEntry {
	le := binary.LittleEndian
	return rawEntry{
		hash:        le.Uint64(b[offEntryHash:]),
		nameOffset:  le.Uint32(b[offEntryNameOffset:]),
		nameLength:  le.Uint16(b[offEntryNameLength:]),
		flags:       le.Uint16(b[offEntryFlags:]),
		offset:      le.Uint64(b[offEntryDataOffset:]),
		diskSize:    le.Uint64(b[offEntryDiskSize:]),
		origSize:    le.Uint64(b[offEntryOrigSize:]),
		crc:         le.Uint32(b[offEntryCRC:]),
		contentType: le.Uint16(b[offEntryContentType:]),
	}
}

// resolveCompression maps entry flags to an algorithm. A block flagged
// compressed without an algorithm bit uses the header's default, as the
// reference reader does.
func resolveCompression(flags uint16, def Compression) (Compression, error) {
	if flags&^entryKnownFlags != 0 {
		return 0, fmt.Errorf("unknown entry flags 0x%04x", flags)
	}
	zstdBit, lz4Bit := flags&EntryZstd != 0, flags&EntryLZ4 != 0
	if flags&EntryCompressed == 0 {
		if zstdBit || lz4Bit {
			return 0, fmt.Errorf("entry flags 0x%04x name an algorithm but not the compressed bit", flags)
		}
		return CompressNone, nil
	}
	switch {
	case zstdBit && lz4Bit:
		return 0, fmt.Errorf("entry flags 0x%04x name both zstd and lz4", flags)
	case zstdBit:
		return CompressZstd, nil
	case lz4Bit:
		return CompressLZ4, nil
	case def == CompressZstd || def == CompressLZ4:
		return def, nil
	}
	return 0, fmt.Errorf("entry flags 0x%04x say compressed but name no algorithm, and the header default is %s", flags, def)
}
