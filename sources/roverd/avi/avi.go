// Package avi finds the frames of a Motion-JPEG AVI file: the container
// roverd's mjpg channels use (OpenCV's VideoWriter with the MJPG fourcc,
// which writes through FFmpeg's AVI muxer). It reads the headers and the
// index, never the frames themselves; ReadFrame then reads one frame's
// JPEG bytes with a single ReadAt.
//
// # Layout
//
// Every chunk is a four-byte id, a little-endian u32 size and size bytes
// of data, padded to an even length; RIFF and LIST chunks begin their data
// with a four-byte type and hold further chunks.
//
//	RIFF <size u32> 'AVI '
//	  LIST <size> 'hdrl'
//	    avih <56>                     main header (dwWidth at 32, dwHeight at 36)
//	    LIST <size> 'strl'            one per stream, numbered from 0
//	      strh <56>                   fccType at 0 ('vids'), fccHandler at 4 ('MJPG')
//	      strf <40>                   BITMAPINFOHEADER: biWidth at 4, biHeight at 8, biCompression at 16
//	      JUNK | indx | vprp ...      skipped
//	  LIST 'INFO' | JUNK              skipped
//	  LIST <size> 'movi'
//	    '00dc' <size> <JPEG bytes>    one chunk per frame; '##dc' or '##db', ## = video stream number
//	    LIST <size> 'rec ' ...        grouping lists are read through
//	    JUNK | ix00 | '01wb' ...      skipped
//	  idx1 <16 x entries>             ckid, flags, offset, size; offset counts from the 'movi' type
//	                                  (or, from some writers, from the start of the file)
//	RIFF <size> 'AVIX'                OpenDML continuation (files over 1 GiB), each with its movi list
//	  LIST <size> 'movi' ...
//
// # Unfinished files
//
// A writer that is killed before it closes the file (roverd's collector
// crashing mid-recording) leaves the RIFF and movi sizes at the placeholder
// 0xFFFFFFFF, or a file shorter than they say, and no idx1. Such a file is
// Incomplete: its frames are found by walking the movi list up to the end
// of the file, and a frame chunk cut off by the end of the file is dropped
// (PartialFrame). Only a complete file with a single RIFF uses idx1.
//
// Every size is checked against the file size and the enclosing list
// before anything is read or allocated; a structural problem is an error
// wrapping ErrCorrupt, a stream that is not MJPEG wraps ErrUnsupported.
package avi

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

var (
	// ErrCorrupt is wrapped by every error about the file's structure.
	ErrCorrupt = errors.New("avi: corrupt file")
	// ErrUnsupported is wrapped when the file is a valid AVI without a
	// Motion-JPEG video stream.
	ErrUnsupported = errors.New("avi: unsupported")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Chunk ids and list types.
const (
	idRIFF = "RIFF"
	idLIST = "LIST"
	idAVIH = "avih"
	idSTRH = "strh"
	idSTRF = "strf"
	idIDX1 = "idx1"

	typeAVI  = "AVI "
	typeAVIX = "AVIX"
	typeHDRL = "hdrl"
	typeSTRL = "strl"
	typeMOVI = "movi"
	typeREC  = "rec "

	streamVideo = "vids"
	codecMJPG   = "MJPG"
)

// Header sizes and field offsets.
const (
	chunkHeaderSize = 8  // id + size
	listHeaderSize  = 12 // id + size + type
	idx1EntrySize   = 16 // ckid, flags, offset, size
	avihSize        = 56
	avihWidthAt     = 32
	avihHeightAt    = 36
	strhMinSize     = 8 // fccType and fccHandler are all we read
	strhHandlerAt   = 4
	strfMinSize     = 20 // through biCompression
	strfWidthAt     = 4
	strfHeightAt    = 8
	strfCodecAt     = 16

	// unknownSize is the placeholder FFmpeg writes for RIFF and LIST sizes
	// until the file is closed.
	unknownSize = 0xFFFFFFFF
)

// Limits of the reader. A real hdrl is a few KiB; a JPEG frame of a
// 1920x1080 camera is well under a MiB.
const (
	MaxHeaderBytes = 1 << 20  // largest hdrl list read
	MaxFrameBytes  = 64 << 20 // largest frame chunk accepted
)

// Frame locates one frame's JPEG bytes in the file.
type Frame struct {
	Offset int64 // first byte of the frame data, after its 8-byte chunk header
	Size   int64
}

// Index is what ReadIndex learns about a file.
type Index struct {
	Width, Height int    // from the video stream's strf, else avih
	Stream        int    // number of the video stream ('00' in '00dc')
	Codec         string // the stream's fourcc as written, e.g. "MJPG"
	Frames        []Frame
	// UsedIdx1 says the frames came from the idx1 index rather than a walk
	// of the movi lists.
	UsedIdx1 bool
	// Incomplete says the writer did not finish the file: a RIFF or movi
	// size is the 0xFFFFFFFF placeholder or runs past the end of the file.
	Incomplete bool
	// PartialFrame says the file ends inside a frame chunk, which is not
	// in Frames.
	PartialFrame bool
}

// file is the reader state: the bytes and the stream's chunk ids.
type file struct {
	r    io.ReaderAt
	size int64
}

func (f *file) read(off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := f.r.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, corruptf("read %d bytes at offset %d: file ends at %d", n, off, f.size)
		}
		return nil, err
	}
	return buf, nil
}

