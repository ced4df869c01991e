package wshard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"slices"

	"warehouse-etl/sources/wshard/container"
	"warehouse-etl/validate"
)

// Problem is something wrong with an episode file that becomes a reason
// code on its samples rather than a failed build. Err names the file and,
// when one is at fault, the block.
type Problem struct {
	Reason validate.Reason
	Err    error
}

func (p *Problem) Error() string { return p.Err.Error() }
func (p *Problem) Unwrap() error { return p.Err }

// problemf builds a Problem whose message names the file.
func problemf(reason validate.Reason, file, format string, args ...any) *Problem {
	return &Problem{Reason: reason, Err: fmt.Errorf("wshard: %s: %s", file, fmt.Sprintf(format, args...))}
}

// blockProblem turns a container error into a Problem with its reason:
// checksum and name-hash mismatches are checksum_mismatch, failed or
// refused decompression decompress_error, any other structural defect
// decode_error (the file exists but cannot be decoded). Errors that are not
// the container's (the operating system refusing to read) are returned as
// they are: they fail the scan instead of marking samples.
func blockProblem(err error) error {
	var ce *container.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, container.ErrChecksum):
		return &Problem{Reason: validate.ReasonChecksumMismatch, Err: err}
	case errors.Is(err, container.ErrDecompress):
		return &Problem{Reason: validate.ReasonDecompressError, Err: err}
	case errors.Is(err, container.ErrCorrupt), errors.Is(err, container.ErrTooLarge):
		return &Problem{Reason: validate.ReasonDecodeError, Err: err}
	}
	return err // an I/O error wrapped with the file and block
}

// Channel is one entry of meta/channels: a block of T time steps, each an
// array of Shape elements of DType.
type Channel struct {
	ID       string
	Block    string // the block holding the data, e.g. "signal/joint_pos"
	DType    DType
	Shape    []int // per time step; [] for a scalar
	Modality string

	err error // a declaration this package cannot use (unknown dtype, bad shape); reported only if the channel is used
}

// Elements is the number of values per time step.
func (c Channel) Elements() int {
	n := 1
	for _, d := range c.Shape {
		n *= d
	}
	return n
}

// maxElements bounds a channel's values per time step: far above any
// camera frame (16384 x 16384 x 4), and small enough that the product of a
// checked shape never overflows.
const maxElements = 1 << 30

// channelDef is a meta/channels entry as JSON spells it, in either form.
type channelDef struct {
	ID          string          `json:"id"`
	DType       string          `json:"dtype"`
	Shape       json.RawMessage `json:"shape"`
	Modality    string          `json:"modality"`
	SignalBlock string          `json:"signal_block"`
}

// toChannel checks a definition; block is its block name.
func (d channelDef) toChannel(block string) Channel {
	c := Channel{ID: d.ID, Block: block, Modality: d.Modality}
	dt, err := ParseDType(d.DType)
	if err != nil {
		c.err = err
		return c
	}
	c.DType = dt
	if len(d.Shape) != 0 && string(d.Shape) != "null" {
		if err := json.Unmarshal(d.Shape, &c.Shape); err != nil {
			c.err = fmt.Errorf("shape %s: not a list of integers", d.Shape)
			return c
		}
	}
	n := 1
	for _, v := range c.Shape {
		if v < 0 || v > maxElements || n*v > maxElements {
			c.err = fmt.Errorf("shape %v: dimensions must be >= 0 with at most %d elements", c.Shape, maxElements)
			return c
		}
		n *= v
	}
	if c.Shape == nil {
		c.Shape = []int{}
	}
	return c
}

// parseChannels reads meta/channels in either form: the current
// {"channels": [{"id", "dtype", "shape", "signal_block", "modality"}, ...]}
// (signal_block defaults to "signal/<id>") or the older map from block name
// to {"dtype", "shape"}. A definition this package cannot use does not fail
// the file: it fails only a lookup that picks it.
func parseChannels(raw []byte) ([]Channel, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("meta/channels: %v", err)
	}
	if list, ok := top["channels"]; ok && bytes.HasPrefix(bytes.TrimSpace(list), []byte("[")) {
		var defs []channelDef
		if err := json.Unmarshal(list, &defs); err != nil {
			return nil, fmt.Errorf("meta/channels: %v", err)
		}
		out := make([]Channel, len(defs))
		for i, d := range defs {
			block := d.SignalBlock
			if block == "" {
				block = "signal/" + d.ID
			}
			out[i] = d.toChannel(block)
		}
		return out, nil
	}
	// The map form has no order of its own: sort by block name so that
	// "the first rgb channel" means the same thing on every run.
	names := make([]string, 0, len(top))
	for name := range top {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Channel, 0, len(names))
	for _, name := range names {
		var d channelDef
		if err := json.Unmarshal(top[name], &d); err != nil {
			return nil, fmt.Errorf("meta/channels: %q: %v", name, err)
		}
		if d.ID == "" {
			d.ID = pathRemainder(name)
		}
		out = append(out, d.toChannel(name))
	}
	return out, nil
}

