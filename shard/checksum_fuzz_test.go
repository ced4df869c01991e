package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// checksumFuzzGoldens are the golden shards with a checksum section that
// FuzzChecksumSection puts its sections on.
var checksumFuzzGoldens = []string{"u8", "f16", "f32"}

// FuzzChecksumSection fuzzes the checksum section (TWCK header, per-sample
// CRC-32C table, table CRC) of a valid shard: the input replaces the
// section of golden shard `golden` (mod the goldens), and when fixTableCRC
// is set the harness recomputes the trailing table_crc32c over the table,
// so that mutations of the header fields and the per-sample CRCs get past
// the table's own CRC into VerifySample, as a writer bug (not a flipped
// bit) would. Nothing may panic; a rejection wraps ErrCorrupt; an accepted
// shard's VerifySample passes exactly for the samples whose recorded CRC is
// the computed one. FuzzParse covers the rest of the file; this target keeps
// its inputs a few dozen bytes long so the section is explored quickly.
func FuzzChecksumSection(f *testing.F) {
	bodies := make([][]byte, len(checksumFuzzGoldens))
	for g, name := range checksumFuzzGoldens {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", name+".twh"))
		if err != nil {
			f.Fatal(err)
		}
		off := binary.LittleEndian.Uint64(b[offChecksumOffset:])
		if off == 0 || off >= uint64(len(b)) {
			f.Fatalf("golden %s has no checksum section", name)
		}
		bodies[g] = b[:off]
		section := b[off:]
		f.Add(uint8(g), section, false)
		f.Add(uint8(g), section, true)
		f.Add(uint8(g), section[:len(section)-checksumBytes], true)
	}
	f.Fuzz(func(t *testing.T, golden uint8, section []byte, fixTableCRC bool) {
		body := bodies[int(golden)%len(bodies)]
		b := make([]byte, 0, len(body)+len(section))
		b = append(append(b, body...), section...)
		if fixTableCRC && len(section) >= checksumBytes {
			table := b[len(body) : len(b)-checksumBytes]
			binary.LittleEndian.PutUint32(b[len(b)-checksumBytes:], crc32c(0, table))
		}
		fuzzmem.Check(t, 2*fuzzmem.MiB, func() { checkChecksumSection(t, b) }) // as FuzzParse: Parse is zero-copy
	})
}

func checkChecksumSection(t *testing.T, b []byte) {
	r, err := Parse(b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Parse error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	if !r.HasSampleChecksums() {
		t.Fatal("a shard with a checksum_offset accepted without its checksum table")
	}
	for i := range r.Len() {
		recorded, _ := r.SampleChecksum(i)
		err := r.VerifySample(i, nil)
		switch match := recorded == r.ComputeSampleChecksum(i, nil); {
		case match && err != nil:
			t.Fatalf("sample %d: CRC matches, VerifySample says %v", i, err)
		case !match && !errors.Is(err, ErrCorrupt):
			t.Fatalf("sample %d: CRC 0x%08x differs, VerifySample says %v", i, recorded, err)
		}
		// A caller's copy of the image is checked the same way.
		if err2 := r.VerifySample(i, r.Image(i)); (err2 == nil) != (err == nil) {
			t.Fatalf("sample %d: VerifySample with the image copy %v, without %v", i, err2, err)
		}
	}
}

// FuzzCRC32C: crc32c (the fold where the CPU has it) equals hash/crc32's
// CRC-32C for any bytes, register and split point.
func FuzzCRC32C(f *testing.F) {
	f.Add(uint32(0), uint16(0), make([]byte, foldChunk))
	f.Add(uint32(0xFFFFFFFF), uint16(100), bytes.Repeat([]byte{0xA5}, 3*foldChunk+17))
	table := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, init uint32, cut uint16, data []byte) {
		if len(data) < foldChunk { // short inputs never reach the fold: make them long
			data = bytes.Repeat(data, foldChunk/max(len(data), 1)+1)
		}
		want := crc32.Update(init, table, data)
		if got := crc32c(init, data); got != want {
			t.Fatalf("%d bytes from 0x%08x: 0x%08x, hash/crc32 0x%08x", len(data), init, got, want)
		}
		c := int(cut) % (len(data) + 1)
		if got := crc32c(init, data[:c], data[c:]); got != want {
			t.Fatalf("%d bytes cut at %d: 0x%08x, want 0x%08x", len(data), c, got, want)
		}
	})
}
