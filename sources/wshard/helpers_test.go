package wshard

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

// goldenDir holds the reference files (copied beside the container
// package with their provenance).
const goldenDir = "container/testdata/golden"

// pixel is the test frames' formula: episode e, step t, row y, column x,
// channel c. Pixels come in equal pairs along x so that lz4 and zstd find
// repeats even in tiny frames.
func pixel(e, t, y, x, c int) byte { return byte(e*71 + t*37 + y*11 + (x/2)*5 + c*80) }

// frames lays out T frames of H x W x C pixels.
func frames(e, T, H, W, C int) []byte {
	out := make([]byte, 0, T*H*W*C)
	for t := range T {
		for y := range H {
			for x := range W {
				for c := range C {
					out = append(out, pixel(e, t, y, x, c))
				}
			}
		}
	}
	return out
}

// The test episodes' signals, written and expected independently of the
// reader: joint_pos f32[3], ctrl f64[2], gripper bf16[1] (multiples of 0.5,
// exact in bf16), reward f32, done on the last step.
func jointPos(e, t, j int) float32 { return float32(e) + float32(t)*0.25 + float32(j) }
func ctrl(e, t, j int) float64     { return float64(t-j)*0.1 + float64(e) }
func gripper(t int) float32        { return float32(t) * 0.5 }
func reward(e, t int) float32      { return float32(e*100+t) * 0.125 }

func f32Bytes(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64Bytes(v []float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// cleanEpisode is a well-formed episode e of T steps with H x W RGB frames.
func cleanEpisode(e, T, H, W int) *EpisodeFile {
	var jp, rw []float32
	var ct []float64
	var gr []byte
	done := make([]bool, T)
	for t := range T {
		for j := range 3 {
			jp = append(jp, jointPos(e, t, j))
		}
		for j := range 2 {
			ct = append(ct, ctrl(e, t, j))
		}
		gr = binary.LittleEndian.AppendUint16(gr, uint16(math.Float32bits(gripper(t))>>16))
		rw = append(rw, reward(e, t))
	}
	done[T-1] = true
	return &EpisodeFile{
		ID: "ep" + string(rune('A'+e)), EnvID: "Pick-v1", Length: T, TickHz: 10,
		Channels: []ChannelData{
			{ID: "cam0/rgb", Block: "signal/cam0/rgb", DType: "u8", Shape: []int{H, W, 3}, Modality: "rgb", Data: frames(e, T, H, W, 3)},
			{ID: "joint_pos", Block: "signal/joint_pos", DType: "f32", Shape: []int{3}, Data: f32Bytes(jp)},
			{ID: "ctrl", Block: "action/ctrl", DType: "f64", Shape: []int{2}, Data: f64Bytes(ct)},
			{ID: "gripper", Block: "signal/gripper", DType: "bf16", Shape: []int{1}, Data: gr},
		},
		Reward: rw, Done: done,
	}
}

// expectedExtras is a clean episode's extras for step t, in the order
// signal/joint_pos, action/ctrl, signal/gripper, reward, done.
func expectedExtras(e, t, T int) []float32 {
	out := []float32{jointPos(e, t, 0), jointPos(e, t, 1), jointPos(e, t, 2),
		float32(ctrl(e, t, 0)), float32(ctrl(e, t, 1)), gripper(t), reward(e, t)}
	if t == T-1 {
		return append(out, 1)
	}
	return append(out, 0)
}

var allExtras = []string{"signal/joint_pos", "action/ctrl", "gripper", "reward", "done"}

func writeBytes(t testing.TB, dir, rel string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeEpisode(t testing.TB, dir, rel string, e *EpisodeFile) []byte {
	t.Helper()
	b, err := e.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, rel, b)
	return b
}

func newSource(t testing.TB, root string, opts Options) *Source {
	t.Helper()
	s, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func scan(t testing.TB, s *Source) []sources.Sample {
	t.Helper()
	var out []sources.Sample
	err := s.Scan(context.Background(), func(smp *sources.Sample) error {
		if smp.Seq != int64(len(out)) {
			t.Fatalf("sample %d has seq %d", len(out), smp.Seq)
		}
		out = append(out, *smp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reasonsOf renders each sample as "frame:reason+reason" ("frame:" when
// clean), one string per sample, for compact table expectations.
func reasonsOf(samples []sources.Sample) []string {
	out := make([]string, len(samples))
	for i, s := range samples {
		rs := make([]string, len(s.Reasons))
		for j, r := range s.Reasons {
			rs[j] = string(r)
		}
		out[i] = strings.Join(append([]string{strconv.Itoa(int(s.Frame))}, strings.Join(rs, "+")), ":")
	}
	return out
}

// repeat builds expectations: n samples from frame start with the same
// reasons.
func repeat(start, n int, reasons string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(start+i) + ":" + reasons
	}
	return out
}

func cat(parts ...[]string) []string { return slices.Concat(parts...) }

// patchEntry edits field off (an index entry offset, see container's
// layout) of block name in a container's bytes, without fixing anything
// else.
func patchEntry(t testing.TB, b []byte, name string, off int, v uint64, size int) {
	t.Helper()
	r, err := container.NewReader(bytes.NewReader(b), int64(len(b)), "patch", container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range r.Entries() {
		if e.Name != name {
			continue
		}
		at := container.HeaderSize + i*container.EntrySize + off
		switch size {
		case 2:
			binary.LittleEndian.PutUint16(b[at:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(b[at:], uint32(v))
		case 8:
			binary.LittleEndian.PutUint64(b[at:], v)
		}
		return
	}
	t.Fatalf("no block %q", name)
}

// blockAt returns the offset and stored size of a block.
func blockAt(t testing.TB, b []byte, name string) (int, int) {
	t.Helper()
	r, err := container.NewReader(bytes.NewReader(b), int64(len(b)), "probe", container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("no block %q", name)
	}
	return int(e.Offset), int(e.DiskSize)
}
