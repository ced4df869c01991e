// Command wshardgen writes the demo WShard dataset in testdata/wshard:
// small robot episodes (single files, one chunked episode with a manifest)
// in every storage the reader supports, and a handful of episodes with one
// planted defect each. Frames and signals are pure functions of the
// episode number and step (formulas in README.md), so a test can check
// what the warehouse holds without reading the files; a rerun writes the
// same bytes with the same Go and module versions.
//
//	go run ./testdata/wshardgen -out testdata/wshard
//
// It replaces only the files it writes; README.md, listing every episode
// and planted defect with the reasons it must produce, is written from the
// same table as the data.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"warehouse-etl/sources/wshard"
	"warehouse-etl/sources/wshard/container"
)

func main() {
	out := flag.String("out", "", "output directory (the dataset root), e.g. testdata/wshard")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "wshardgen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "wshardgen:", err)
		os.Exit(1)
	}
}

// Frame size of every episode: 24 x 16, 3:2 like a small wrist camera.
const W, H = 24, 16

// The signals, as functions of the episode number e and the global step t.
// Constants are multiples of powers of two so that f32 and bf16 hold them
// exactly; ctrl is f64 and loses precision to f32 in the warehouse.

func jointPos(e, t, j int) float32 { return float32(e) + float32(t)*0.125 - float32(j)*0.25 }
func ctrl(e, t, j int) float64 {
	// The conversions round each product on its own: no fused multiply-add
	// on any architecture, so the f64 bits are the same everywhere.
	return float64(0.1*float64(t)) - float64(0.05*float64(j)) + float64(e)
}
func gripper(t int) float32 { return float32(t%2) * 0.5 }
func reward(t int) float32  { return float32(t) * 0.25 }

// pixel draws a horizontal gradient tinted per episode with a bright 6x6
// square that moves one pixel right per step.
func pixel(e, t, y, x, c int) byte {
	sx, sy := (2+t)%(W-6), 5
	if x >= sx && x < sx+6 && y >= sy && y < sy+6 {
		return [3]byte{250, 220, 40}[c]
	}
	return byte(x*10 + y*3 + e*20*(c+1))
}

// episode is one demo episode (or chunked episode) and what the scan must
// say about it.
type episode struct {
	file    string // relative path; a manifest for chunked episodes
	number  int    // e in the formulas
	steps   int    // length_T (of the whole chunked episode)
	storage string // README description
	gray    bool
	camera  container.Compression
	signals container.Compression
	legacy  bool // id/length_t, map-form meta/channels, dtype aliases
	stamps  bool // timestamps_ns timebase
	chunks  []int
	defect  string
	reasons string // expected, per README
	mutate  func(f *wshard.EpisodeFile)
	bytes   func(b []byte) ([]byte, error)
}

// Timestamps of a timestamps_ns episode: 20 ms apart from a fixed epoch.
const epochNs = 1_700_000_000_000_000_000

// episodes, in the natural order of their paths: the order the scan
// meets them and the README lists them.
var episodes = []episode{
	{file: "gap/gap_ep_manifest.wshard", number: 1, steps: 8, storage: "chunked, 2 chunks", chunks: []int{0, 3, 8},
		defect: "chunk 1 starts at step 5: steps 3 and 4 are missing", reasons: "step 5: episode_gap"},
	{file: "long/long_ep_manifest.wshard", number: 2, steps: 9, storage: "chunked: a manifest and 3 chunk files of 3 steps (inclusive ranges, as the reference chunk writer)",
		chunks: []int{0, 3, 6, 9}},
	{file: "pick_cube/ep_2.wshard", number: 3, steps: 6, storage: "raw blocks, ticks at 10 Hz"},
	{file: "pick_cube/ep_10.wshard", number: 4, steps: 5, storage: "zstd camera, legacy metadata (id, length_t, map-form meta/channels, dtype aliases), timestamps_ns",
		camera: container.CompressZstd, legacy: true, stamps: true},
	{file: "push/ep_1.wshard", number: 5, steps: 4, storage: "grayscale [H,W] camera, every block lz4", gray: true,
		camera: container.CompressLZ4, signals: container.CompressLZ4},
	{file: "zz_bad/crc_reward.wshard", number: 6, steps: 3, storage: "raw blocks",
		defect: "one byte of the reward block flipped, CRC32C not updated", reasons: "every step: checksum_mismatch",
		bytes: flipBlockByte("reward")},
	{file: "zz_bad/frames_crc.wshard", number: 7, steps: 3, storage: "raw blocks",
		defect: "one byte of the camera block flipped", reasons: "scan clean (camera blocks are not read at scan); every step: decode_error at transform time, message naming the block",
		bytes: flipBlockByte("signal/cam0/rgb")},
	{file: "zz_bad/nan_reward.wshard", number: 8, steps: 3, storage: "raw blocks",
		defect: "reward at step 1 is NaN", reasons: "step 1: nonfinite (flagged by the pipeline)",
		mutate: func(f *wshard.EpisodeFile) { f.Reward[1] = float32(math.NaN()) }},
	{file: "zz_bad/no_camera.wshard", number: 9, steps: 3, storage: "raw blocks",
		defect: "meta/channels does not declare the camera", reasons: "every step: camera_missing",
		mutate: func(f *wshard.EpisodeFile) { f.Channels[0].Undeclared = true }},
	{file: "zz_bad/time_backwards.wshard", number: 10, steps: 4, storage: "timestamps_ns", stamps: true,
		defect: "the timestamp of step 2 equals step 1's", reasons: "step 2: timestamp_not_monotonic",
		mutate: func(f *wshard.EpisodeFile) { f.TimestampsNs[2] = f.TimestampsNs[1] }},
	{file: "zz_bad/truncated.wshard", number: 11, steps: 3, storage: "raw blocks",
		defect: "the file is cut 100 bytes short", reasons: "one placeholder sample: decode_error",
		bytes: func(b []byte) ([]byte, error) { return b[:len(b)-100], nil }},
}

