package wshard

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"

	"github.com/x448/float16"

	"warehouse-etl/sources/wshard/container"
)

// EpisodeFile describes an episode file to write. It exists for test data
// and demo datasets (testdata/wshardgen): the build only reads. Blocks are
// laid out as the reference writers lay them out: meta/wshard,
// meta/episode, meta/channels, the channel blocks in order,
// time/timestamps_ns, reward, done.
type EpisodeFile struct {
	ID, EnvID    string
	Length       int       // length_T
	TickHz       float64   // ticks timebase rate; 0 writes no rate
	TimestampsNs []int64   // when set, the timebase is timestamps_ns and this is its block
	Range        *[2]int64 // timestep_range as written; nil writes [0, Length]
	ChunkIndex   *int
	TotalChunks  *int
	Channels     []ChannelData
	Reward       []float32 // nil: no reward block
	Done         []bool    // nil: no done block
	LegacyMeta   bool      // write id/length_t and the older map form of meta/channels
	Alignment    uint8     // 0 means 64, as the reference Go writer
	Compression  container.Compression
	OmitChannels bool // write no meta/channels block
}

// ChannelData is one channel and its bytes (Length x shape x dtype,
// little-endian; see Encode).
type ChannelData struct {
	ID, Block, Modality string
	DType               string // written as is, so a test can write an alias or an unknown dtype
	Shape               []int
	Data                []byte
	Compression         container.Compression
	Undeclared          bool // write the block without a meta/channels entry
}

// Bytes returns the file.
func (e *EpisodeFile) Bytes() ([]byte, error) {
	align := e.Alignment
	if align == 0 {
		align = 64
	}
	w := container.Writer{Role: container.RoleWShard, Alignment: align, Compression: e.Compression}
	addJSON := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.Add(container.Block{Name: name, Data: b, ContentType: container.ContentJSON})
		return nil
	}
	tb := map[string]any{"type": TimebaseTicks}
	if e.TickHz > 0 {
		tb["tick_hz"] = e.TickHz
	}
	if e.TimestampsNs != nil {
		tb = map[string]any{"type": TimebaseTimestampsNs}
	}
	if err := addJSON("meta/wshard", map[string]any{"version": 1, "timebase": tb}); err != nil {
		return nil, err
	}
	r := [2]int64{0, int64(e.Length)}
	if e.Range != nil {
		r = *e.Range
	}
	ep := map[string]any{"env_id": e.EnvID, "timestep_range": r}
	if e.LegacyMeta {
		ep["id"], ep["length_t"] = e.ID, e.Length
	} else {
		ep["episode_id"], ep["length_T"] = e.ID, e.Length
	}
	if e.ChunkIndex != nil {
		ep["chunk_index"] = *e.ChunkIndex
	}
	if e.TotalChunks != nil {
		ep["total_chunks"] = *e.TotalChunks
	}
	if err := addJSON("meta/episode", ep); err != nil {
		return nil, err
	}
	if !e.OmitChannels {
		var channels any
		if e.LegacyMeta {
			m := map[string]any{}
			for _, c := range e.Channels {
				if !c.Undeclared {
					m[c.Block] = map[string]any{"dtype": c.DType, "shape": c.Shape}
				}
			}
			channels = m
		} else {
			list := []map[string]any{}
			for _, c := range e.Channels {
				if c.Undeclared {
					continue
				}
				d := map[string]any{"id": c.ID, "dtype": c.DType, "shape": c.Shape, "signal_block": c.Block}
				if c.Modality != "" {
					d["modality"] = c.Modality
				}
				list = append(list, d)
			}
			channels = map[string]any{"channels": list}
		}
		if err := addJSON("meta/channels", channels); err != nil {
			return nil, err
		}
	}
	for _, c := range e.Channels {
		if c.Data == nil {
			continue // declared, block absent
		}
		w.Add(container.Block{Name: c.Block, Data: c.Data, Compression: c.Compression})
	}
	if e.TimestampsNs != nil {
		b := make([]byte, 0, 8*len(e.TimestampsNs))
		for _, v := range e.TimestampsNs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		w.Add(container.Block{Name: "time/timestamps_ns", Data: b})
	}
	if e.Reward != nil {
		b := make([]byte, 0, 4*len(e.Reward))
		for _, v := range e.Reward {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		w.Add(container.Block{Name: "reward", Data: b})
	}
	if e.Done != nil {
		b := make([]byte, len(e.Done))
		for i, v := range e.Done {
			if v {
				b[i] = 1
			}
		}
		w.Add(container.Block{Name: "done", Data: b})
	}
	return w.Bytes()
}

// ManifestFile describes a chunk manifest (role 0x04) in the reference
// layout: one JSON block meta/manifest.
type ManifestFile struct {
	EpisodeID      string          `json:"episode_id"`
	EnvID          string          `json:"env_id,omitempty"`
	Chunks         []ManifestChunk `json:"chunks"`
	TotalTimesteps int64           `json:"total_timesteps"`
}

// ManifestChunk is one chunk entry. The reference chunk writers record
// timestep_range inclusive: [start, start+length_T-1].
type ManifestChunk struct {
	ChunkIndex    int      `json:"chunk_index"`
	URI           string   `json:"uri"`
	SHA256        string   `json:"sha256,omitempty"`
	TimestepRange [2]int64 `json:"timestep_range"`
	LengthT       int64    `json:"length_T"`
	TotalChunks   int      `json:"total_chunks,omitempty"`
}

// Bytes returns the manifest file.
func (m *ManifestFile) Bytes() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	w := container.Writer{Role: container.RoleManifest, Alignment: 64}
	w.Add(container.Block{Name: "meta/manifest", Data: b, ContentType: container.ContentJSON})
	return w.Bytes()
}

// Encode writes values as little-endian elements of dtype d, for test
// data. Integers are truncated toward zero; f16 and bf16 go through
// float32 and are rounded to nearest even.
func Encode(d DType, vals []float64) ([]byte, error) {
	out := make([]byte, 0, len(vals)*d.Size())
	le := binary.LittleEndian
	for _, v := range vals {
		switch d {
		case F32:
			out = le.AppendUint32(out, math.Float32bits(float32(v)))
		case F64:
			out = le.AppendUint64(out, math.Float64bits(v))
		case F16:
			out = le.AppendUint16(out, float16.Fromfloat32(float32(v)).Bits())
		case BF16:
			out = le.AppendUint16(out, bfloat16FromFloat32(float32(v)))
		case I64, U64:
			out = le.AppendUint64(out, uint64(int64(v)))
		case I32, U32:
			out = le.AppendUint32(out, uint32(int64(v)))
		case I16, U16:
			out = le.AppendUint16(out, uint16(int64(v)))
		case I8, U8:
			out = append(out, byte(int64(v)))
		case Bool:
			b := byte(0)
			if v != 0 {
				b = 1
			}
			out = append(out, b)
		default:
			return nil, errors.New("wshard: encode: unknown dtype " + d.String())
		}
	}
	return out, nil
}

// bfloat16FromFloat32 rounds to the nearest bf16, ties to even; NaN stays
// a quiet NaN.
func bfloat16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}