// pathRemainder drops a block name's lane: "signal/joint_pos" -> "joint_pos".
func pathRemainder(block string) string {
	for i := range len(block) {
		if block[i] == '/' {
			return block[i+1:]
		}
	}
	return block
}

// Timebase types.
const (
	TimebaseTicks        = "ticks"
	TimebaseTimestampsNs = "timestamps_ns"
)

// Timebase is the episode's time axis: fixed-rate ticks (step t is t/TickHz
// seconds; TickHz 0 when the file does not say) or per-step wall-clock
// nanoseconds in the block time/timestamps_ns.
type Timebase struct {
	Type   string
	TickHz float64
}

type timebaseJSON struct {
	Type   *string  `json:"type"`
	TickHz *float64 `json:"tick_hz"`
	DtNs   *float64 `json:"dt_ns"`
}

// hz is the tick rate the timebase states, 0 when none.
func (t *timebaseJSON) hz() (float64, error) {
	if t == nil {
		return 0, nil
	}
	for _, v := range []struct {
		name string
		v    *float64
		hz   func(float64) float64
	}{
		{"tick_hz", t.TickHz, func(x float64) float64 { return x }},
		{"dt_ns", t.DtNs, func(x float64) float64 { return 1e9 / x }},
	} {
		if v.v == nil {
			continue
		}
		if !(*v.v > 0) || math.IsInf(*v.v, 0) {
			return 0, fmt.Errorf("timebase %s %v: must be finite and > 0", v.name, *v.v)
		}
		return v.hz(*v.v), nil
	}
	return 0, nil
}

// Meta is what meta/wshard and meta/episode say about an episode file.
type Meta struct {
	EpisodeID   string
	EnvID       string
	Length      int   // length_T: time steps in this file
	Start       int64 // global time step of the file's first step (timestep_range[0], else 0)
	RangeGiven  bool  // timestep_range states Start (absent, or [0, 0] for more than one step, does not)
	ChunkIndex  *int
	TotalChunks *int
	Timebase    Timebase
}

type episodeJSON struct {
	EpisodeID     *string       `json:"episode_id"`
	ID            *string       `json:"id"`
	EnvID         *string       `json:"env_id"`
	LengthT       *int64        `json:"length_T"`
	LegacyLengthT *int64        `json:"length_t"`
	TimestepRange []int64       `json:"timestep_range"`
	ChunkIndex    *int          `json:"chunk_index"`
	TotalChunks   *int          `json:"total_chunks"`
	Timebase      *timebaseJSON `json:"timebase"`
}

type wshardJSON struct {
	Timebase *timebaseJSON `json:"timebase"`
}

// maxSteps bounds length_T before anything is sized from it; the blocks
// that must hold T steps bound it further.
const maxSteps = 1 << 31

