package kdb

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
)

// File is an open .kdb file: its header and index, checked once by Open.
// Episodes are read on demand through the io.ReaderAt, section by
// section: the steps of an episode are read without touching its images,
// and a camera record's header without its data. A File is safe for
// concurrent use when its io.ReaderAt is (an *os.File is).
type File struct {
	r        io.ReaderAt
	size     int64
	header   Header
	entries  []IndexEntry // in file order
	trailing int64        // bytes after the index
}

// indexChunk is how many index entries Open reads at a time, so a large
// index is never held twice (raw and parsed).
const indexChunk = 1024

// Open checks the header and the index of a file of the given size and
// returns it ready for reading. It fails, wrapping ErrCorrupt (or
// ErrVersion for a newer major version), when:
//
//   - the file is shorter than the header, or the magic is wrong;
//   - the index starts inside the header or runs past the end of the file;
//   - index_length is not num_episodes x 64;
//   - a section of an entry lies outside [64, index_offset);
//   - sections of the file overlap, which a writer never produces and
//     which would let a small file announce an unbounded number of frames;
//   - an entry's num_frames cannot fit in its image section (every frame
//     takes at least the 2 bytes of num_cameras);
//   - the entries' frames do not add up to the header's num_frames.
//
// A newer minor version and bytes after the index are accepted; the caller
// can see both (Header().NewerMinor(), TrailingBytes()).
func Open(r io.ReaderAt, size int64) (*File, error) {
	if size < HeaderSize {
		return nil, corruptf("%d bytes, shorter than the %d-byte header", size, HeaderSize)
	}
	var hb [HeaderSize]byte
	if err := readFull(r, hb[:], 0); err != nil {
		return nil, err
	}
	h, err := ParseHeader(hb[:])
	if err != nil {
		return nil, err
	}
	fsize := uint64(size)
	if h.IndexOffset < HeaderSize {
		return nil, corruptf("index offset %d lies inside the %d-byte header", h.IndexOffset, HeaderSize)
	}
	if h.IndexOffset > fsize || h.IndexLength > fsize-h.IndexOffset {
		return nil, corruptf("index at offset %d, %d bytes long, runs past the end of the file (%d bytes)", h.IndexOffset, h.IndexLength, size)
	}
	if h.IndexLength%IndexEntrySize != 0 {
		return nil, corruptf("index length %d is not a multiple of the %d-byte entry", h.IndexLength, IndexEntrySize)
	}
	if n := h.IndexLength / IndexEntrySize; n != h.NumEpisodes {
		return nil, corruptf("index holds %d entries, the header says %d episodes", n, h.NumEpisodes)
	}
	f := &File{r: r, size: size, header: h, trailing: int64(fsize - h.IndexOffset - h.IndexLength)}
	// NumEpisodes is now bounded by the file size / 64.
	f.entries = make([]IndexEntry, 0, h.NumEpisodes)
	buf := make([]byte, min(h.NumEpisodes, indexChunk)*IndexEntrySize)
	for first := uint64(0); first < h.NumEpisodes; first += indexChunk {
		n := min(h.NumEpisodes-first, indexChunk)
		chunk := buf[:n*IndexEntrySize]
		if err := readFull(r, chunk, int64(h.IndexOffset+first*IndexEntrySize)); err != nil {
			return nil, err
		}
		for k := range n {
			f.entries = append(f.entries, parseIndexEntry(chunk[k*IndexEntrySize:]))
		}
	}
	if err := f.checkEntries(); err != nil {
		return nil, err
	}
	return f, nil
}

// namedSection is a section with the entry it belongs to, for messages.
type namedSection struct {
	Section
	entry int
	what  string
}

