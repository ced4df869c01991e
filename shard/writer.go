package shard

import (
	"bufio"
	"crypto/sha256"
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
)

// File is what a Writer writes to; an *os.File opened for reading and
// writing satisfies it. It must start empty: the Writer never truncates.
type File interface {
	io.Writer
	io.WriterAt
	io.ReaderAt
}

// Sample is one sample as the Writer takes it.
type Sample struct {
	// Image is the CHW tensor already encoded in the shard dtype
	// (little-endian), exactly Layout.ImageBytes long.
	Image []byte
	// Boxes are the sample's real boxes, x0,y0,x1,y1 normalized to [0,1] in
	// target space with x0 <= x1 and y0 <= y1; at most Layout.MaxBoxes.
	// box_count is len(Boxes).
	Boxes [][4]float32
	// ClassIndex holds one non-negative class per box: len(ClassIndex) ==
	// len(Boxes).
	ClassIndex []int32
	Meta       Meta
	// Extras holds exactly Layout.ExtraF32 values.
	Extras []float32
}

// Result describes a finished shard.
type Result struct {
	Samples int
	Bytes   int64
	SHA256  [sha256.Size]byte
}

// writeBufferSize is the bufio size in front of the file: images are written
// in large sequential writes and hashed in the same pass.
const writeBufferSize = 1 << 20

// tailLimit caps the in-memory trailing sections (boxes, mask, records,
// extras) a Writer preallocates, so a wild sample count cannot make
// NewWriter allocate without bound.
const tailLimit = 1 << 30

var errWriterClosed = errors.New("shard: writer is closed")

// Writer writes one shard. It streams the header and then each image as
// Append is called, keeps the small trailing sections in memory and writes
// them in Close, hashing every byte on the way. Each sample's CRC-32C is
// computed as it is appended, over the bytes written for it, and the table
// of them ends the shard.
//
// Errors are sticky: after the first failure every call returns that same
// error and the file must be discarded. A Writer is not safe for concurrent
// use.
type Writer struct {
	file     File
	layout   Layout
	declared int
	appended int
	buf      *bufio.Writer
	hashed   *hashingWriter

	labels labelSections // the appended samples' labels, already encoded
	crcs   []uint32      // CRC-32C of each appended sample

	// A Compact layout's table entries and the region bytes written so
	// far, and a scratch buffer for one region.
	compactTable []byte
	regionBytes  uint64
	region       []byte

	err error
}

// NewWriter starts a shard of layout l that will hold samples samples and
// writes its header. It does not take ownership of f: the caller syncs and
// closes it after Close.
func NewWriter(f File, l Layout, samples int) (*Writer, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if samples < 1 {
		return nil, fmt.Errorf("shard: a shard needs at least 1 sample, got %d", samples)
	}
	s, ok := l.sections(uint64(samples), true, true)
	if !ok {
		return nil, fmt.Errorf("shard: %d samples of %d bytes overflow the file size", samples, l.SampleBytes())
	}
	tail := s.fileSize - s.boxesOffset
	if tail > tailLimit {
		return nil, fmt.Errorf("shard: %d samples need %d bytes of boxes, mask, meta and checksums in memory, more than %d", samples, tail, tailLimit)
	}
	n := int64(samples)
	hw := &hashingWriter{w: f, h: sha256.New()}
	w := &Writer{
		file:     f,
		layout:   l,
		declared: samples,
		hashed:   hw,
		buf:      bufio.NewWriterSize(hw, writeBufferSize),
		labels:   newLabelSections(l, n),
		crcs:     make([]uint32, 0, samples),
	}
	if l.Compact {
		w.compactTable = make([]byte, 0, n*compactEntrySize)
	}
	var hdr [HeaderSize]byte
	h := l.header(uint64(samples), s)
	h.encode(hdr[:])
	if _, err := w.buf.Write(hdr[:]); err != nil {
		return nil, err
	}
	return w, nil
}

