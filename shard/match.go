package shard

import (
	"bytes"
	"errors"
	"fmt"
)

// MatchesExceptImages checks that r holds, byte for byte, the shard a
// Writer of layout l writes for samples, apart from the image bytes and
// the per-sample CRC-32Cs (which cover the images): the header, every
// box, mask, record and extras byte, the padding between the sections,
// and a checksum section that encodes r's own CRC-32Cs with a correct
// table CRC. The samples' Image fields are not read.
//
// When it returns nil and every sample of r then passes VerifySample,
// the file is what a Writer writes for samples with r's images (up to a
// CRC-32C collision in an image): a build may take the whole file instead
// of writing it again (pipeline/reuse_link.go).
//
// A compact shard is refused: its table and header depend on the images.
// Otherwise the error names the first part that differs; for the label
// sections, the first sample whose bytes differ.
func (r *Reader) MatchesExceptImages(l Layout, samples []Sample) error {
	switch {
	case l.Compact || r.compact:
		return errors.New("shard: a compact shard is not compared without its images")
	case r.layout != l:
		return fmt.Errorf("shard: layout %s, want %s", r.layout, l)
	case r.samples != len(samples):
		return fmt.Errorf("shard: %d samples, want %d", r.samples, len(samples))
	case r.crcs == nil:
		return errors.New("shard: no checksum section")
	}
	n := uint64(len(samples))
	s, ok := l.sections(n, true, true)
	if !ok || uint64(len(r.data)) != s.fileSize {
		return fmt.Errorf("shard: %d bytes, a shard of %d samples has %d", len(r.data), n, s.fileSize)
	}
	var hdr [HeaderSize]byte
	h := l.header(n, s)
	h.encode(hdr[:])
	if !bytes.Equal(r.data[:HeaderSize], hdr[:]) {
		return errors.New("shard: the header differs")
	}
	t := newLabelSections(l, int64(n))
	for i := range samples {
		if err := checkLabels(l, &samples[i], i); err != nil {
			return err
		}
		t.append(l, &samples[i])
	}
	crcs := make([]uint32, n)
	for i := range crcs {
		crcs[i] = le.Uint32(r.crcs[checksumBytes*i:])
	}
	imageEnd := s.imageOffset + n*uint64(l.ImageBytes())
	per := [len(trailerParts)]int{2: int(l.boxBytes()), 3: int(l.maskBytes()), 6: l.RecordSize(), 7: int(l.extraBytes())}
	off := imageEnd
	for k, want := range trailer(l, n, s, imageEnd, nil, &t, crcs) {
		got := r.data[off : off+uint64(len(want))]
		if !bytes.Equal(got, want) {
			if p := per[k]; p > 0 {
				for i := 0; i+p <= len(want); i += p {
					if !bytes.Equal(got[i:i+p], want[i:i+p]) {
						return fmt.Errorf("shard: the %s of sample %d differ", trailerParts[k], i/p)
					}
				}
			}
			return fmt.Errorf("shard: the %s differ", trailerParts[k])
		}
		off += uint64(len(want))
	}
	return nil
}