// checkEntries bounds every section of every entry; see Open.
func (f *File) checkEntries() error {
	h := f.header
	var frames uint64
	var all []namedSection
	for i, e := range f.entries {
		for _, s := range []namedSection{{e.Meta, i, "meta"}, {e.Actions, i, "state/action"}, {e.Images, i, "image"}} {
			if s.Offset < HeaderSize || s.Offset > h.IndexOffset || s.Length > h.IndexOffset-s.Offset {
				return corruptf("%s: %s section at offset %d, %d bytes long, lies outside the episode data [%d, %d)",
					f.describe(i), s.what, s.Offset, s.Length, HeaderSize, h.IndexOffset)
			}
			if s.Length > 0 {
				all = append(all, s)
			}
		}
		if uint64(e.NumFrames)*frameHeader > e.Images.Length {
			return corruptf("%s: %d frames cannot fit in an image section of %d bytes (%d bytes per frame at least)",
				f.describe(i), e.NumFrames, e.Images.Length, frameHeader)
		}
		if uint64(e.NumFrames) > h.NumFrames-frames { // frames <= h.NumFrames holds here
			return corruptf("the index holds more frames than the header's %d", h.NumFrames)
		}
		frames += uint64(e.NumFrames)
	}
	if frames != h.NumFrames {
		return corruptf("the index holds %d frames, the header says %d", frames, h.NumFrames)
	}
	slices.SortFunc(all, func(a, b namedSection) int { return cmp.Compare(a.Offset, b.Offset) })
	for k := 1; k < len(all); k++ {
		if prev, cur := all[k-1], all[k]; cur.Offset < prev.end() {
			return corruptf("%s: %s section at offset %d overlaps the %s section of %s at offset %d, %d bytes long",
				f.describe(cur.entry), cur.what, cur.Offset, prev.what, f.describe(prev.entry), prev.Offset, prev.Length)
		}
	}
	return nil
}

// describe names entry i for messages: "episode 7 (index entry 2)".
func (f *File) describe(i int) string {
	return fmt.Sprintf("episode %d (index entry %d)", f.entries[i].EpisodeID, i)
}

// Header returns the file header.
func (f *File) Header() Header { return f.header }

// Len is the number of episodes.
func (f *File) Len() int { return len(f.entries) }

// Entry returns index entry i, in file order.
func (f *File) Entry(i int) IndexEntry { return f.entries[i] }

// TrailingBytes is the number of bytes after the index; a 0.1 writer
// leaves none.
func (f *File) TrailingBytes() int64 { return f.trailing }

// Meta reads and parses episode i's meta blob, and nothing else.
func (f *File) Meta(i int) (Meta, error) {
	s := f.entries[i].Meta
	b := make([]byte, min(s.Length, maxMetaBytes))
	if err := readFull(f.r, b, int64(s.Offset)); err != nil {
		return Meta{}, err
	}
	m, err := parseMeta(b)
	if err != nil {
		return Meta{}, corruptf("%s: %w", f.describe(i), err)
	}
	return m, nil
}

// Step is one frame's record of the state/action section.
type Step struct {
	State    []float32
	Action   []float32
	Reward   float32
	Terminal bool
}

// StepReader reads an episode's state/action section frame by frame.
type StepReader struct {
	c     *cursor
	e     IndexEntry
	state []float32
	act   []float32
}

// Steps returns a reader of episode i's state/action section. It fails
// (wrapping ErrCorrupt) when the section's length is not num_frames times
// the record size that state_dim and action_dim give: the reference writer
// takes state_dim from the first frame only, so a later frame with a
// different state length shows up here and nowhere else.
func (f *File) Steps(i int) (*StepReader, error) {
	e := f.entries[i]
	if want := uint64(e.NumFrames) * e.StepSize(); e.Actions.Length != want {
		return nil, corruptf("%s: state/action section is %d bytes, the index gives %d frames x %d bytes (state_dim %d, action_dim %d) = %d",
			f.describe(i), e.Actions.Length, e.NumFrames, e.StepSize(), e.StateDim, e.ActionDim, want)
	}
	return &StepReader{c: newCursor(f.r, e.Actions, stepReadAhead), e: e,
		state: make([]float32, e.StateDim), act: make([]float32, e.ActionDim)}, nil
}

// Next reads the next frame's step. Its State and Action slices are reused
// by the following call.
func (r *StepReader) Next() (Step, error) {
	b, err := r.c.next(int(r.e.StepSize()))
	if err != nil {
		return Step{}, corruptf("episode %d: state/action record %w", r.e.EpisodeID, err)
	}
	float32s(r.state, b)
	float32s(r.act, b[4*len(r.state):])
	tail := b[4*(len(r.state)+len(r.act)):]
	return Step{
		State:    r.state,
		Action:   r.act,
		Reward:   math.Float32frombits(le.Uint32(tail)),
		Terminal: tail[4] != 0,
	}, nil
}

// CameraRecord is one camera image of a frame, without its data.
type CameraRecord struct {
	Name          string
	Width, Height uint32
	Channels      uint8
	Format        uint8 // FormatRaw or FormatCompressed (the reference treats any value >= 1 as compressed)
	Offset        int64 // absolute file offset of the record (its name_len field)
	DataOffset    int64 // absolute file offset of the data
	DataLen       uint32
}

