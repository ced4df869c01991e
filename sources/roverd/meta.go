package roverd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// ErrMeta is wrapped by every error about a meta.json file's contents.
var ErrMeta = errors.New("roverd: bad meta.json")

func metaErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMeta, fmt.Sprintf(format, args...))
}

// Channel formats, as meta.json names them.
const (
	FormatRaw   = "raw"   // the records back to back in one file
	FormatLZMA  = "lzma"  // a raw file compressed as one .xz stream
	FormatLZMAF = "lzmaf" // one .xz stream per record, with <name>_i: N+1 u64 offsets
	FormatMJPG  = "mjpg"  // an MJPEG AVI file, one JPEG per record
	FormatNPZ   = "npz"   // a folder of 000000.npz, ... each holding the record as "data"
	FormatJPG   = "jpg"   // a folder of 000000.jpg, ...
)

var knownFormats = []string{FormatRaw, FormatLZMA, FormatLZMAF, FormatMJPG, FormatNPZ, FormatJPG}

// Limits of meta.json parsing.
const (
	MaxMetaBytes   = 1 << 20   // a meta.json is a few hundred bytes
	maxShapeDims   = 16        // numpy allows 64; roverd channels have at most 4
	MaxRecordBytes = 512 << 20 // one record of one channel (a 4K RGB frame is 25 MiB)
)

// TimestampChannel is the channel every sensor has: raw f8, shape [],
// epoch seconds.
const TimestampChannel = "ts"

// ChannelMeta is one meta.json entry as written. Type stays a string so
// that a type no reader knows fails only the channels someone reads.
type ChannelMeta struct {
	Name   string
	Format string
	Type   string
	Shape  []int
	Desc   string // "desc", or "description"
}

// Meta is a parsed meta.json: the sensor's channels by name.
type Meta struct {
	Channels map[string]ChannelMeta
}

// Names lists the channel names in byte order.
func (m *Meta) Names() []string {
	names := make([]string, 0, len(m.Channels))
	for n := range m.Channels {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParseMeta reads a meta.json: a JSON object mapping channel names to
// {"format", "type", "shape", "desc" or "description", optional "args"}.
// Format and type must be strings and shape an array of non-negative
// integers; other keys are allowed (the format is meant to be extended).
// Channel names must be plain file names other than meta.json.
func ParseMeta(data []byte) (*Meta, error) {
	if len(data) > MaxMetaBytes {
		return nil, metaErrorf("%d bytes, more than the limit of %d", len(data), MaxMetaBytes)
	}
	var raw map[string]json.RawMessage
	if err := strictUnmarshal(data, &raw); err != nil {
		return nil, metaErrorf("not a JSON object: %v", err)
	}
	if raw == nil {
		return nil, metaErrorf("not a JSON object: null")
	}
	m := &Meta{Channels: make(map[string]ChannelMeta, len(raw))}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names) // the first problem reported is the same on every run
	for _, name := range names {
		if err := checkChannelName(name); err != nil {
			return nil, err
		}
		c, err := parseChannelMeta(name, raw[name])
		if err != nil {
			return nil, err
		}
		m.Channels[name] = c
	}
	return m, nil
}

// parseChannelMeta reads one channel entry: an object whose format, type,
// desc and description are strings and shape an array of integers.
func parseChannelMeta(name string, body json.RawMessage) (ChannelMeta, error) {
	var fields map[string]json.RawMessage
	if err := strictUnmarshal(body, &fields); err != nil || fields == nil {
		return ChannelMeta{}, metaErrorf("channel %q: not a JSON object", name)
	}
	c := ChannelMeta{Name: name}
	str := func(key string, dst *string, required bool) error {
		raw, ok := fields[key]
		if !ok {
			if required {
				return metaErrorf("channel %q: %q is required", name, key)
			}
			return nil
		}
		if err := strictUnmarshal(raw, dst); err != nil || (len(raw) > 0 && raw[0] != '"') {
			return metaErrorf("channel %q: %q must be a string", name, key)
		}
		return nil
	}
	if err := str("format", &c.Format, true); err != nil {
		return ChannelMeta{}, err
	}
	if err := str("type", &c.Type, true); err != nil {
		return ChannelMeta{}, err
	}
	if err := str("description", &c.Desc, false); err != nil {
		return ChannelMeta{}, err
	}
	if err := str("desc", &c.Desc, false); err != nil { // "desc" wins when both are given
		return ChannelMeta{}, err
	}
	raw, ok := fields["shape"]
	if !ok {
		return ChannelMeta{}, metaErrorf("channel %q: %q is required", name, "shape")
	}
	var dims []any
	if err := strictUnmarshal(raw, &dims); err != nil || dims == nil {
		return ChannelMeta{}, metaErrorf("channel %q: \"shape\" must be an array of integers", name)
	}
	shape, err := parseShape(dims)
	if err != nil {
		return ChannelMeta{}, metaErrorf("channel %q: %v", name, err)
	}
	c.Shape = shape
	return c, nil
}

// strictUnmarshal decodes exactly one JSON value; numbers stay json.Number.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

func checkChannelName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return metaErrorf("channel name %q is not a file name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return metaErrorf("channel name %q is not a file name", name)
	case name == "meta.json":
		return metaErrorf(`"meta.json" cannot be a channel name`)
	}
	return nil
}

