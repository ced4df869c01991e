package warehouse_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"

	"warehouse-etl/shard"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// crc32cBitwise is CRC-32C from its definition, one bit at a time: the
// expected values below share no code with the shard package's.
func crc32cBitwise(data []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// sampleSpans returns where sample j of shard k lies, section by section
// (image, boxes, mask, record, extras), from the header fields and the
// sizes docs/format/shard.md gives, and the offset of its CRC in the table.
func sampleSpans(t *testing.T, fx *warehousetest.Fixture, k, j int) (spans [5][2]int64, crcAt int64) {
	t.Helper()
	raw, err := os.ReadFile(fx.ShardPath(k))
	if err != nil {
		t.Fatal(err)
	}
	u64 := func(off int) int64 { return int64(binary.LittleEndian.Uint64(raw[off:])) }
	l := fx.Layout
	n := u64(32)
	b := int64(l.DType.BoxDType().Size())
	image, boxes, mask, meta := l.ImageBytes(), int64(l.MaxBoxes)*4*b, int64(l.MaxBoxes)*b, u64(64)
	records, record := meta+24, int64(l.RecordSize())
	extras, extra := records+n*record, int64(l.ExtraF32)*4
	at := func(start, size int64) [2]int64 { return [2]int64{start + int64(j)*size, start + int64(j+1)*size} }
	spans = [5][2]int64{at(80, image), at(u64(48), boxes), at(u64(56), mask), at(records, record), at(extras, extra)}
	return spans, u64(72) + 16 + 4*int64(j)
}

// wantCRCError is the refusal of sample j of shard k as the file now is:
// its bytes' CRC (bitwise, over sampleSpans) against the table's value.
func wantCRCError(t *testing.T, fx *warehousetest.Fixture, k, j int) string {
	t.Helper()
	raw, err := os.ReadFile(fx.ShardPath(k))
	if err != nil {
		t.Fatal(err)
	}
	spans, crcAt := sampleSpans(t, fx, k, j)
	var data []byte
	for _, s := range spans {
		data = append(data, raw[s[0]:s[1]]...)
	}
	got, want := crc32cBitwise(data), binary.LittleEndian.Uint32(raw[crcAt:])
	if got == want {
		t.Fatalf("shard %d sample %d is not damaged", k, j)
	}
	return fmt.Sprintf("%s: warehouse sample %d: shard: corrupt: sample %d: crc32c 0x%08x, the checksum table says 0x%08x",
		fx.ShardPath(k), int(fx.M.Shards[k].FirstSample)+j, j, got, want)
}

// readEpoch reads every batch of one epoch and returns the first error.
func readEpoch(r *Reader, opts BatchOptions) error {
	it, err := r.Batches(context.Background(), opts)
	if err != nil {
		return err
	}
	defer it.Close()
	for {
		if _, err := it.Next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestSampleCRCRefusals flips one byte in each section of sample 1 of
// shard 1 (warehouse sample 4): Sample and every batch path refuse it with
// the error naming the shard file, the warehouse sample and the sample in
// the shard, the other samples read, and SkipSampleChecksums hands the
// flipped bytes out.
func TestSampleCRCRefusals(t *testing.T) {
	spec := warehousetest.Spec{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, Extras: [][]int{{3}}, ShardSizes: []int{3, 3, 2}}
	sections := []string{"image", "boxes", "mask", "record", "extras"}
	for s, section := range sections {
		t.Run(section, func(t *testing.T) { sampleCRCRefusal(t, spec, s) })
	}
}

// sampleCRCRefusal is TestSampleCRCRefusals for section s.
func sampleCRCRefusal(t *testing.T, spec warehousetest.Spec, s int) {
	fx := warehousetest.Write(t, spec)
	spans, _ := sampleSpans(t, fx, 1, 1)
	fx.FlipByte(t, 1, spans[s][0]+(spans[s][1]-spans[s][0])/2)
	want := wantCRCError(t, fx, 1, 1)
	for _, opts := range []OpenOptions{{}, {RecheckSamples: true}} {
		r, err := Open(fx.Dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // a refused sample stays refused
			if _, err := r.Sample(4); err == nil || err.Error() != want {
				t.Fatalf("Sample(4): %v\nwant %q", err, want)
			}
		}
		for i := range r.Len() {
			if s, err := r.Sample(i); i != 4 && err != nil {
				t.Fatalf("Sample(%d): %v", i, err)
			} else if i != 4 {
				checkSample(t, fx, s, i)
			}
		}
		for _, shuffle := range []Shuffle{ShuffleNone, ShuffleShards, ShuffleGlobal} {
			for _, size := range []int{1, 3, 8} {
				err := readEpoch(r, BatchOptions{BatchSize: size, Shuffle: shuffle, Seed: 3})
				if err == nil || err.Error() != want {
					t.Fatalf("batches of %d, shuffle %v: %v\nwant %q", size, shuffle, err, want)
				}
			}
		}
		r.Close()
	}
	r, err := Open(fx.Dir, OpenOptions{SkipSampleChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Sample(4); err != nil {
		t.Fatalf("Sample(4) with SkipSampleChecksums: %v", err)
	}
	if err := readEpoch(r, BatchOptions{BatchSize: 8, Shuffle: ShuffleNone}); err != nil {
		t.Fatalf("batches with SkipSampleChecksums: %v", err)
	}
	if verify, _ := r.VerifiesSamples(); verify || r.SamplesVerified() != 0 {
		t.Fatalf("VerifiesSamples %v, SamplesVerified %d with SkipSampleChecksums", verify, r.SamplesVerified())
	}
}

// TestSampleCRCChunkedRuns reads runs whose images ReadRunInto reads in
// pieces of ReadPiece bytes when checking, each copied into the batch
// with the CRC folded in: 245,760-byte images, so that pieces end inside
// images and hold the end of one and the start of the next, and
// 294,912-byte ones (a batch of 5 large enough for the copies to store
// past the caches). The values are right, checked and unchecked
// (SkipSampleChecksums: the same pieces, copied), and a flip in the
// first, a middle or the last sample of a run is found.
func TestSampleCRCChunkedRuns(t *testing.T) {
	for _, height := range []int{160, 192} {
		spec := warehousetest.Spec{DType: shard.F16, Width: 256, Height: height, MaxBoxes: 1, ShardSizes: []int{5, 3}}
		t.Run(fmt.Sprint(height), func(t *testing.T) {
			for _, j := range []int{0, 2, 4} {
				fx := warehousetest.Write(t, spec)
				if img := fx.Layout.ImageBytes(); img%ReadPiece == 0 || img < ReadPiece {
					t.Fatalf("%d-byte images: pieces of %d end at image ends", img, ReadPiece)
				}
				r, err := Open(fx.Dir, OpenOptions{RecheckSamples: true})
				if err != nil {
					t.Fatal(err)
				}
				checkBatches(t, r, fx.Layout, BatchOptions{BatchSize: 8, Shuffle: ShuffleNone, Remainder: DropRemainder})
				checkBatches(t, r, fx.Layout, BatchOptions{BatchSize: 5, Shuffle: ShuffleShards, Remainder: PadRemainder})
				unchecked, err := Open(fx.Dir, OpenOptions{SkipSampleChecksums: true})
				if err != nil {
					t.Fatal(err)
				}
				checkBatches(t, unchecked, fx.Layout, BatchOptions{BatchSize: 8, Shuffle: ShuffleNone, Remainder: PadRemainder})
				checkBatches(t, unchecked, fx.Layout, BatchOptions{BatchSize: 3, Shuffle: ShuffleGlobal, Remainder: PadRemainder})
				unchecked.Close()
				spans, _ := sampleSpans(t, fx, 0, j)
				fx.FlipByte(t, 0, spans[0][1]-3) // in the piece that ends the image
				want := wantCRCError(t, fx, 0, j)
				if err := readEpoch(r, BatchOptions{BatchSize: 8, Shuffle: ShuffleNone}); err == nil || err.Error() != want {
					t.Fatalf("flip in sample %d: %v\nwant %q", j, err, want)
				}
				r.Close()
			}
		})
	}
}

// TestSampleCRCFirstRead: by default each sample is checked once, on its
// first read (SamplesVerified counts distinct samples however many epochs
// are read); RecheckSamples checks every read. The price of the default:
// a byte that changes after its sample was checked goes through; with
// RecheckSamples it is refused.
func TestSampleCRCFirstRead(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec()) // 11 samples in shards of 4, 4, 3
	first, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	every, err := Open(fx.Dir, OpenOptions{RecheckSamples: true})
	if err != nil {
		t.Fatal(err)
	}
	defer every.Close()
	if verify, everyRead := first.VerifiesSamples(); !verify || everyRead {
		t.Fatalf("default VerifiesSamples = %v, %v", verify, everyRead)
	}
	if verify, everyRead := every.VerifiesSamples(); !verify || !everyRead {
		t.Fatalf("RecheckSamples VerifiesSamples = %v, %v", verify, everyRead)
	}
	opts := BatchOptions{BatchSize: 4, Shuffle: ShuffleGlobal, Remainder: PadRemainder}
	for e := range 3 {
		opts.Epoch = e
		for _, r := range []*Reader{first, every} {
			if err := readEpoch(r, opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if first.SamplesVerified() != 11 || every.SamplesVerified() != 3*12 {
		t.Fatalf("SamplesVerified: first read %d (want 11), every read %d (want 36)", first.SamplesVerified(), every.SamplesVerified())
	}
	if _, err := first.Sample(5); err != nil || first.SamplesVerified() != 11 {
		t.Fatalf("Sample(5) after its check: %v, %d verified", err, first.SamplesVerified())
	}

	// The file changes under both readers (in place: the mapping and
	// pread see it).
	spans, _ := sampleSpans(t, fx, 1, 1)
	fx.FlipByte(t, 1, spans[0][0]+3)
	want := wantCRCError(t, fx, 1, 1)
	if _, err := first.Sample(5); err != nil {
		t.Fatalf("first-read reader, sample checked before the change: %v", err)
	}
	if err := readEpoch(first, opts); err != nil {
		t.Fatalf("first-read reader, samples checked before the change: %v", err)
	}
	if _, err := every.Sample(5); err == nil || err.Error() != want {
		t.Fatalf("RecheckSamples reader: %v\nwant %q", err, want)
	}
	fresh, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := readEpoch(fresh, opts); err == nil || err.Error() != want {
		t.Fatalf("a new reader: %v\nwant %q", err, want)
	}
}

// stripChecksums turns shard k into a shard without a checksum section,
// with shard_version v in its header and manifest entry: with
// shard.Version1 one of an older warehouse (warehouse-etl/1, the legacy
// rule), with shard.Version2 one that declares its meta section. The
// manifest's size and sha256 are updated.
func stripChecksums(t *testing.T, fx *warehousetest.Fixture, k int, v shard.Version) {
	t.Helper()
	raw, err := os.ReadFile(fx.ShardPath(k))
	if err != nil {
		t.Fatal(err)
	}
	raw = raw[:fx.Layout.FileSizeWithoutChecksums(int(fx.M.Shards[k].Samples))]
	binary.LittleEndian.PutUint32(raw[4:], uint32(v))
	binary.LittleEndian.PutUint64(raw[72:], 0)
	if err := os.WriteFile(fx.ShardPath(k), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	fx.M.Shards[k].ShardVersion = uint32(v)
	fx.M.Shards[k].Bytes = int64(len(raw))
	fx.M.Shards[k].ChecksumSHA256 = fmt.Sprintf("%x", sha256.Sum256(raw))
	fx.WriteManifest(t)
}

// TestOlderWarehouse reads warehouses whose shards were written before the
// checksum section (all of them, or one), as shard_version 1 (the legacy
// rule) or 2: they open, every value reads as before, their samples are not
// checked (a flipped byte goes through) and SampleChecksums says how many
// shards are checked.
func TestOlderWarehouse(t *testing.T) {
	for _, tc := range []struct {
		strip   []int
		version shard.Version
	}{{[]int{0, 1, 2}, shard.Version1}, {[]int{1}, shard.Version1}, {[]int{0, 1, 2}, shard.Version2}, {[]int{1}, shard.Version2}} {
		strip := tc.strip
		t.Run(fmt.Sprintf("%v version %d", strip, tc.version), func(t *testing.T) {
			fx := warehousetest.Write(t, warehousetest.DefaultSpec())
			for _, k := range strip {
				stripChecksums(t, fx, k, tc.version)
			}
			if n, err := ShardsWithSampleChecksums(fx.M); err != nil || n != 3-len(strip) {
				t.Fatalf("ShardsWithSampleChecksums = %d, %v; want %d", n, err, 3-len(strip))
			}
			spans, _ := sampleSpans(t, fx, 1, 2)
			for _, opts := range []OpenOptions{{}, {RecheckSamples: true}} {
				r, err := Open(fx.Root, opts)
				if err != nil {
					t.Fatal(err)
				}
				if checked, shards := r.SampleChecksums(); checked != 3-len(strip) || shards != 3 {
					t.Fatalf("SampleChecksums = %d of %d, want %d of 3", checked, shards, 3-len(strip))
				}
				for i := range r.Len() {
					s, err := r.Sample(i)
					if err != nil {
						t.Fatal(err)
					}
					checkSample(t, fx, s, i)
				}
				checkBatches(t, r, fx.Layout, BatchOptions{BatchSize: 3, Shuffle: ShuffleNone, Remainder: PadRemainder})
				checkBatches(t, r, fx.Layout, BatchOptions{BatchSize: 2, Shuffle: ShuffleGlobal, Remainder: PadRemainder})
				// The samples of the shards that kept their tables, once each.
				if want := map[int]int64{3: 0, 1: 7}[len(strip)]; !opts.RecheckSamples && r.SamplesVerified() != want ||
					want == 0 && r.SamplesVerified() != 0 {
					t.Fatalf("SamplesVerified %d with shards %v stripped, want %d", r.SamplesVerified(), strip, want)
				}
				r.Close()
			}
			// Shard 1 has no table in both cases: a flip in it goes through.
			fx.FlipByte(t, 1, spans[0][0]+1)
			r, err := Open(fx.Root, OpenOptions{RecheckSamples: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Sample(6); err != nil {
				t.Fatalf("flipped sample of an unchecked shard: %v", err)
			}
			if err := readEpoch(r, BatchOptions{BatchSize: 11, Shuffle: ShuffleNone}); err != nil {
				t.Fatalf("flipped sample of an unchecked shard, batches: %v", err)
			}
		})
	}
}
