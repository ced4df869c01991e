package zarr

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// column is one exported array: sample i of the warehouse is element i of
// its first dimension and one inner chunk of its shards.
type column struct {
	name     string
	dataType string
	elemSize int
	shape    []int    // per-sample shape, after the sample dimension
	dims     []string // names of the per-sample dimensions
	fill     string   // fill_value, as JSON
	attrs    map[string]any
	// sample returns sample local of sr as little-endian bytes,
	// chunkBytes long: when section is set, a read-only view into the
	// shard; else appended to buf[:0].
	sample func(buf []byte, sr *shard.Reader, local int) []byte
	// section, when set, is the offset in the shard file of sample 0's
	// bytes: the shard holds this column's samples back to back, exactly
	// as the uncompressed inner chunks are, so they can be copied file to
	// file.
	section func(h shard.Header) uint64
}

// chunkBytes is the size of one uncompressed inner chunk (one sample).
func (c *column) chunkBytes() int {
	n := c.elemSize
	for _, d := range c.shape {
		n *= d
	}
	return n
}

// sampleDim names the first dimension of every array.
const sampleDim = "sample"

// metaColumns are the per-sample record fields of the shard meta section
// (docs/format/shard.md), one array each, in record order. box_count and
// class_index come from the record too but are built from the boxes.
var metaColumns = []struct {
	name, dataType, description string
	put                         func(dst []byte, m *shard.Meta) []byte
}{
	{"source_index", dataTypeUint32, "index into the root group's warehouse.sources",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.SourceIndex) }},
	{"frame_id", dataTypeUint64, "frame id of the source sample (for episodes: the time step)",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint64(d, m.FrameID) }},
	{"input_seq", dataTypeUint64, "position of the sample in the build's scan order over all inputs, kept or not",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint64(d, m.InputSeq) }},
	{"unix_time_ns", dataTypeInt64, "capture time in Unix nanoseconds, 0 when unknown",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint64(d, uint64(m.UnixTimeNs)) }},
	{"sim_time", dataTypeFloat64, "simulation time in seconds",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint64(d, math.Float64bits(m.SimTime)) }},
	{"src_width", dataTypeUint32, "decoded source image width",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.SrcWidth) }},
	{"src_height", dataTypeUint32, "decoded source image height",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.SrcHeight) }},
	{"resized_width", dataTypeUint32, "width of the image content inside the target (letterbox)",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.ResizedWidth) }},
	{"resized_height", dataTypeUint32, "height of the image content inside the target (letterbox)",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.ResizedHeight) }},
	{"pad_x", dataTypeUint32, "x offset of the content inside the target",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.PadX) }},
	{"pad_y", dataTypeUint32, "y offset of the content inside the target",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.PadY) }},
	{"scale_x", dataTypeFloat32, "target pixels per source pixel, x",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, math.Float32bits(m.ScaleX)) }},
	{"scale_y", dataTypeFloat32, "target pixels per source pixel, y",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, math.Float32bits(m.ScaleY)) }},
	{"boxes_dropped", dataTypeUint32, "boxes lost to max_boxes or degenerate after clamping",
		func(d []byte, m *shard.Meta) []byte { return le.AppendUint32(d, m.BoxesDropped) }},
}

var le = binary.LittleEndian