func parseShape(dims []any) ([]int, error) {
	if len(dims) > maxShapeDims {
		return nil, fmt.Errorf("shape has %d dimensions, more than %d", len(dims), maxShapeDims)
	}
	shape := make([]int, len(dims))
	for i, d := range dims {
		n, ok := d.(json.Number)
		v, err := n.Int64()
		if !ok || err != nil || v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("shape[%d] = %v: not an integer in [0, 2^31)", i, d)
		}
		shape[i] = int(v)
	}
	return shape, nil
}

// Channel is a meta.json entry resolved for reading: known format, known
// type, and the size of one record.
type Channel struct {
	Name        string
	Format      string
	DType       DType
	Shape       []int
	RecordBytes int64 // bytes of one record: product(shape) x type size
}

// Elements is the number of values in one record.
func (c Channel) Elements() int64 { return c.RecordBytes / int64(c.DType.Size) }

// Channel resolves the named channel: the name must be declared, the
// format known and the type a number type; a record must fit
// MaxRecordBytes.
func (m *Meta) Channel(name string) (Channel, error) {
	cm, ok := m.Channels[name]
	if !ok {
		return Channel{}, fmt.Errorf("%w: channel %q is not declared (declared: %s)", ErrNoChannel, name, strings.Join(m.Names(), ", "))
	}
	if !slices.Contains(knownFormats, cm.Format) {
		return Channel{}, metaErrorf("channel %q: unknown format %q (known: %s)", name, cm.Format, strings.Join(knownFormats, ", "))
	}
	dt, err := ParseDType(cm.Type)
	if err != nil {
		return Channel{}, fmt.Errorf("channel %q: %w", name, err)
	}
	n := int64(dt.Size)
	for _, d := range cm.Shape {
		if d != 0 && n > MaxRecordBytes/int64(d) {
			return Channel{}, metaErrorf("channel %q: a record of shape %v %s is more than %d bytes", name, cm.Shape, cm.Type, MaxRecordBytes)
		}
		n *= int64(d)
	}
	if n == 0 {
		return Channel{}, metaErrorf("channel %q: shape %v has no elements", name, cm.Shape)
	}
	return Channel{Name: name, Format: cm.Format, DType: dt, Shape: slices.Clone(cm.Shape), RecordBytes: n}, nil
}

// ErrNoChannel is wrapped when a channel someone reads is not declared.
var ErrNoChannel = errors.New("roverd: no such channel")

// timestamps resolves the sensor's ts channel, which must be raw f8 [].
func (m *Meta) timestamps() (Channel, error) {
	c, err := m.Channel(TimestampChannel)
	if err != nil {
		return Channel{}, err
	}
	if c.Format != FormatRaw || c.DType != (DType{'f', 8}) || len(c.Shape) != 0 {
		return Channel{}, metaErrorf("channel ts: format %s, type %s, shape %v; want raw, f8, []", c.Format, c.DType, c.Shape)
	}
	return c, nil
}