// parseMeta reads meta/episode (required) and meta/wshard (optional; nil
// when absent). Field names follow the reference reader: episode_id or the
// older id, length_T or the older length_t; the timebase of meta/wshard
// wins over meta/episode's, and a tick rate may be given as tick_hz or
// dt_ns.
//
// timestep_range is written half-open ([0, T] for a whole episode) by the
// reference episode writers and inclusive ([start, start+T-1]) by their
// chunk writers; either reading is accepted when it agrees with length_T,
// and so is [0, 0] (what the Go writer leaves for an unchunked episode).
func parseMeta(episode, wshard []byte) (Meta, error) {
	var e episodeJSON
	if err := json.Unmarshal(episode, &e); err != nil {
		return Meta{}, fmt.Errorf("meta/episode: %v", err)
	}
	var m Meta
	for _, s := range []*string{e.EpisodeID, e.ID} {
		if s != nil && m.EpisodeID == "" {
			m.EpisodeID = *s
		}
	}
	if e.EnvID != nil {
		m.EnvID = *e.EnvID
	}
	length := e.LengthT
	if length == nil {
		length = e.LegacyLengthT
	}
	if length == nil {
		return Meta{}, errors.New("meta/episode: no length_T")
	}
	if *length < 0 || *length > maxSteps {
		return Meta{}, fmt.Errorf("meta/episode: length_T %d out of range", *length)
	}
	m.Length = int(*length)
	if r := e.TimestepRange; r != nil {
		if len(r) != 2 || r[0] < 0 || r[0] > 1<<53 {
			return Meta{}, fmt.Errorf("meta/episode: timestep_range %v: want [start, end] with start >= 0", r)
		}
		span := r[1] - r[0]
		if !(span == *length || span+1 == *length || (r[0] == 0 && r[1] == 0)) {
			return Meta{}, &rangeError{fmt.Errorf("meta/episode: timestep_range %v disagrees with length_T %d", r, *length)}
		}
		m.Start = r[0]
		m.RangeGiven = !(r[0] == 0 && r[1] == 0 && *length > 1)
	}
	m.ChunkIndex, m.TotalChunks = e.ChunkIndex, e.TotalChunks

	var w wshardJSON
	if wshard != nil {
		if err := json.Unmarshal(wshard, &w); err != nil {
			return Meta{}, fmt.Errorf("meta/wshard: %v", err)
		}
	}
	m.Timebase.Type = TimebaseTicks
	for _, tb := range []*timebaseJSON{e.Timebase, w.Timebase} { // later wins
		if tb != nil && tb.Type != nil {
			m.Timebase.Type = *tb.Type
		}
	}
	if e.Timebase != nil && w.Timebase != nil && e.Timebase.Type != nil && w.Timebase.Type != nil && *e.Timebase.Type != *w.Timebase.Type {
		return Meta{}, fmt.Errorf("meta/wshard timebase %q disagrees with meta/episode timebase %q", *w.Timebase.Type, *e.Timebase.Type)
	}
	if m.Timebase.Type != TimebaseTicks && m.Timebase.Type != TimebaseTimestampsNs {
		return Meta{}, fmt.Errorf("timebase type %q: want ticks or timestamps_ns", m.Timebase.Type)
	}
	for _, tb := range []*timebaseJSON{w.Timebase, e.Timebase} { // first stated rate wins
		hz, err := tb.hz()
		if err != nil {
			return Meta{}, err
		}
		if hz > 0 && m.Timebase.TickHz == 0 {
			m.Timebase.TickHz = hz
		}
	}
	return m, nil
}

// rangeError marks a timestep_range that disagrees with length_T: the
// file's steps are there, but where they sit in the episode is unknown.
type rangeError struct{ error }

func (e *rangeError) Unwrap() error { return e.error }

// Episode is one opened WShard file (a whole episode or one chunk of one):
// its container, metadata and channel table. Blocks are read on demand.
type Episode struct {
	Name     string // the name errors use (the path relative to the dataset root)
	Meta     Meta
	Channels []Channel

	file   *container.Reader
	closer io.Closer // nil for an episode read from memory
}

// Conventional blocks that need no meta/channels entry.
var conventionalChannels = []Channel{
	{ID: "reward", Block: "reward", DType: F32, Shape: []int{}},
	{ID: "done", Block: "done", DType: U8, Shape: []int{}},
	{ID: "timestamps_ns", Block: "time/timestamps_ns", DType: I64, Shape: []int{}},
	{ID: "ticks", Block: "time/ticks", DType: I32, Shape: []int{}},
}

// OpenEpisode opens the WShard file at path; name is how errors and
// problems refer to it. A file that is not a readable episode is a
// *Problem carrying its reason; an operating-system failure is returned as
// is. Opening reads the header, index, string table and the meta/ blocks.
func OpenEpisode(path, name string, limits container.Limits) (*Episode, error) {
	f, err := container.Open(path, name, limits)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, problemf(validate.ReasonMissingFile, name, "no such file")
		}
		return nil, blockProblem(err)
	}
	ep, err := NewEpisode(f.Reader)
	if err != nil {
		f.Close()
		return nil, err
	}
	ep.closer = f
	return ep, nil
}

// NewEpisode interprets an open container as an episode, named as the
// container names itself in errors.
func NewEpisode(r *container.Reader) (*Episode, error) {
	ep := &Episode{Name: r.File(), file: r}
	if err := ep.load(); err != nil {
		return nil, err
	}
	return ep, nil
}

// Close releases the file.
func (e *Episode) Close() error {
	if e.closer == nil {
		return nil
	}
	return e.closer.Close()
}

// Container is the episode's container reader.
func (e *Episode) Container() *container.Reader { return e.file }

func (e *Episode) load() error {
	if role := e.file.Header().Role; role != container.RoleWShard {
		return problemf(validate.ReasonDecodeError, e.Name, "container role 0x%02x is not an episode (0x05)", uint8(role))
	}
	episode, err := e.readMeta("meta/episode", true)
	if err != nil {
		return err
	}
	wshard, err := e.readMeta("meta/wshard", false)
	if err != nil {
		return err
	}
	m, err := parseMeta(episode, wshard)
	if err != nil {
		var re *rangeError
		if errors.As(err, &re) {
			return problemf(validate.ReasonLengthMismatch, e.Name, "%v", err)
		}
		return problemf(validate.ReasonBadSchema, e.Name, "%v", err)
	}
	e.Meta = m
	channels, err := e.readMeta("meta/channels", false)
	if err != nil {
		return err
	}
	if channels != nil {
		if e.Channels, err = parseChannels(channels); err != nil {
			return problemf(validate.ReasonBadSchema, e.Name, "%v", err)
		}
	}
	return nil
}