// columns lists every array of a warehouse of layout l, in store order.
func columns(m *warehouse.Manifest, l shard.Layout) ([]column, error) {
	if l.MaxBoxes < 1 {
		// A zero-length dimension cannot be chunked: Zarr chunk shapes
		// are positive.
		return nil, fmt.Errorf("max_boxes %d: the box arrays would have a zero-length dimension", l.MaxBoxes)
	}
	d := l.DType.BoxDType().Size()
	floatType := dataTypeFloat16
	if l.DType.BoxDType() == shard.F32 {
		floatType = dataTypeFloat32
	}
	imageType, imageDesc := floatType, "CHW images as stored in the shards"
	if l.DType == shard.U8 { // uint8 images, float32 boxes and mask
		imageType, imageDesc = dataTypeUint8, "CHW uint8 pixels as stored in the shards, before the normalization in warehouse.transform (mean, std)"
	}
	b := l.MaxBoxes
	cols := []column{
		{name: "images", dataType: imageType, elemSize: l.DType.Size(), shape: []int{l.Channels, l.Height, l.Width},
			dims: []string{"channel", "y", "x"}, fill: "0",
			attrs:   map[string]any{"description": imageDesc},
			sample:  func(_ []byte, sr *shard.Reader, i int) []byte { return sr.Image(i) },
			section: func(h shard.Header) uint64 { return h.ImageOffset }},
		{name: "boxes", dataType: floatType, elemSize: d, shape: []int{b, 4},
			dims: []string{"box", "coord"}, fill: "0",
			attrs:   map[string]any{"description": "x0, y0, x1, y1 normalized to [0, 1] in the target image; padding rows are 0"},
			sample:  func(_ []byte, sr *shard.Reader, i int) []byte { return sr.BoxesRaw(i) },
			section: func(h shard.Header) uint64 { return h.BoxesOffset }},
		{name: "box_mask", dataType: floatType, elemSize: d, shape: []int{b},
			dims: []string{"box"}, fill: "0",
			attrs:   map[string]any{"description": "1 for a real box, 0 for padding; the ones come first"},
			sample:  func(_ []byte, sr *shard.Reader, i int) []byte { return sr.MaskRaw(i) },
			section: func(h shard.Header) uint64 { return h.MaskOffset }},
		{name: "class_index", dataType: dataTypeInt32, elemSize: 4, shape: []int{b},
			dims: []string{"box"}, fill: "-1",
			attrs: map[string]any{"description": "class of each real box, an index into the root group's warehouse.classes; -1 for padding"},
			sample: func(buf []byte, sr *shard.Reader, i int) []byte {
				buf = buf[:0]
				classes := sr.ClassIndex(i)
				for _, c := range classes {
					buf = le.AppendUint32(buf, uint32(c))
				}
				for range b - len(classes) {
					buf = le.AppendUint32(buf, math.MaxUint32) // -1
				}
				return buf
			}},
		{name: "box_count", dataType: dataTypeUint32, elemSize: 4, fill: "0",
			attrs: map[string]any{"description": "number of real boxes (mask ones)"},
			sample: func(buf []byte, sr *shard.Reader, i int) []byte {
				return le.AppendUint32(buf[:0], uint32(sr.BoxCount(i)))
			}},
	}
	for _, mc := range metaColumns {
		size := 4
		if mc.dataType == dataTypeUint64 || mc.dataType == dataTypeInt64 || mc.dataType == dataTypeFloat64 {
			size = 8
		}
		put := mc.put
		cols = append(cols, column{name: mc.name, dataType: mc.dataType, elemSize: size, fill: "0",
			attrs: map[string]any{"description": mc.description},
			sample: func(buf []byte, sr *shard.Reader, i int) []byte {
				meta := sr.Meta(i)
				return put(buf[:0], &meta)
			}})
	}
	for _, e := range m.Extras {
		name, err := extraNodeName(e.Name)
		if err != nil {
			return nil, err
		}
		n := 1
		dims := make([]string, len(e.Shape))
		for k, s := range e.Shape {
			n *= s
			// Dimension names are unique per extra: Xarray requires
			// every array that shares a dimension name to share its
			// length.
			dims[k] = fmt.Sprintf("%s_%d", name, k)
		}
		off := e.Offset
		cols = append(cols, column{name: name, dataType: dataTypeFloat32, elemSize: 4, shape: slices.Clone(e.Shape), dims: dims, fill: "0",
			attrs: map[string]any{"description": "per-sample extra " + e.Name + ", converted to f32", "name": e.Name, "source_dtype": e.SourceDType},
			sample: func(buf []byte, sr *shard.Reader, i int) []byte {
				buf = buf[:0]
				for _, v := range sr.Extras(i)[off : off+n] {
					buf = le.AppendUint32(buf, math.Float32bits(v))
				}
				return buf
			}})
	}
	if l.Compact {
		// Compact images (shard_version 5) are no contiguous section:
		// each is restored into the chunk buffer.
		cols[0].section = nil
		cols[0].sample = func(buf []byte, sr *shard.Reader, i int) []byte {
			buf = slices.Grow(buf[:0], int(l.ImageBytes()))[:l.ImageBytes()]
			sr.ImageInto(buf, i)
			return buf
		}
	}
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c.name] {
			return nil, fmt.Errorf("two arrays would be named %q", c.name)
		}
		seen[c.name] = true
	}
	return cols, nil
}

// extrasPrefix starts the node name of every extra, so that no extra can
// take the name of another array.
const extrasPrefix = "extras."

// extraNodeName is the array name of extra name: "extras." + name with "/"
// replaced by ".", since "/" separates nodes in a Zarr hierarchy ("imu/acc"
// becomes "extras.imu.acc"). Names that could not be a node name or a file
// name are refused.
func extraNodeName(name string) (string, error) {
	node := extrasPrefix + strings.ReplaceAll(name, "/", ".")
	if name == "" || len(node) > 255 || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '\\' }) {
		return "", fmt.Errorf("extra %q cannot be an array name", name)
	}
	return node, nil
}