// Append writes the next sample. It fails, stickily, when the sample does
// not match the layout or more samples are appended than declared.
func (w *Writer) Append(s Sample) error {
	if w.err != nil {
		return w.err
	}
	if err := w.checkSample(&s); err != nil {
		w.err = err
		return err
	}
	image := s.Image
	var entry []byte
	if w.layout.Compact {
		entry, image = w.compactImage(s.Image)
	}
	if err := w.writeImage(image); err != nil {
		w.err = fmt.Errorf("shard: write image of sample %d: %w", w.appended, err)
		return w.err
	}
	boxes, mask, record, extras := w.labels.append(w.layout, &s)
	w.crcs = append(w.crcs, crc32c(0, entry, image, boxes, mask, record, extras))
	w.appended++
	return nil
}

// writeImage writes an image's bytes: a large one (overlapBytes and
// more: 384x384 u8 and up) straight to the hashing writer once what is
// buffered has gone ahead of it, not copied through the buffer first.
func (w *Writer) writeImage(image []byte) error {
	if len(image) < overlapBytes {
		_, err := w.buf.Write(image)
		return err
	}
	if err := w.buf.Flush(); err != nil {
		return err
	}
	_, err := w.hashed.Write(image)
	return err
}

// compactImage finds the region of img to store, appends its table entry
// and returns the entry and the region's bytes.
func (w *Writer) compactImage(img []byte) (entry, region []byte) {
	l := w.layout
	var g Region
	g.X, g.Y, g.W, g.H = findRegion(l, img)
	g.Offset = int64(HeaderSize + w.regionBytes)
	w.region = appendRegion(w.region[:0], img, l, g)
	w.regionBytes += uint64(len(w.region))
	entry = grow(&w.compactTable, compactEntrySize)
	encodeCompactEntry(entry, g)
	return entry, w.region
}

// checkSample reports why s cannot be the next sample, or nil.
func (w *Writer) checkSample(s *Sample) error {
	l := w.layout
	i := w.appended
	switch {
	case i >= w.declared:
		return fmt.Errorf("shard: sample %d appended to a shard declared with %d samples", i, w.declared)
	case int64(len(s.Image)) != l.ImageBytes():
		return fmt.Errorf("shard: sample %d: image is %d bytes, layout needs %d", i, len(s.Image), l.ImageBytes())
	}
	return checkLabels(l, s, i)
}

// checkLabels reports why the labels of s, sample i, cannot be stored
// under l, or nil.
func checkLabels(l Layout, s *Sample, i int) error {
	switch {
	case len(s.Boxes) > l.MaxBoxes:
		return fmt.Errorf("shard: sample %d: %d boxes exceed max_boxes %d", i, len(s.Boxes), l.MaxBoxes)
	case len(s.ClassIndex) != len(s.Boxes):
		return fmt.Errorf("shard: sample %d: %d class indices for %d boxes", i, len(s.ClassIndex), len(s.Boxes))
	case len(s.Extras) != l.ExtraF32:
		return fmt.Errorf("shard: sample %d: %d extras, layout needs %d", i, len(s.Extras), l.ExtraF32)
	}
	for j, b := range s.Boxes {
		if problem := boxProblem(b); problem != "" {
			return fmt.Errorf("shard: sample %d: box %d %v: %s", i, j, b, problem)
		}
		if s.ClassIndex[j] < 0 {
			return fmt.Errorf("shard: sample %d: box %d has negative class index %d", i, j, s.ClassIndex[j])
		}
	}
	return nil
}

// boxProblem says why b is not a normalized box, or returns "".
func boxProblem(b [4]float32) string {
	for _, v := range b {
		if !(v >= 0 && v <= 1) {
			return "coordinate outside [0, 1]"
		}
	}
	if b[0] > b[2] || b[1] > b[3] {
		return "x0 > x1 or y0 > y1"
	}
	return ""
}

// grow extends *b by n bytes within its capacity and returns the new bytes.
func grow(b *[]byte, n int) []byte {
	old := len(*b)
	*b = (*b)[:old+n]
	return (*b)[old:]
}

// Close writes the trailing sections and returns the finished shard's size
// and sha256. It neither syncs nor closes the file. The Writer is unusable
// afterwards.
//
// When fewer samples were appended than declared (a late failure at the end
// of a dataset), Close still produces a valid shard for the appended count:
// it writes the trailing sections where that count puts them, rewrites the
// header in place and hashes the file by reading it back. A shard with no
// samples is an error.
func (w *Writer) Close() (Result, error) {
	if w.err != nil {
		return Result{}, w.err
	}
	res, err := w.finish()
	if err != nil {
		w.err = err
		return Result{}, err
	}
	w.err = errWriterClosed
	return res, nil
}