// maxMetaBytes bounds a JSON metadata block: real ones are a few hundred
// bytes.
const maxMetaBytes = 16 << 20

// readMeta reads a JSON block; nil when it is absent and not required.
func (e *Episode) readMeta(name string, required bool) ([]byte, error) {
	entry, ok := e.file.Lookup(name)
	if !ok {
		if required {
			return nil, problemf(validate.ReasonMissingBlock, e.Name, "no %s block", name)
		}
		return nil, nil
	}
	if entry.OrigSize > maxMetaBytes {
		return nil, problemf(validate.ReasonBadSchema, e.Name, "%s is %d bytes, more than the %d a metadata block may have", name, entry.OrigSize, maxMetaBytes)
	}
	b, err := e.file.ReadBlock(entry)
	if err != nil {
		return nil, blockProblem(err)
	}
	return b, nil
}

// Channel finds a channel by block name, then by channel id, then among the
// conventional blocks (reward f32, done u8, time/timestamps_ns i64,
// time/ticks i32) that need no declaration. ok is false when nothing
// declares it.
func (e *Episode) Channel(name string) (Channel, bool) {
	for _, match := range []func(Channel) bool{
		func(c Channel) bool { return c.Block == name },
		func(c Channel) bool { return c.ID == name },
	} {
		for _, c := range e.Channels {
			if match(c) {
				return c, true
			}
		}
	}
	for _, c := range conventionalChannels {
		if c.Block == name {
			return c, true
		}
	}
	return Channel{}, false
}

// block finds a channel's block and checks that it holds Length steps of
// the declared dtype and shape.
func (e *Episode) block(c Channel) (container.Entry, error) {
	if c.err != nil {
		return container.Entry{}, problemf(validate.ReasonBadSchema, e.Name, "channel %q: %v", c.Block, c.err)
	}
	entry, ok := e.file.Lookup(c.Block)
	if !ok {
		return container.Entry{}, problemf(validate.ReasonMissingBlock, e.Name, "channel %q is declared but block %q is absent", c.ID, c.Block)
	}
	hi, want := bits.Mul64(uint64(c.Elements())*uint64(c.DType.Size()), uint64(e.Meta.Length))
	if hi != 0 || entry.OrigSize != want {
		return container.Entry{}, problemf(validate.ReasonBlockSizeMismatch, e.Name,
			"block %q is %d bytes, length_T %d x %s %v is %d", c.Block, entry.OrigSize, e.Meta.Length, c.DType, c.Shape, want)
	}
	return entry, nil
}

// Float32s reads channel c whole, checked, as Length x Elements float32
// values (see DType.Float32s for the conversion). The float32 copy is
// bounded by Limits.MaxBlockBytes like the block itself.
func (e *Episode) Float32s(c Channel) ([]float32, error) {
	entry, err := e.block(c)
	if err != nil {
		return nil, err
	}
	if err := e.checkFloat32Bytes(c.Block, int64(c.Elements())); err != nil {
		return nil, err
	}
	raw, err := e.file.ReadBlock(entry)
	if err != nil {
		return nil, blockProblem(err)
	}
	out := make([]float32, e.Meta.Length*c.Elements())
	c.DType.Float32s(out, raw)
	return out, nil
}

// checkFloat32Bytes refuses to hold Length x perStep float32 values when
// they exceed the block limit: a u8 block within the limit still takes
// four times its size as float32.
func (e *Episode) checkFloat32Bytes(what string, perStep int64) error {
	limit := e.file.Limits().MaxBlockBytes
	if perStep > 0 && int64(e.Meta.Length) > limit/4/perStep {
		return problemf(validate.ReasonDecodeError, e.Name, "%s: %d steps of %d float32 values exceed the limit of %d bytes", what, e.Meta.Length, perStep, limit)
	}
	return nil
}

// Timestamps reads time/timestamps_ns: one int64 per step.
func (e *Episode) Timestamps() ([]int64, error) {
	c, _ := e.Channel("time/timestamps_ns")
	entry, err := e.block(c)
	if err != nil {
		return nil, err
	}
	raw, err := e.file.ReadBlock(entry)
	if err != nil {
		return nil, blockProblem(err)
	}
	out := make([]int64, e.Meta.Length)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out, nil
}
