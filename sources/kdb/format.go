// Package kdb reads kinodb episode files (.kdb): robot demonstrations with
// camera frames, proprioceptive state, actions and rewards in one
// little-endian file. The layout follows the reference implementation
// (github.com/Shaswat2001/kinodb, crates/kinodb-core, format 0.1):
//
//	byte 0       ┌──────────────────────────────┐
//	             │ header                        │ 64 bytes
//	byte 64      ├──────────────────────────────┤
//	             │ episode payloads, each:       │
//	             │   meta blob                   │
//	             │   state/action section        │
//	             │   image section               │
//	index_offset ├──────────────────────────────┤
//	             │ index: num_episodes entries   │ 64 bytes each
//	             └──────────────────────────────┘
//
// The writer reserves the header, appends every episode, appends the index
// and then seeks back to fill in the header, so a file whose writer died
// has an all-zero header (bad magic) rather than a plausible one.
//
//	header
//	  magic              <4 byte>  "KINO"
//	  version_major      <uint16>  0; a newer major is refused
//	  version_minor      <uint16>  1; a newer minor is read with a warning
//	  num_episodes       <uint64>
//	  num_frames         <uint64>  sum of the entries' num_frames
//	  index_offset       <uint64>
//	  index_length       <uint64>  num_episodes x 64
//	  created_timestamp  <uint64>  Unix seconds
//	  reserved           <16 byte> zero
//
//	index entry
//	  episode_id         <uint64>  assigned by the writer; not necessarily in file order
//	  num_frames         <uint32>
//	  action_dim         <uint16>
//	  state_dim          <uint16>
//	  actions_offset     <uint64>  actions_length <uint64>   state/action section
//	  images_offset      <uint64>  images_length  <uint64>   image section
//	  meta_offset        <uint64>  meta_length    <uint64>   meta blob
//
//	meta blob
//	  embodiment_len <uint16>  embodiment <embodiment_len byte, UTF-8>
//	  task_len       <uint16>  task       <task_len byte, UTF-8>   (language_instruction)
//	  fps            <float32>
//	  success        <uint8>   0 unknown, 1 false, 2 true
//	  reward_present <uint8>   0 or 1
//	  total_reward   <float32> only when reward_present = 1
//
//	state/action section: num_frames records of
//	  state <state_dim float32>  action <action_dim float32>  reward <float32>  is_terminal <uint8>
//
//	image section: num_frames records of
//	  num_cameras <uint16>, then per camera:
//	    name_len <uint16>  name <name_len byte>  width <uint32>  height <uint32>
//	    channels <uint8>   format <uint8>        data_len <uint32>  data <data_len byte>
//	  format 0 is raw interleaved HWC u8; 1 is compressed, JPEG or PNG by its
//	  magic bytes.
//
// Every offset and length read from the file is checked against the file
// size before it is used, and nothing is allocated from a size the file
// states before that size has been bounded by the bytes actually present.
package kdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Magic starts every .kdb file.
const Magic = "KINO"

// The format version this package implements.
const (
	VersionMajor = 0
	VersionMinor = 1
)

// Fixed sizes of the format.
const (
	HeaderSize     = 64
	IndexEntrySize = 64
)

// Header field offsets.
const (
	offMagic        = 0
	offVersionMajor = 4
	offVersionMinor = 6
	offNumEpisodes  = 8
	offNumFrames    = 16
	offIndexOffset  = 24
	offIndexLength  = 32
	offCreated      = 40
	// 48..64 reserved
)

// Index entry field offsets.
const (
	entEpisodeID     = 0
	entNumFrames     = 8
	entActionDim     = 12
	entStateDim      = 14
	entActionsOffset = 16
	entActionsLength = 24
	entImagesOffset  = 32
	entImagesLength  = 40
	entMetaOffset    = 48
	entMetaLength    = 56
)