func (w *Writer) finish() (Result, error) {
	if w.appended == 0 {
		return Result{}, errors.New("shard: closing a shard with no samples")
	}
	n := uint64(w.appended)
	s, _ := w.layout.sections(n, true, true) // fits: n <= declared, checked in NewWriter
	imageEnd := s.imageOffset + n*uint64(w.layout.ImageBytes())
	var compactSection []byte
	if w.layout.Compact {
		// The stored regions are at most the whole images: fits.
		s, _ = w.layout.compactSections(n, w.regionBytes, sizeCalc{}, true, true)
		imageEnd = s.imageOffset + w.regionBytes
		compactSection = make([]byte, s.compactOffset-imageEnd+CompactHeaderSize, s.boxesOffset-imageEnd)
		encodeCompactHeader(compactSection[s.compactOffset-imageEnd:], w.layout.Pad)
		compactSection = append(compactSection, w.compactTable...)
		imageEnd = s.boxesOffset // the compact section replaces the padding before the boxes
	}
	tail := trailer(w.layout, n, s, imageEnd, compactSection, &w.labels, w.crcs)

	// A compact shard's header is known only now: it is rewritten in
	// place, as a short shard's.
	if w.appended == w.declared && !w.layout.Compact {
		for _, b := range tail {
			if _, err := w.buf.Write(b); err != nil {
				return Result{}, fmt.Errorf("shard: write trailing sections: %w", err)
			}
		}
		if err := w.buf.Flush(); err != nil {
			return Result{}, fmt.Errorf("shard: write trailing sections: %w", err)
		}
		if uint64(w.hashed.n) != s.fileSize {
			return Result{}, fmt.Errorf("shard: wrote %d bytes, layout says %d", w.hashed.n, s.fileSize)
		}
		res := Result{Samples: w.appended, Bytes: w.hashed.n}
		w.hashed.h.Sum(res.SHA256[:0])
		return res, nil
	}

	// Short shard: the images already sit where the smaller count puts
	// them; everything after them moves up, and the header changes.
	if err := w.buf.Flush(); err != nil {
		return Result{}, fmt.Errorf("shard: write images: %w", err)
	}
	off := int64(s.imageOffset + n*uint64(w.layout.ImageBytes()))
	if w.layout.Compact {
		off = int64(s.imageOffset + w.regionBytes)
	}
	for _, b := range tail {
		if _, err := w.file.WriteAt(b, off); err != nil {
			return Result{}, fmt.Errorf("shard: write trailing sections: %w", err)
		}
		off += int64(len(b))
	}
	var hdr [HeaderSize]byte
	h := w.layout.header(n, s)
	h.encode(hdr[:])
	if _, err := w.file.WriteAt(hdr[:], 0); err != nil {
		return Result{}, fmt.Errorf("shard: rewrite header: %w", err)
	}
	sum := sha256.New()
	copied, err := io.CopyBuffer(sum, io.NewSectionReader(w.file, 0, int64(s.fileSize)), make([]byte, writeBufferSize))
	if err != nil {
		return Result{}, fmt.Errorf("shard: read back for checksum: %w", err)
	}
	if uint64(copied) != s.fileSize {
		return Result{}, fmt.Errorf("shard: read back %d bytes, layout says %d", copied, s.fileSize)
	}
	res := Result{Samples: w.appended, Bytes: copied}
	sum.Sum(res.SHA256[:0])
	return res, nil
}

// labelSections are the encoded boxes, mask, records and extras of a
// shard's samples, in sample order: everything a shard stores of a sample
// but its image.
type labelSections struct {
	boxes, mask, records, extras []byte
}

// newLabelSections has room for n samples' labels under l.
func newLabelSections(l Layout, n int64) labelSections {
	return labelSections{
		boxes:   make([]byte, 0, n*l.boxBytes()),
		mask:    make([]byte, 0, n*l.maskBytes()),
		records: make([]byte, 0, n*int64(l.RecordSize())),
		extras:  make([]byte, 0, n*l.extraBytes()),
	}
}