// Compressed reports whether the data is an encoded image (JPEG or PNG).
func (c CameraRecord) Compressed() bool { return c.Format != FormatRaw }

// FrameReader walks an episode's image section frame by frame, reading
// record headers and skipping image data.
type FrameReader struct {
	f     *File
	entry int
	c     *cursor
	frame int
	cams  []CameraRecord
}

// Frames returns a walker over episode i's image section.
func (f *File) Frames(i int) *FrameReader {
	return &FrameReader{f: f, entry: i, c: newCursor(f.r, f.entries[i].Images, 0)}
}

// Next reads the next frame's camera records. The returned slice is reused
// by the following call.
func (r *FrameReader) Next() ([]CameraRecord, error) {
	n, err := r.c.u16()
	if err != nil {
		return nil, r.errorf("num_cameras %w", err)
	}
	r.cams = r.cams[:0]
	for k := range int(n) {
		rec, err := readCameraRecord(r.c)
		if err != nil {
			return nil, r.errorf("camera %d: %w", k, err)
		}
		r.cams = append(r.cams, rec)
	}
	r.frame++
	return r.cams, nil
}

// Rest is the number of section bytes after the frames read so far.
func (r *FrameReader) Rest() int64 { return r.c.remaining() }

func (r *FrameReader) errorf(format string, args ...any) error {
	return corruptf("%s: image section, frame %d: %w", r.f.describe(r.entry), r.frame, fmt.Errorf(format, args...))
}

// readCameraRecord reads one record header at the cursor and skips its data.
func readCameraRecord(c *cursor) (CameraRecord, error) {
	rec := CameraRecord{Offset: c.pos}
	n, err := c.u16()
	if err != nil {
		return rec, fmt.Errorf("name length %w", err)
	}
	name, err := c.next(int(n))
	if err != nil {
		return rec, fmt.Errorf("name (%d bytes) %w", n, err)
	}
	rec.Name = string(name)
	b, err := c.next(cameraFixed - 2)
	if err != nil {
		return rec, fmt.Errorf("%q: width, height, channels, format and data_len %w", rec.Name, err)
	}
	rec.Width, rec.Height = le.Uint32(b), le.Uint32(b[4:])
	rec.Channels, rec.Format = b[8], b[9]
	rec.DataLen = le.Uint32(b[10:])
	rec.DataOffset = c.pos
	if err := c.skip(uint64(rec.DataLen)); err != nil {
		return rec, fmt.Errorf("%q: %d bytes of image data %w", rec.Name, rec.DataLen, err)
	}
	return rec, nil
}

// CheckFraming walks episode i's image section and fails (wrapping
// ErrCorrupt) unless it holds exactly num_frames frames. A file of the
// reference's pre-format-byte layout, which carries the same version 0.1,
// fails here: its records are one byte shorter, so the walk goes astray.
func (f *File) CheckFraming(i int) error {
	fr := f.Frames(i)
	for range f.entries[i].NumFrames {
		if _, err := fr.Next(); err != nil {
			return err
		}
	}
	if rest := fr.Rest(); rest != 0 {
		return corruptf("%s: image section has %d bytes after its %d frames", f.describe(i), rest, f.entries[i].NumFrames)
	}
	return nil
}

// CameraAt reads the camera record at an absolute offset inside episode
// i's image section (an offset a FrameReader reported). It fails unless
// the whole record, data included, lies inside that section.
func (f *File) CameraAt(i int, offset int64) (CameraRecord, error) {
	s := f.entries[i].Images
	if offset < int64(s.Offset) || offset >= int64(s.end()) {
		return CameraRecord{}, corruptf("%s: offset %d is outside the image section [%d, %d)", f.describe(i), offset, s.Offset, s.end())
	}
	c := newCursor(f.r, Section{uint64(offset), s.end() - uint64(offset)}, 0)
	rec, err := readCameraRecord(c)
	if err != nil {
		return CameraRecord{}, corruptf("%s: camera record at offset %d: %w", f.describe(i), offset, err)
	}
	return rec, nil
}

// ReadData reads up to n bytes of a record's data (all of it when n is
// larger). The record comes from this file, so its data lies inside it.
func (f *File) ReadData(rec CameraRecord, n int) ([]byte, error) {
	b := make([]byte, min(int64(n), int64(rec.DataLen)))
	if err := readFull(f.r, b, rec.DataOffset); err != nil {
		return nil, err
	}
	return b, nil
}