// Sizes of the variable-length records.
const (
	// stepTrailer is the reward float32 and is_terminal byte after a
	// frame's state and action.
	stepTrailer = 4 + 1
	// frameHeader is num_cameras.
	frameHeader = 2
	// cameraFixed is a camera record without its name and data: name_len,
	// width, height, channels, format, data_len.
	cameraFixed = 2 + 4 + 4 + 1 + 1 + 4
	// maxMetaBytes is the longest meta blob this version can parse: two
	// strings of at most 65535 bytes and the fixed fields. A longer blob
	// carries fields of a newer minor version, which are not read.
	maxMetaBytes = 2 + math.MaxUint16 + 2 + math.MaxUint16 + 4 + 1 + 1 + 4
)

// Image formats of a camera record.
const (
	FormatRaw        = 0 // interleaved HWC u8
	FormatCompressed = 1 // JPEG or PNG, told apart by magic bytes
)

var le = binary.LittleEndian

// ErrCorrupt marks every error saying a file's bytes are not a valid .kdb
// file or episode. Test for it with errors.Is; the message says what is
// wrong.
var ErrCorrupt = errors.New("kdb: corrupt file")

// ErrVersion is wrapped when a file's major version is newer than this
// reader's.
var ErrVersion = errors.New("kdb: unsupported version")

// corruptf returns an error wrapping ErrCorrupt (and any %w argument),
// formatted as "kdb: corrupt file: <message>".
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Header is the file header.
type Header struct {
	VersionMajor, VersionMinor uint16
	NumEpisodes                uint64
	NumFrames                  uint64
	IndexOffset, IndexLength   uint64
	CreatedUnix                uint64 // created_timestamp, Unix seconds
}

// NewerMinor reports whether the file is of a minor version this reader
// does not know; it is read as 0.1, ignoring what the newer version added
// behind the index's offsets and lengths.
func (h Header) NewerMinor() bool {
	return h.VersionMajor == VersionMajor && h.VersionMinor > VersionMinor
}

// ParseHeader checks and decodes the first 64 bytes of a file: size, then
// magic, then version, each with its own error.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, corruptf("%d bytes, shorter than the %d-byte header", len(b), HeaderSize)
	}
	if got := string(b[offMagic : offMagic+4]); got != Magic {
		return Header{}, corruptf("bad magic %q, want %q", got, Magic)
	}
	h := Header{
		VersionMajor: le.Uint16(b[offVersionMajor:]),
		VersionMinor: le.Uint16(b[offVersionMinor:]),
		NumEpisodes:  le.Uint64(b[offNumEpisodes:]),
		NumFrames:    le.Uint64(b[offNumFrames:]),
		IndexOffset:  le.Uint64(b[offIndexOffset:]),
		IndexLength:  le.Uint64(b[offIndexLength:]),
		CreatedUnix:  le.Uint64(b[offCreated:]),
	}
	if h.VersionMajor > VersionMajor {
		return Header{}, fmt.Errorf("%w: file version %d.%d, this reader supports %d.%d (major %d only)",
			ErrVersion, h.VersionMajor, h.VersionMinor, VersionMajor, VersionMinor, VersionMajor)
	}
	return h, nil
}

// Section is a byte range of the file named by an index entry.
type Section struct {
	Offset, Length uint64
}

// end is Offset+Length; callers check bounds first so it cannot overflow.
func (s Section) end() uint64 { return s.Offset + s.Length }

// IndexEntry describes one episode.
type IndexEntry struct {
	EpisodeID uint64
	NumFrames uint32
	ActionDim uint16
	StateDim  uint16
	Actions   Section // state/action section
	Images    Section // image section
	Meta      Section // meta blob
}

// StepSize is the byte size of one frame's record in the state/action
// section.
func (e IndexEntry) StepSize() uint64 {
	return 4*(uint64(e.StateDim)+uint64(e.ActionDim)) + stepTrailer
}