// append encodes the labels of s (checked: checkLabels) and returns the
// bytes it added to each section.
func (t *labelSections) append(l Layout, s *Sample) (boxes, mask, record, extras []byte) {
	bd := l.DType.BoxDType()
	d := bd.Size()
	boxes = grow(&t.boxes, int(l.boxBytes()))
	mask = grow(&t.mask, int(l.maskBytes()))
	for j := range l.MaxBoxes {
		row := boxes[j*4*d : (j+1)*4*d]
		var m float32
		if j < len(s.Boxes) {
			for k, v := range s.Boxes[j] {
				putElement(row[k*d:], bd, v)
			}
			m = 1
		} else {
			clear(row)
		}
		putElement(mask[j*d:], bd, m)
	}

	record = grow(&t.records, l.RecordSize())
	clear(record)
	encodeRecord(record, &s.Meta, s.ClassIndex, l.MaxBoxes)

	extras = grow(&t.extras, int(l.extraBytes()))
	for k, v := range s.Extras {
		putElement(extras[4*k:], F32, v)
	}
	return boxes, mask, record, extras
}

// trailerParts names the pieces of a trailer, for MatchesExceptImages.
var trailerParts = [...]string{"compact section", "padding after the images", "boxes", "mask",
	"padding after the mask", "meta header", "records", "extras", "padding after the extras", "checksum section"}

// trailer is every byte of a shard of l with n samples laid out at s
// after its image bytes (which end at imageEnd): the compact section of a
// compact shard (nil otherwise), the label sections t with the padding
// and meta header around them, and the checksum section of the
// per-sample CRC-32Cs crcs; in trailerParts order.
func trailer(l Layout, n uint64, s sections, imageEnd uint64, compactSection []byte, t *labelSections, crcs []uint32) [len(trailerParts)][]byte {
	metaHeader := make([]byte, MetaHeaderSize)
	encodeMetaHeader(metaHeader, l, n)
	zeros := make([]byte, sectionAlign)
	return [...][]byte{
		compactSection,
		zeros[:s.boxesOffset-imageEnd], // U8 images: up to 7 bytes before the F32 boxes
		t.boxes, t.mask,
		zeros[:s.metaOffset-s.maskEnd],
		metaHeader, t.records, t.extras,
		zeros[:s.checksumOffset-s.dataEnd],
		checksumSection(crcs),
	}
}

// checksumSection encodes the checksum section of a shard whose samples
// have the CRC-32Cs crcs: header, table, and the table's own CRC-32C.
func checksumSection(crcs []uint32) []byte {
	b := make([]byte, ChecksumHeaderSize+checksumBytes*len(crcs), ChecksumHeaderSize+checksumBytes*(len(crcs)+1))
	encodeChecksumHeader(b, uint64(len(crcs)))
	for i, c := range crcs {
		le.PutUint32(b[ChecksumHeaderSize+checksumBytes*i:], c)
	}
	return le.AppendUint32(b, crc32c(0, b))
}

// hashingWriter hashes and counts what it passes to w.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

// overlapBytes: a write of at least this many bytes is hashed on another
// goroutine while it is written (the bufio flushes of the image section,
// 1 MiB), so a shard costs max(sha256, write) instead of their sum. The
// digest is the same: the bytes are hashed in the same order, each write
// whole before the next.
const overlapBytes = 256 << 10

func (hw *hashingWriter) Write(p []byte) (int, error) {
	if len(p) < overlapBytes {
		n, err := hw.w.Write(p)
		hw.h.Write(p[:n])
		hw.n += int64(n)
		return n, err
	}
	before, _ := hw.h.(encoding.BinaryMarshaler).MarshalBinary()
	done := make(chan struct{})
	go func() {
		hw.h.Write(p)
		close(done)
	}()
	n, err := hw.w.Write(p)
	<-done
	if n < len(p) { // a short write: the digest covers what was written
		if uerr := hw.h.(encoding.BinaryUnmarshaler).UnmarshalBinary(before); uerr != nil && err == nil {
			err = uerr
		}
		hw.h.Write(p[:n])
	}
	hw.n += int64(n)
	return n, err
}
