package shard

import (
	"fmt"
	"unsafe"
)

// Rows is where CopyRows puts n consecutive samples: every slice holds
// exactly n samples (Boxes n*max_boxes*4 elements of the shard dtype, Mask
// n*max_boxes elements, ClassIndex n*max_boxes, BoxCount and Meta n, Extras
// n*extra_f32).
type Rows struct {
	Boxes      []byte
	Mask       []byte
	ClassIndex []int32 // -1 for padding slots
	BoxCount   []int32
	Meta       []Meta
	Extras     []float32
}

// ImageSpan returns where the images of samples [i, i+n) lie in the shard
// file: one contiguous range of n*ImageBytes bytes starting at off. A reader
// that copies images into its own buffers can read that range with one
// pread (os.File.ReadAt) instead of touching the mapping, which saves the
// page-table work of faulting the mapping in. It panics if [i, i+n) is not
// within [0, Len()), like every sample accessor.
//
// A compact shard has no such range: ImageSpan panics on one (see
// RegionSpan and RestoreImage).
func (r *Reader) ImageSpan(i, n int) (off int64, length int) {
	r.checkRun(i, n)
	if r.compact {
		panic("shard: ImageSpan on a compact shard")
	}
	return int64(r.imageOffset) + int64(i)*int64(r.imageBytes), n * r.imageBytes
}

// CheckImageCRC checks sample i of a shard that is not compact against
// the checksum table, given crc, the CRC-32C of its image bytes as the
// caller read them (CopyCRC32C over its copy): the CRC continues over the
// sample's other sections in the shard. The result is VerifySample's: nil
// on a match or without a checksum section, an error wrapping ErrCorrupt
// that names the sample and both CRCs otherwise. It panics on a compact
// shard (see RestoreImageChecked).
func (r *Reader) CheckImageCRC(i int, crc uint32) error {
	if r.compact {
		panic("shard: CheckImageCRC on a compact shard")
	}
	want, ok := r.SampleChecksum(i)
	if !ok {
		return nil
	}
	return checkSampleCRC(i, r.tailChecksum(crc, i), want)
}

func (r *Reader) checkRun(i, n int) {
	if i < 0 || n < 0 || i > r.samples-n {
		panic(fmt.Sprintf("shard: samples [%d, %d) out of range [0:%d]", i, i+n, r.samples))
	}
}

// CopyRows copies everything but the images of samples [i, i+n) into dst,
// n = len(dst.BoxCount): the raw box and mask bytes as stored, and the meta
// records and extras decoded, without allocating. Class index slots past a
// sample's box_count are -1. Without a meta section, BoxCount is counted
// from the mask, Meta is zero and there are no extras.
func (r *Reader) CopyRows(i int, dst Rows) {
	n := len(dst.BoxCount)
	r.checkRun(i, n)
	b := r.layout.MaxBoxes
	copy(dst.Boxes[:n*r.boxBytes], r.data[r.boxesOffset+i*r.boxBytes:])
	copy(dst.Mask[:n*r.maskBytes], r.data[r.maskOffset+i*r.maskBytes:])
	classes := dst.ClassIndex[:n*b]
	if !r.hasMeta {
		for j := range n {
			dst.BoxCount[j] = int32(r.BoxCount(i + j))
			dst.Meta[j] = Meta{}
		}
		for k := range classes {
			classes[k] = -1
		}
		return
	}
	for j := range n {
		rec := r.data[r.recordsOffset+(i+j)*r.recordSize:][:r.recordSize]
		dst.Meta[j] = decodeRecordMeta(rec)
		count := int(le.Uint32(rec[offRecBoxCount:])) // <= max_boxes: Parse checked
		dst.BoxCount[j] = int32(count)
		row := classes[j*b : (j+1)*b]
		for k := range count {
			row[k] = int32(le.Uint32(rec[offRecClassIndex+4*k:]))
		}
		for k := count; k < b; k++ {
			row[k] = -1
		}
	}
	if r.extraBytes == 0 {
		return
	}
	src := r.data[r.extrasOffset+i*r.extraBytes:][:n*r.extraBytes]
	extras := dst.Extras[:n*r.layout.ExtraF32]
	if hostLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(extras))), len(src)), src)
		return
	}
	for k := range extras {
		extras[k] = element(src[4*k:], F32)
	}
}