// chunk is a parsed chunk header.
type chunk struct {
	id    string
	off   int64 // offset of the chunk header
	size  int64 // declared data size
	ltype string
}

// name is how messages refer to the chunk: "movi list", "chunk \"idx1\"".
func (c chunk) name() string {
	if c.ltype != "" {
		return c.ltype + " list"
	}
	return fmt.Sprintf("chunk %q", c.id)
}

func (c chunk) dataEnd() int64 { return c.off + chunkHeaderSize + c.size }

// next is the offset of the chunk after c, with the pad byte.
func (c chunk) next() int64 { return c.dataEnd() + c.size&1 }

// movi is one movi list's data range: from its first chunk to its end.
type movi struct {
	typeAt int64 // offset of the 'movi' type: idx1 offsets count from here
	end    int64
	cut    bool // the file ends before the list does
}

// ReadIndex reads the headers and the frame index of the AVI file in r,
// which is size bytes long.
func ReadIndex(r io.ReaderAt, size int64) (*Index, error) {
	f := &file{r: r, size: size}
	if size < listHeaderSize {
		return nil, corruptf("file is %d bytes, too short for a RIFF header", size)
	}
	head, err := f.read(0, listHeaderSize)
	if err != nil {
		return nil, err
	}
	if string(head[0:4]) != idRIFF || string(head[8:12]) != typeAVI {
		return nil, corruptf("not a RIFF AVI file (starts with %q)", head)
	}
	ix := &Index{}
	riffSize := int64(binary.LittleEndian.Uint32(head[4:8]))
	riffEnd := chunkHeaderSize + riffSize
	if riffSize == unknownSize || riffEnd > size {
		ix.Incomplete = true
		riffEnd = size
	}

	var (
		movis   []movi
		idx1    *chunk
		hdrlSet bool
	)
	for off := int64(listHeaderSize); off < riffEnd; {
		c, ok, err := readChunk(f, off, riffEnd, ix.Incomplete, "RIFF list")
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		over := c.dataEnd() > riffEnd
		isMovi := c.id == idLIST && c.ltype == typeMOVI
		if over && !ix.Incomplete && !isMovi {
			return nil, corruptf("%s at offset %d (size %d) runs past the end of the RIFF list at %d", c.name(), c.off, c.size, riffEnd)
		}
		switch {
		case c.id == idLIST && c.ltype == typeHDRL:
			if over {
				return nil, corruptf("hdrl list at offset %d (size %d) runs past the end of the file (%d bytes)", c.off, c.size, size)
			}
			if hdrlSet {
				return nil, corruptf("second hdrl list at offset %d", c.off)
			}
			if err := parseHDRL(f, c, ix); err != nil {
				return nil, err
			}
			hdrlSet = true
		case isMovi:
			if !hdrlSet {
				return nil, corruptf("movi list at offset %d comes before any hdrl list", c.off)
			}
			m, err := moviOf(c, riffEnd, size, ix)
			if err != nil {
				return nil, err
			}
			movis = append(movis, m)
		case c.id == idIDX1 && !over:
			c := c
			idx1 = &c // a cut-off index is not used: the movi walk finds the frames
		}
		if over {
			break
		}
		off = c.next()
	}
	if !hdrlSet {
		return nil, corruptf("no hdrl list%s", incompleteNote(ix))
	}
	if len(movis) == 0 {
		return nil, corruptf("no movi list%s", incompleteNote(ix))
	}

	// OpenDML continuations: further RIFF 'AVIX' lists, each with a movi
	// list. Anything else after the first RIFF list is ignored.
	extended := false
	for off := riffEnd + riffSize&1; !ix.Incomplete && off+listHeaderSize <= size; {
		h, err := f.read(off, listHeaderSize)
		if err != nil {
			return nil, err
		}
		if string(h[0:4]) != idRIFF || string(h[8:12]) != typeAVIX {
			break
		}
		extended = true
		xSize := int64(binary.LittleEndian.Uint32(h[4:8]))
		xEnd := off + chunkHeaderSize + xSize
		if xSize == unknownSize || xEnd > size {
			ix.Incomplete = true
			xEnd = size
		}
		for p := off + listHeaderSize; p < xEnd; {
			c, ok, err := readChunk(f, p, xEnd, ix.Incomplete, "AVIX list")
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if c.id == idLIST && c.ltype == typeMOVI {
				m, err := moviOf(c, xEnd, size, ix)
				if err != nil {
					return nil, err
				}
				movis = append(movis, m)
			} else if c.dataEnd() > xEnd && !ix.Incomplete {
				return nil, corruptf("chunk %q at offset %d (size %d) runs past the end of the AVIX list at %d", c.id, c.off, c.size, xEnd)
			}
			if c.dataEnd() > xEnd {
				break
			}
			p = c.next()
		}
		off = xEnd + xSize&1
	}

	if idx1 != nil && !extended && !ix.Incomplete {
		if err := framesFromIdx1(f, *idx1, movis[0], ix); err != nil {
			return nil, err
		}
		if len(ix.Frames) > 0 {
			ix.UsedIdx1 = true
			return ix, nil
		}
		// An index without video entries says nothing: walk the movi list.
	}
	for _, m := range movis {
		if err := framesFromMovi(f, m, ix); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// readChunk reads the chunk header at off inside a list ending at end. ok
// is false when fewer than 8 bytes remain: the end of a cut-off list, or
// stray bytes (an error) in a complete one.
func readChunk(f *file, off, end int64, cut bool, where string) (chunk, bool, error) {
	if off+chunkHeaderSize > end {
		if cut {
			return chunk{}, false, nil
		}
		return chunk{}, false, corruptf("%d stray bytes at offset %d at the end of the %s", end-off, off, where)
	}
	h, err := f.read(off, chunkHeaderSize)
	if err != nil {
		return chunk{}, false, err
	}
	c := chunk{id: string(h[0:4]), off: off, size: int64(binary.LittleEndian.Uint32(h[4:8]))}
	if c.id == idLIST || c.id == idRIFF {
		if off+listHeaderSize > end {
			if cut {
				return chunk{}, false, nil
			}
			return chunk{}, false, corruptf("list at offset %d is cut off by the end of the %s at %d", off, where, end)
		}
		if c.size < 4 {
			return chunk{}, false, corruptf("list at offset %d has size %d, too small for its type", off, c.size)
		}
		t, err := f.read(off+chunkHeaderSize, 4)
		if err != nil {
			return chunk{}, false, err
		}
		c.ltype = string(t)
	}
	return c, true, nil
}

// moviOf returns the data range of the movi list c inside a RIFF list that
// ends at listEnd. A movi list that runs past its RIFF list is cut off
// when the file is incomplete, and corrupt otherwise.
func moviOf(c chunk, listEnd, size int64, ix *Index) (movi, error) {
	m := movi{typeAt: c.off + chunkHeaderSize, end: c.dataEnd()}
	if c.size == unknownSize || m.end > listEnd {
		if !ix.Incomplete && c.size != unknownSize {
			return movi{}, corruptf("movi list at offset %d (size %d) runs past the end of the RIFF list at %d", c.off, c.size, listEnd)
		}
		ix.Incomplete = true
		m.end, m.cut = min(listEnd, size), true
	}
	return m, nil
}

func incompleteNote(ix *Index) string {
	if ix.Incomplete {
		return " before the end of the file (the file is incomplete)"
	}
	return ""
}

// parseHDRL finds the first video stream and checks that it is MJPEG.
func parseHDRL(f *file, c chunk, ix *Index) error {
	if c.size > MaxHeaderBytes {
		return corruptf("hdrl list is %d bytes, more than the limit of %d", c.size, MaxHeaderBytes)
	}
	data, err := f.read(c.off+listHeaderSize, c.size-4)
	if err != nil {
		return err
	}
	base := c.off + listHeaderSize
	var avihW, avihH int
	stream, found := 0, false
	err = walk(data, base, "hdrl list", func(id, ltype string, body []byte, at int64) error {
		switch {
		case id == idAVIH:
			if len(body) < avihSize {
				return corruptf("avih at offset %d is %d bytes, want %d", at, len(body), avihSize)
			}
			avihW = int(binary.LittleEndian.Uint32(body[avihWidthAt:]))
			avihH = int(binary.LittleEndian.Uint32(body[avihHeightAt:]))
		case id == idLIST && ltype == typeSTRL:
			if found {
				return nil
			}
			ok, err := parseSTRL(body, at+listHeaderSize, ix)
			if err != nil {
				return err
			}
			if ok {
				ix.Stream, found = stream, true
			}
			stream++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: no video stream in the hdrl list", ErrUnsupported)
	}
	if ix.Stream > 99 {
		return fmt.Errorf("%w: video stream number %d has no two-digit chunk id", ErrUnsupported, ix.Stream)
	}
	if ix.Width == 0 || ix.Height == 0 {
		ix.Width, ix.Height = avihW, avihH
	}
	return nil
}

// parseSTRL reads one stream list; ok reports a video stream, which must
// be MJPEG.
func parseSTRL(data []byte, base int64, ix *Index) (ok bool, err error) {
	var strh, strf []byte
	err = walk(data, base, "strl list", func(id, _ string, body []byte, _ int64) error {
		switch id {
		case idSTRH:
			strh = body
		case idSTRF:
			strf = body
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if len(strh) < strhMinSize {
		return false, corruptf("stream list at offset %d has no complete strh", base-listHeaderSize)
	}
	if string(strh[0:4]) != streamVideo {
		return false, nil
	}
	handler := string(strh[strhHandlerAt : strhHandlerAt+4])
	codec := handler
	if len(strf) >= strfMinSize {
		codec = string(strf[strfCodecAt : strfCodecAt+4])
		w := int32(binary.LittleEndian.Uint32(strf[strfWidthAt:]))
		h := int32(binary.LittleEndian.Uint32(strf[strfHeightAt:]))
		ix.Width, ix.Height = int(abs32(w)), int(abs32(h)) // negative height: top-down rows
	}
	if !strings.EqualFold(codec, codecMJPG) && !strings.EqualFold(handler, codecMJPG) {
		return false, fmt.Errorf("%w: video stream codec %q, want %s", ErrUnsupported, codec, codecMJPG)
	}
	ix.Codec = codec
	return true, nil
}

func abs32(v int32) int64 {
	if v < 0 {
		return -int64(v)
	}
	return int64(v)
}

// walk calls fn for every chunk in data, a list's contents starting at file
// offset base. Chunks must lie inside the list.
func walk(data []byte, base int64, where string, fn func(id, ltype string, body []byte, at int64) error) error {
	for p := 0; p < len(data); {
		at := base + int64(p)
		if len(data)-p < chunkHeaderSize {
			return corruptf("%d stray bytes at offset %d at the end of the %s", len(data)-p, at, where)
		}
		id := string(data[p : p+4])
		n := int64(binary.LittleEndian.Uint32(data[p+4:]))
		if n > int64(len(data)-p-chunkHeaderSize) {
			return corruptf("chunk %q at offset %d (size %d) runs past the end of the %s at %d", id, at, n, where, base+int64(len(data)))
		}
		body := data[p+chunkHeaderSize : p+chunkHeaderSize+int(n)]
		ltype := ""
		if id == idLIST {
			if n < 4 {
				return corruptf("list at offset %d has size %d, too small for its type", at, n)
			}
			ltype, body = string(body[:4]), body[4:]
		}
		if err := fn(id, ltype, body, at); err != nil {
			return err
		}
		p += chunkHeaderSize + int(n) + int(n&1)
	}
	return nil
}

// frameIDs are the chunk ids of the video stream's frames.
func frameIDs(stream int) (dc, db string) {
	return fmt.Sprintf("%02ddc", stream), fmt.Sprintf("%02ddb", stream)
}

func checkFrameSize(i int, off, size int64) error {
	if size > MaxFrameBytes {
		return corruptf("frame %d at offset %d is %d bytes, more than the limit of %d", i, off, size, MaxFrameBytes)
	}
	return nil
}

// framesFromIdx1 lists the video entries of idx1. The first entry decides
// whether offsets count from the movi type or from the start of the file:
// whichever points at a chunk header with the entry's id and size.
func framesFromIdx1(f *file, c chunk, m movi, ix *Index) error {
	if c.size%idx1EntrySize != 0 {
		return corruptf("idx1 at offset %d has size %d, not a multiple of %d", c.off, c.size, idx1EntrySize)
	}
	dc, db := frameIDs(ix.Stream)
	br := bufio.NewReaderSize(io.NewSectionReader(f.r, c.off+chunkHeaderSize, c.size), int(min(c.size+1, 64<<10)))
	var entry [idx1EntrySize]byte
	base := int64(-1)
	for i := int64(0); i < c.size/idx1EntrySize; i++ {
		if _, err := io.ReadFull(br, entry[:]); err != nil {
			return fmt.Errorf("avi: read idx1: %w", err)
		}
		id := string(entry[0:4])
		if id != dc && id != db {
			continue
		}
		off := int64(binary.LittleEndian.Uint32(entry[8:12]))
		size := int64(binary.LittleEndian.Uint32(entry[12:16]))
		if base < 0 {
			b, err := idx1Base(f, m, id, off, size)
			if err != nil {
				return corruptf("idx1 entry %d (%s at offset %d, size %d): %v", i, id, off, size, err)
			}
			base = b
		}
		at := base + off
		if at < m.typeAt+4 || at+chunkHeaderSize+size > m.end {
			return corruptf("idx1 entry %d: chunk %s at offset %d (size %d) lies outside the movi list [%d, %d)", i, id, at, size, m.typeAt+4, m.end)
		}
		if err := checkFrameSize(len(ix.Frames), at, size); err != nil {
			return err
		}
		ix.Frames = append(ix.Frames, Frame{Offset: at + chunkHeaderSize, Size: size})
	}
	return nil
}

// idx1Base finds the offset base of idx1: relative to the movi type (what
// FFmpeg and the AVI specification write) or absolute.
func idx1Base(f *file, m movi, id string, off, size int64) (int64, error) {
	for _, base := range []int64{m.typeAt, 0} {
		at := base + off
		if at < m.typeAt+4 || at+chunkHeaderSize > m.end {
			continue
		}
		h, err := f.read(at, chunkHeaderSize)
		if err != nil {
			return 0, err
		}
		if string(h[0:4]) == id && int64(binary.LittleEndian.Uint32(h[4:8])) == size {
			return base, nil
		}
	}
	return 0, errors.New("points at no matching chunk in the movi list (neither relative nor absolute)")
}

// framesFromMovi walks one movi list and appends its video chunks.
func framesFromMovi(f *file, m movi, ix *Index) error {
	dc, db := frameIDs(ix.Stream)
	for p := m.typeAt + 4; p < m.end; {
		c, ok, err := readChunk(f, p, m.end, m.cut, "movi list")
		if err != nil {
			return err
		}
		if !ok {
			ix.PartialFrame = true // a chunk header cut off by the end of the file
			return nil
		}
		if c.id == idLIST && c.ltype == typeREC {
			if c.dataEnd() > m.end && !m.cut {
				return corruptf("rec list at offset %d (size %d) runs past the end of the movi list at %d", c.off, c.size, m.end)
			}
			p = c.off + listHeaderSize // read through: its chunks follow
			continue
		}
		video := c.id == dc || c.id == db
		if c.dataEnd() > m.end {
			if !m.cut {
				return corruptf("chunk %q at offset %d (size %d) runs past the end of the movi list at %d", c.id, c.off, c.size, m.end)
			}
			ix.PartialFrame = video
			return nil
		}
		if video {
			if err := checkFrameSize(len(ix.Frames), c.off, c.size); err != nil {
				return err
			}
			ix.Frames = append(ix.Frames, Frame{Offset: c.off + chunkHeaderSize, Size: c.size})
		}
		p = c.next()
	}
	return nil
}

// ReadFrame returns frame i's bytes, checking that the chunk header in
// front of them still names the video stream and the indexed size.
func (ix *Index) ReadFrame(r io.ReaderAt, i int) ([]byte, error) {
	if i < 0 || i >= len(ix.Frames) {
		return nil, fmt.Errorf("avi: frame %d out of range [0, %d)", i, len(ix.Frames))
	}
	fr := ix.Frames[i]
	buf := make([]byte, chunkHeaderSize+fr.Size)
	if _, err := r.ReadAt(buf, fr.Offset-chunkHeaderSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, corruptf("frame %d at offset %d (size %d) runs past the end of the file", i, fr.Offset, fr.Size)
		}
		return nil, err
	}
	dc, db := frameIDs(ix.Stream)
	id, size := string(buf[0:4]), int64(binary.LittleEndian.Uint32(buf[4:8]))
	if (id != dc && id != db) || size != fr.Size {
		return nil, corruptf("frame %d: chunk header at offset %d is %q size %d, want %s size %d", i, fr.Offset-chunkHeaderSize, id, size, dc, fr.Size)
	}
	return buf[chunkHeaderSize:], nil
}
