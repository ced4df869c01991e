package shard

import (
	"encoding/binary"
	"math"
)

var le = binary.LittleEndian

// encode writes h into the first HeaderSize bytes of b.
func (h *Header) encode(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[offMagic:], Magic)
	le.PutUint32(b[offVersion:], uint32(h.Version))
	le.PutUint32(b[offDType:], uint32(h.DType))
	le.PutUint32(b[offEndianness:], h.Endianness)
	le.PutUint32(b[offWidth:], h.Width)
	le.PutUint32(b[offHeight:], h.Height)
	le.PutUint32(b[offChannels:], h.Channels)
	le.PutUint32(b[offMaxBoxes:], h.MaxBoxes)
	le.PutUint64(b[offSamples:], h.Samples)
	le.PutUint64(b[offImageOffset:], h.ImageOffset)
	le.PutUint64(b[offBoxesOffset:], h.BoxesOffset)
	le.PutUint64(b[offMaskOffset:], h.MaskOffset)
	le.PutUint64(b[offMetaOffset:], h.MetaOffset)
	le.PutUint64(b[offChecksumOffset:], h.ChecksumOffset)
}

// decodeHeader reads the fields after the magic from the first HeaderSize
// bytes of b; the caller checks the magic.
func decodeHeader(b []byte) Header {
	_ = b[HeaderSize-1]
	return Header{
		Version:        Version(le.Uint32(b[offVersion:])),
		DType:          DType(le.Uint32(b[offDType:])),
		Endianness:     le.Uint32(b[offEndianness:]),
		Width:          le.Uint32(b[offWidth:]),
		Height:         le.Uint32(b[offHeight:]),
		Channels:       le.Uint32(b[offChannels:]),
		MaxBoxes:       le.Uint32(b[offMaxBoxes:]),
		Samples:        le.Uint64(b[offSamples:]),
		ImageOffset:    le.Uint64(b[offImageOffset:]),
		BoxesOffset:    le.Uint64(b[offBoxesOffset:]),
		MaskOffset:     le.Uint64(b[offMaskOffset:]),
		MetaOffset:     le.Uint64(b[offMetaOffset:]),
		ChecksumOffset: le.Uint64(b[offChecksumOffset:]),
	}
}

// header returns the header of a shard of l holding samples samples laid out
// at s.
func (l Layout) header(samples uint64, s sections) Header {
	return Header{
		Version:        l.Version(),
		DType:          l.DType,
		Endianness:     EndianLittle,
		Width:          uint32(l.Width),
		Height:         uint32(l.Height),
		Channels:       uint32(l.Channels),
		MaxBoxes:       uint32(l.MaxBoxes),
		Samples:        samples,
		ImageOffset:    s.imageOffset,
		BoxesOffset:    s.boxesOffset,
		MaskOffset:     s.maskOffset,
		MetaOffset:     s.metaOffset,
		ChecksumOffset: s.checksumOffset,
	}
}

// encodeChecksumHeader writes the checksum section header into the first
// ChecksumHeaderSize bytes of b.
func encodeChecksumHeader(b []byte, samples uint64) {
	_ = b[ChecksumHeaderSize-1]
	copy(b[offChecksumMagic:], ChecksumMagic)
	le.PutUint32(b[offChecksumVersion:], uint32(MaxSupportedChecksumVersion))
	le.PutUint64(b[offChecksumSamples:], samples)
}

// encodeMetaHeader writes the meta section header into the first
// MetaHeaderSize bytes of b.
func encodeMetaHeader(b []byte, l Layout, samples uint64) {
	_ = b[MetaHeaderSize-1]
	copy(b[offMetaMagic:], MetaMagic)
	le.PutUint32(b[offMetaVersion:], uint32(MaxSupportedMetaVersion))
	le.PutUint32(b[offMetaRecordSize:], uint32(l.RecordSize()))
	le.PutUint32(b[offMetaExtraF32:], uint32(l.ExtraF32))
	le.PutUint64(b[offMetaSamples:], samples)
}

// encodeRecord writes one record into b (len(b) == record_size, zeroed):
// m, box_count = len(classIndex), the class indices and -1 for every padding
// slot up to maxBoxes.
func encodeRecord(b []byte, m *Meta, classIndex []int32, maxBoxes int) {
	le.PutUint32(b[offRecSourceIndex:], m.SourceIndex)
	le.PutUint32(b[offRecFlags:], 0)
	le.PutUint64(b[offRecFrameID:], m.FrameID)
	le.PutUint64(b[offRecInputSeq:], m.InputSeq)
	le.PutUint64(b[offRecUnixTimeNs:], uint64(m.UnixTimeNs))
	le.PutUint64(b[offRecSimTime:], math.Float64bits(m.SimTime))
	le.PutUint32(b[offRecSrcWidth:], m.SrcWidth)
	le.PutUint32(b[offRecSrcHeight:], m.SrcHeight)
	le.PutUint32(b[offRecResizedWidth:], m.ResizedWidth)
	le.PutUint32(b[offRecResizedHeight:], m.ResizedHeight)
	le.PutUint32(b[offRecPadX:], m.PadX)
	le.PutUint32(b[offRecPadY:], m.PadY)
	le.PutUint32(b[offRecScaleX:], math.Float32bits(m.ScaleX))
	le.PutUint32(b[offRecScaleY:], math.Float32bits(m.ScaleY))
	le.PutUint32(b[offRecBoxCount:], uint32(len(classIndex)))
	le.PutUint32(b[offRecBoxesDropped:], m.BoxesDropped)
	for j := range maxBoxes {
		c := int32(-1)
		if j < len(classIndex) {
			c = classIndex[j]
		}
		le.PutUint32(b[offRecClassIndex+4*j:], uint32(c))
	}
}

// decodeRecordMeta reads the Meta fields of the record at the start of b.
func decodeRecordMeta(b []byte) Meta {
	_ = b[recordFixedSize-1]
	return Meta{
		SourceIndex:   le.Uint32(b[offRecSourceIndex:]),
		FrameID:       le.Uint64(b[offRecFrameID:]),
		InputSeq:      le.Uint64(b[offRecInputSeq:]),
		UnixTimeNs:    int64(le.Uint64(b[offRecUnixTimeNs:])),
		SimTime:       math.Float64frombits(le.Uint64(b[offRecSimTime:])),
		SrcWidth:      le.Uint32(b[offRecSrcWidth:]),
		SrcHeight:     le.Uint32(b[offRecSrcHeight:]),
		ResizedWidth:  le.Uint32(b[offRecResizedWidth:]),
		ResizedHeight: le.Uint32(b[offRecResizedHeight:]),
		PadX:          le.Uint32(b[offRecPadX:]),
		PadY:          le.Uint32(b[offRecPadY:]),
		ScaleX:        math.Float32frombits(le.Uint32(b[offRecScaleX:])),
		ScaleY:        math.Float32frombits(le.Uint32(b[offRecScaleY:])),
		BoxesDropped:  le.Uint32(b[offRecBoxesDropped:]),
	}
}