// build returns the episode file for steps [a, z) of episode ep.
func build(ep episode, a, z int) *wshard.EpisodeFile {
	n := z - a
	C := 3
	shape := []int{H, W, 3}
	if ep.gray {
		C, shape = 1, []int{H, W}
	}
	frames := make([]byte, 0, n*H*W*C)
	var jp, gr []byte
	var ct []float64
	var rw []float32
	done := make([]bool, n)
	var stamps []int64
	for t := a; t < z; t++ {
		for y := range H {
			for x := range W {
				for c := range C {
					frames = append(frames, pixel(ep.number, t, y, x, c))
				}
			}
		}
		for j := range 7 {
			jp = binary.LittleEndian.AppendUint32(jp, math.Float32bits(jointPos(ep.number, t, j)))
		}
		for j := range 2 {
			ct = append(ct, ctrl(ep.number, t, j))
		}
		gr = binary.LittleEndian.AppendUint16(gr, uint16(math.Float32bits(gripper(t))>>16))
		rw = append(rw, reward(t))
		done[t-a] = t == ep.steps-1
		stamps = append(stamps, epochNs+int64(t)*20_000_000)
	}
	ctBytes, _ := wshard.Encode(wshard.F64, ct)
	u8, f32, f64 := "u8", "f32", "f64"
	if ep.legacy {
		u8, f32, f64 = "uint8", "float32", "float64"
	}
	f := &wshard.EpisodeFile{
		ID: strings.TrimSuffix(ep.file, wshard.Ext), EnvID: "PickCube-v1", Length: n, TickHz: 10,
		LegacyMeta: ep.legacy,
		Channels: []wshard.ChannelData{
			{ID: "cam0/rgb", Block: "signal/cam0/rgb", DType: u8, Shape: shape, Modality: "rgb", Data: frames, Compression: ep.camera},
			{ID: "joint_pos", Block: "signal/joint_pos", DType: f32, Shape: []int{7}, Data: jp, Compression: ep.signals},
			{ID: "ctrl", Block: "action/ctrl", DType: f64, Shape: []int{2}, Data: ctBytes, Compression: ep.signals},
			{ID: "gripper", Block: "signal/gripper", DType: "bf16", Shape: []int{1}, Data: gr},
		},
		Reward: rw, Done: done,
	}
	if ep.gray {
		f.Channels[0].Modality = ""
	}
	if ep.stamps {
		f.TimestampsNs = stamps
	}
	return f
}

// checkStorage makes sure every block asked to be compressed was: the
// writer keeps a block raw when compressing does not make it smaller, and
// the README promises compressed blocks.
func checkStorage(b []byte, f *wshard.EpisodeFile) error {
	r, err := container.NewReader(strings.NewReader(string(b)), int64(len(b)), "check", container.Limits{})
	if err != nil {
		return err
	}
	for _, c := range f.Channels {
		if e, _ := r.Lookup(c.Block); e.Compression() != c.Compression {
			return fmt.Errorf("block %s is stored %s, want %s", c.Block, e.Compression(), c.Compression)
		}
	}
	return nil
}

func flipBlockByte(name string) func(b []byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		r, err := container.NewReader(strings.NewReader(string(b)), int64(len(b)), "flip", container.Limits{})
		if err != nil {
			return nil, err
		}
		e, ok := r.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("no block %q", name)
		}
		b[e.Offset+e.DiskSize/2] ^= 0x10
		return b, nil
	}
}