// parseIndexEntry decodes one 64-byte entry; b holds at least 64 bytes.
func parseIndexEntry(b []byte) IndexEntry {
	return IndexEntry{
		EpisodeID: le.Uint64(b[entEpisodeID:]),
		NumFrames: le.Uint32(b[entNumFrames:]),
		ActionDim: le.Uint16(b[entActionDim:]),
		StateDim:  le.Uint16(b[entStateDim:]),
		Actions:   Section{le.Uint64(b[entActionsOffset:]), le.Uint64(b[entActionsLength:])},
		Images:    Section{le.Uint64(b[entImagesOffset:]), le.Uint64(b[entImagesLength:])},
		Meta:      Section{le.Uint64(b[entMetaOffset:]), le.Uint64(b[entMetaLength:])},
	}
}

// Success is an episode's outcome as the meta blob records it.
type Success uint8

// Outcomes.
const (
	SuccessUnknown Success = 0
	SuccessFalse   Success = 1
	SuccessTrue    Success = 2
)

func (s Success) String() string {
	switch s {
	case SuccessUnknown:
		return "unknown"
	case SuccessFalse:
		return "false"
	case SuccessTrue:
		return "true"
	}
	return fmt.Sprintf("Success(%d)", uint8(s))
}

// Meta is an episode's metadata blob.
type Meta struct {
	Embodiment     string
	Task           string // language instruction
	FPS            float32
	Success        Success
	HasTotalReward bool
	TotalReward    float32 // valid when HasTotalReward
}

// ParseMeta decodes a meta blob. Bytes after the known fields are allowed:
// the format lets newer minor versions extend the blob behind its length.
func ParseMeta(b []byte) (Meta, error) {
	m, err := parseMeta(b)
	if err != nil {
		return Meta{}, corruptf("%w", err)
	}
	return m, nil
}

// parseMeta is ParseMeta with errors that do not wrap ErrCorrupt yet, so
// callers can put the episode before the blob in the message.
func parseMeta(b []byte) (Meta, error) {
	c := byteReader{b: b}
	var m Meta
	var ok bool
	if m.Embodiment, ok = c.str(); !ok {
		return Meta{}, fmt.Errorf("meta blob: embodiment runs past the blob's %d bytes", len(b))
	}
	if !utf8.ValidString(m.Embodiment) {
		return Meta{}, errors.New("meta blob: embodiment is not UTF-8")
	}
	if m.Task, ok = c.str(); !ok {
		return Meta{}, fmt.Errorf("meta blob: task runs past the blob's %d bytes", len(b))
	}
	if !utf8.ValidString(m.Task) {
		return Meta{}, errors.New("meta blob: task is not UTF-8")
	}
	fixed, ok := c.next(4 + 1 + 1)
	if !ok {
		return Meta{}, fmt.Errorf("meta blob: fps, success and reward_present run past the blob's %d bytes", len(b))
	}
	m.FPS = math.Float32frombits(le.Uint32(fixed))
	m.Success = Success(fixed[4])
	if m.Success > SuccessTrue {
		return Meta{}, fmt.Errorf("meta blob: success byte %d, want 0, 1 or 2", fixed[4])
	}
	switch fixed[5] {
	case 0:
	case 1:
		r, ok := c.next(4)
		if !ok {
			return Meta{}, fmt.Errorf("meta blob: total_reward runs past the blob's %d bytes", len(b))
		}
		m.HasTotalReward, m.TotalReward = true, math.Float32frombits(le.Uint32(r))
	default:
		return Meta{}, fmt.Errorf("meta blob: reward_present byte %d, want 0 or 1", fixed[5])
	}
	return m, nil
}

// byteReader reads little-endian fields from a slice without panicking.
type byteReader struct {
	b   []byte
	pos int
}

func (r *byteReader) next(n int) ([]byte, bool) {
	if n < 0 || n > len(r.b)-r.pos {
		return nil, false
	}
	out := r.b[r.pos : r.pos+n]
	r.pos += n
	return out, true
}

// str reads a u16-length-prefixed string.
func (r *byteReader) str() (string, bool) {
	n, ok := r.next(2)
	if !ok {
		return "", false
	}
	s, ok := r.next(int(le.Uint16(n)))
	return string(s), ok
}
