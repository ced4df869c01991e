package container

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Block is one named block handed to a Writer, uncompressed.
type Block struct {
	Name        string
	Data        []byte
	Compression Compression // how to store it; kept raw when compressing does not make it smaller
	ContentType uint16
}

// Writer assembles a container in memory, laid out exactly as the
// reference Go writer lays it out (golden/generate.go of the WShard
// repository): blocks in the order added, names concatenated in that
// order, the data section and every block aligned, no padding after the
// last block, flags = little-endian | checksums (| content types when a
// block has one). The golden files are reproduced byte for byte by it. It
// exists to make test data and demo datasets; the build only reads.
type Writer struct {
	Role        Role
	Alignment   uint8       // 0, 16, 32 or 64
	Compression Compression // the header's default compression field
	blocks      []Block
}

// Add appends a block.
func (w *Writer) Add(b Block) { w.blocks = append(w.blocks, b) }

// stored is a block as it goes on disk.
type stored struct {
	Block
	disk  []byte
	flags uint16
}

// Bytes returns the container.
func (w *Writer) Bytes() ([]byte, error) {
	if a := w.Alignment; a != 0 && a != 16 && a != 32 && a != 64 {
		return nil, fmt.Errorf("container: alignment %d, want 0, 16, 32 or 64", a)
	}
	seen := map[string]bool{}
	blocks := make([]stored, len(w.blocks))
	var strtab []byte
	nameOffsets := make([]uint32, len(w.blocks))
	for i, b := range w.blocks {
		if b.Name == "" || len(b.Name) > 0xFFFF || seen[b.Name] {
			return nil, fmt.Errorf("container: block name %q is empty, too long or repeated", b.Name)
		}
		seen[b.Name] = true
		s, err := encodeBlock(b)
		if err != nil {
			return nil, fmt.Errorf("container: block %q: %w", b.Name, err)
		}
		blocks[i] = s
		nameOffsets[i] = uint32(len(strtab))
		strtab = append(strtab, b.Name...)
	}
	align := func(off uint64) uint64 {
		if w.Alignment == 0 {
			return off
		}
		a := uint64(w.Alignment)
		return (off + a - 1) / a * a
	}
	strOff := uint64(HeaderSize + EntrySize*len(blocks))
	dataOff := align(strOff + uint64(len(strtab)))
	offsets := make([]uint64, len(blocks))
	end := dataOff
	for i, b := range blocks {
		offsets[i] = align(end)
		end = offsets[i] + uint64(len(b.disk))
	}

	flags := FlagLittleEndian | FlagHasChecksums
	for _, b := range blocks {
		if b.ContentType != ContentRaw {
			flags |= FlagHasContentTypes
			break
		}
	}
	out := make([]byte, end)
	le := binary.LittleEndian
	copy(out[offMagic:], Magic)
	out[offVersion] = Version2
	out[offRole] = byte(w.Role)
	le.PutUint16(out[offFlags:], flags)
	out[offAlignment] = w.Alignment
	out[offCompression] = byte(w.Compression)
	le.PutUint16(out[offEntrySize:], EntrySize)
	le.PutUint32(out[offEntryCount:], uint32(len(blocks)))
	le.PutUint64(out[offStringTableOffset:], strOff)
	le.PutUint64(out[offDataOffset:], dataOff)
	le.PutUint64(out[offFileSize:], end)
	for i, b := range blocks {
		e := out[HeaderSize+i*EntrySize:]
		le.PutUint64(e[offEntryHash:], xxhash.Sum64String(b.Name))
		le.PutUint32(e[offEntryNameOffset:], nameOffsets[i])
		le.PutUint16(e[offEntryNameLength:], uint16(len(b.Name)))
		le.PutUint16(e[offEntryFlags:], b.flags)
		le.PutUint64(e[offEntryDataOffset:], offsets[i])
		le.PutUint64(e[offEntryDiskSize:], uint64(len(b.disk)))
		le.PutUint64(e[offEntryOrigSize:], uint64(len(b.Data)))
		le.PutUint32(e[offEntryCRC:], Checksum(b.Data))
		le.PutUint16(e[offEntryContentType:], b.ContentType)
		copy(out[offsets[i]:], b.disk)
	}
	copy(out[strOff:], strtab)
	return out, nil
}

// encodeBlock compresses b as asked, keeping the raw bytes when that does
// not save space (the reference writer's rule).
func encodeBlock(b Block) (stored, error) {
	s := stored{Block: b, disk: b.Data}
	var packed []byte
	switch b.Compression {
	case CompressNone:
		return s, nil
	case CompressZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return s, err
		}
		packed = enc.EncodeAll(b.Data, nil)
		if err := enc.Close(); err != nil {
			return s, err
		}
		s.flags = EntryCompressed | EntryZstd
	case CompressLZ4:
		buf := make([]byte, lz4.CompressBlockBound(len(b.Data)))
		n, err := lz4.CompressBlock(b.Data, buf, nil)
		if err != nil {
			return s, err
		}
		if n == 0 { // incompressible: lz4 says so with 0
			return s, nil
		}
		packed = buf[:n]
		s.flags = EntryCompressed | EntryLZ4
	default:
		return s, errors.New("unknown compression " + b.Compression.String())
	}
	if len(packed) >= len(b.Data) {
		s.flags = 0
		return s, nil
	}
	s.disk = packed
	return s, nil
}