func generate(root string) error {
	for _, ep := range episodes {
		if ep.chunks != nil {
			if err := writeChunked(root, ep); err != nil {
				return fmt.Errorf("%s: %w", ep.file, err)
			}
			continue
		}
		f := build(ep, 0, ep.steps)
		if ep.mutate != nil {
			ep.mutate(f)
		}
		b, err := f.Bytes()
		if err != nil {
			return fmt.Errorf("%s: %w", ep.file, err)
		}
		if err := checkStorage(b, f); err != nil {
			return fmt.Errorf("%s: %w", ep.file, err)
		}
		if ep.bytes != nil {
			if b, err = ep.bytes(b); err != nil {
				return fmt.Errorf("%s: %w", ep.file, err)
			}
		}
		if err := write(root, ep.file, b); err != nil {
			return err
		}
	}
	return writeReadme(root)
}

// writeChunked writes the chunks of ep (steps split at ep.chunks; the gap
// episode's second chunk shifted to start at step 5) and its manifest.
func writeChunked(root string, ep episode) error {
	id := strings.TrimSuffix(path.Base(ep.file), "_manifest"+wshard.Ext)
	m := &wshard.ManifestFile{EpisodeID: id, EnvID: "PickCube-v1", TotalTimesteps: int64(ep.steps)}
	total := len(ep.chunks) - 1
	for i := range total {
		a, z := ep.chunks[i], ep.chunks[i+1]
		if ep.defect != "" && i == 1 {
			a = 5 // the planted gap: steps 3 and 4 are not in any chunk
		}
		f := build(ep, a, z)
		ci := i
		f.ID, f.ChunkIndex, f.TotalChunks = id, &ci, &total
		f.Range = &[2]int64{int64(a), int64(z - 1)}
		b, err := f.Bytes()
		if err != nil {
			return err
		}
		uri := fmt.Sprintf("chunks/%s_chunk_%04d.wshard", id, i)
		if err := write(root, path.Join(path.Dir(ep.file), uri), b); err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		m.Chunks = append(m.Chunks, wshard.ManifestChunk{
			ChunkIndex: i, URI: uri, SHA256: hex.EncodeToString(sum[:]),
			TimestepRange: [2]int64{int64(a), int64(z - 1)}, LengthT: int64(z - a), TotalChunks: total,
		})
	}
	b, err := m.Bytes()
	if err != nil {
		return err
	}
	return write(root, ep.file, b)
}

func write(root, rel string, b []byte) error {
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func writeReadme(root string) error {
	var b strings.Builder
	b.WriteString(`# Demo WShard dataset

Generated by ` + "`go run ./testdata/wshardgen -out testdata/wshard`" + `; do not edit by hand, change
the generator and rerun it. Built into a warehouse by ` + "`configs/wshard.jsonc`" + ` and checked end to end
by ` + "`cmd/warehouse-etl/wshard_e2e_test.go`" + `. The format is described in package ` + "`sources/wshard`" + `
and ` + "`../shared/formats/wshard.md`" + `.

Every episode has a 24x16 camera ` + "`signal/cam0/rgb`" + ` (u8 [16,24,3], modality rgb; ` + "`push`" + ` is
grayscale [16,24]) and the channels ` + "`signal/joint_pos`" + ` (f32 [7]), ` + "`action/ctrl`" + ` (f64 [2]),
` + "`signal/gripper`" + ` (bf16 [1]), ` + "`reward`" + ` (f32) and ` + "`done`" + ` (u8). With e the episode number
below and t the global step:

    joint_pos[j] = e + t*0.125 - j*0.25          (f32, exact)
    ctrl[j]      = 0.1*t - 0.05*j + e            (f64; float32 of it in the warehouse)
    gripper      = (t mod 2) * 0.5               (bf16, exact)
    reward       = t * 0.25                      (f32, exact)
    done         = 1 on the episode's last step, else 0
    frame        = a gradient tinted by e with a 6x6 square at x = (2+t) mod 18, y = 5

Ticks run at 10 Hz; timestamps_ns episodes are 20 ms apart from 1700000000000000000 ns.

## Episodes, in natural order of their files

| file | e | steps | storage | planted defect | reasons |
|---|---|---|---|---|---|
`)
	for _, ep := range episodes {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s |\n", ep.file, ep.number, ep.steps, ep.storage, orNone(ep.defect), orNone(ep.reasons))
	}
	b.WriteString("\nChunk files live in `chunks/` beside their manifest and are read only through it.\n")
	return os.WriteFile(filepath.Join(root, "README.md"), []byte(b.String()), 0o644)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
