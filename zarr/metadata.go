package zarr

import (
	"bytes"
	"encoding/json"
)

// The metadata documents (zarr.json) of the Zarr v3 core specification, with
// the members this exporter writes, in the order it writes them. Every name
// and spelling below is the specification's:
// https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html and the
// codec specifications of bytes, zstd, crc32c and sharding_indexed.

// MetadataKey is the store key of every node's metadata document.
const MetadataKey = "zarr.json"

// zarrFormat is the value of zarr_format in every document.
const zarrFormat = 3

// Core data type identifiers used by the exported arrays.
const (
	dataTypeFloat16 = "float16"
	dataTypeFloat32 = "float32"
	dataTypeFloat64 = "float64"
	dataTypeInt32   = "int32"
	dataTypeInt64   = "int64"
	dataTypeUint32  = "uint32"
	dataTypeUint8   = "uint8"
	dataTypeUint64  = "uint64"
)

// groupMetadata is a group's zarr.json.
type groupMetadata struct {
	ZarrFormat int            `json:"zarr_format"`
	NodeType   string         `json:"node_type"` // "group"
	Attributes map[string]any `json:"attributes"`
}

// arrayMetadata is an array's zarr.json.
type arrayMetadata struct {
	ZarrFormat       int             `json:"zarr_format"`
	NodeType         string          `json:"node_type"` // "array"
	Shape            []int64         `json:"shape"`
	DataType         string          `json:"data_type"`
	ChunkGrid        namedConfig     `json:"chunk_grid"`
	ChunkKeyEncoding namedConfig     `json:"chunk_key_encoding"`
	FillValue        json.RawMessage `json:"fill_value"`
	Codecs           []namedConfig   `json:"codecs"`
	Attributes       map[string]any  `json:"attributes"`
	DimensionNames   []string        `json:"dimension_names"`
}

// namedConfig is the {"name", "configuration"} object of every extension
// point (chunk grid, chunk key encoding, codec).
type namedConfig struct {
	Name          string `json:"name"`
	Configuration any    `json:"configuration,omitempty"`
}

type regularGridConfig struct {
	ChunkShape []int64 `json:"chunk_shape"`
}

type chunkKeyConfig struct {
	Separator string `json:"separator"`
}

type bytesConfig struct {
	Endian string `json:"endian"`
}

type zstdConfig struct {
	Level    int  `json:"level"`
	Checksum bool `json:"checksum"`
}

type shardingConfig struct {
	ChunkShape    []int64       `json:"chunk_shape"`
	Codecs        []namedConfig `json:"codecs"`
	IndexCodecs   []namedConfig `json:"index_codecs"`
	IndexLocation string        `json:"index_location"`
}

// shardingCodecs is an array's whole codec list: one sharding_indexed codec
// whose inner chunks are innerShape, encoded little-endian and, when
// zstdLevel > 0, zstd-compressed; its index is little-endian u64 pairs plus
// a crc32c, at the end of the shard.
func shardingCodecs(innerShape []int64, zstdLevel int) []namedConfig {
	inner := []namedConfig{{Name: "bytes", Configuration: bytesConfig{Endian: "little"}}}
	if zstdLevel > 0 {
		inner = append(inner, namedConfig{Name: "zstd", Configuration: zstdConfig{Level: zstdLevel, Checksum: false}})
	}
	return []namedConfig{{
		Name: "sharding_indexed",
		Configuration: shardingConfig{
			ChunkShape:    innerShape,
			Codecs:        inner,
			IndexCodecs:   []namedConfig{{Name: "bytes", Configuration: bytesConfig{Endian: "little"}}, {Name: "crc32c"}},
			IndexLocation: "end",
		},
	}}
}

// encodeDocument is the canonical encoding of a metadata document:
// two-space indented JSON with a trailing newline, map keys sorted.
func encodeDocument(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
