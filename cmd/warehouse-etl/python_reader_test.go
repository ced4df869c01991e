package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// debianPython is the interpreter CI installs python3-numpy for.
const debianPython = "/usr/bin/python3"

// pythonReader returns the command line of examples/read_warehouse.py, or
// skips the test when numpy is missing. In CI (CI=true) a missing numpy is
// a failure: the cross-language proof must run there.
func pythonReader(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import numpy").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s cannot import numpy (%v: %s); CI must install python3-numpy", debianPython, err, out)
		}
		t.Skipf("%s with numpy is not available: %v", debianPython, err)
	}
	script, err := filepath.Abs("../../examples/read_warehouse.py")
	if err != nil {
		t.Fatal(err)
	}
	return []string{debianPython, script}
}

func runPython(t *testing.T, argv []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	err = cmd.Run()
	return out.String(), errw.String(), err
}

// pyDigest is one line of read_warehouse.py --digests.
type pyDigest struct {
	Index      int                        `json:"index"`
	Shard      string                     `json:"shard"`
	ShardIndex int                        `json:"shard_index"`
	Image      string                     `json:"image"`
	Boxes      string                     `json:"boxes"`
	Mask       string                     `json:"mask"`
	Extras     string                     `json:"extras"`
	ClassIndex []int32                    `json:"class_index"`
	BoxCount   int                        `json:"box_count"`
	Meta       map[string]json.RawMessage `json:"meta"`
}

// f32Digest is sha256 over the little-endian float32 encoding of raw
// elements of dtype d, the digest the Python reader computes with
// astype("<f4").
func f32Digest(raw []byte, d shard.DType) string {
	h := sha256.New()
	var buf [4]byte
	for k := 0; k < len(raw); k += d.Size() {
		var v float32
		if d == shard.F16 {
			v = float16.Frombits(binary.LittleEndian.Uint16(raw[k:])).Float32()
		} else {
			v = math.Float32frombits(binary.LittleEndian.Uint32(raw[k:]))
		}
		binary.LittleEndian.PutUint32(buf[:], math.Float32bits(v))
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// goMeta is every record field of s as the Python reader names them.
func goMeta(s warehouse.Sample) map[string]any {
	m := s.Meta()
	return map[string]any{
		"source_index": uint64(m.SourceIndex), "flags": uint64(0), "frame_id": m.FrameID, "input_seq": m.InputSeq,
		"unix_time_ns": m.UnixTimeNs, "sim_time": m.SimTime, "src_width": uint64(m.SrcWidth), "src_height": uint64(m.SrcHeight),
		"resized_width": uint64(m.ResizedWidth), "resized_height": uint64(m.ResizedHeight), "pad_x": uint64(m.PadX), "pad_y": uint64(m.PadY),
		"scale_x": float64(m.ScaleX), "scale_y": float64(m.ScaleY), "box_count": uint64(s.BoxCount()), "boxes_dropped": uint64(m.BoxesDropped),
	}
}

// decodeLike parses a JSON number into the Go type of want, exactly.
func decodeLike(raw json.RawMessage, want any) (any, error) {
	switch want.(type) {
	case uint64:
		var v uint64
		err := json.Unmarshal(raw, &v)
		return v, err
	case int64:
		var v int64
		err := json.Unmarshal(raw, &v)
		return v, err
	default:
		var v float64
		err := json.Unmarshal(raw, &v)
		return v, err
	}
}

// The Python reference reader, written from docs/format alone, reads
// warehouses built by the CLI in f16 and f32 and agrees with the Go reader
// on every value of every tensor (digests over all elements as float32,
// exact for both dtypes), every class index and every meta field; and it
// computes the same batch plans.
func TestPythonReaderMatchesGoReader(t *testing.T) {
	py := pythonReader(t)
	tests := []struct {
		name      string
		overrides map[string]any
		dtype     shard.DType
	}{
		{"f16 letterbox", map[string]any{"dtype": "f16", "target_size": []int{96, 64}, "shard_target_mb": 0.1}, shard.F16},
		{"f32 stretch normalized", map[string]any{"dtype": "f32", "target_size": []int{48, 80}, "resize_mode": "stretch", "pad_value": 7,
			"normalize": map[string]any{"mean": []float64{0.485, 0.456, 0.406}, "std": []float64{0.229, 0.224, 0.225}}, "shard_target_mb": 0.2}, shard.F32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath, outRoot := writeConfig(t, demoRoot(t), tt.overrides)
			dir, _ := mustBuild(t, cfgPath, nil)
			r, err := warehouse.Open(dir, warehouse.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Layout().DType != tt.dtype || len(r.Manifest().Shards) < 2 {
				t.Fatalf("built %v with %d shards", r.Layout().DType, len(r.Manifest().Shards))
			}
			stdout, stderr, err := runPython(t, py, outRoot, "--digests")
			if err != nil {
				t.Fatalf("read_warehouse.py --digests: %v\n%s", err, stderr)
			}
			sc := bufio.NewScanner(strings.NewReader(stdout))
			sc.Buffer(nil, 1<<20)
			n := 0
			for ; sc.Scan(); n++ {
				var d pyDigest
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Fatalf("line %d: %v", n, err)
				}
				s, err := r.Sample(n)
				if err != nil {
					t.Fatal(err)
				}
				l := r.Layout()
				classes := make([]int32, l.MaxBoxes)
				for j := range classes {
					classes[j] = -1
				}
				copy(classes, s.ClassIndex())
				extras := make([]byte, 4*len(s.Extras()))
				for k, v := range s.Extras() {
					binary.LittleEndian.PutUint32(extras[4*k:], math.Float32bits(v))
				}
				want := pyDigest{
					Index: n, Shard: s.Shard, ShardIndex: s.ShardIndex,
					Image: f32Digest(s.Image(), l.DType), Boxes: f32Digest(s.BoxesRaw(), l.DType), Mask: f32Digest(s.MaskRaw(), l.DType),
					Extras: f32Digest(extras, shard.F32), ClassIndex: classes, BoxCount: s.BoxCount(), Meta: d.Meta,
				}
				if !reflect.DeepEqual(d, want) {
					t.Fatalf("sample %d: python %+v\n go %+v", n, d, want)
				}
				gm := goMeta(s)
				if len(d.Meta) != len(gm) {
					t.Fatalf("sample %d: python meta has %d fields, go %d", n, len(d.Meta), len(gm))
				}
				for name, g := range gm {
					p, err := decodeLike(d.Meta[name], g)
					if err != nil || p != g {
						t.Fatalf("sample %d meta %s: python %s (%v), go %v", n, name, d.Meta[name], err, g)
					}
				}
			}
			if n != r.Len() {
				t.Fatalf("python read %d samples, go %d", n, r.Len())
			}

			// Batch plans: the documented order is reproducible outside Go.
			for _, p := range []struct {
				shuffle, remainder string
				batch, world, rank int
				seed               uint64
				epoch              int
			}{
				{"none", "drop", 4, 1, 0, 0, 0},
				{"global", "drop", 3, 2, 1, 42, 7},
				{"shard", "pad", 4, 2, 1, 1 << 63, 3},
				{"global", "pad", 5, 3, 2, 12345, 0},
			} {
				args := []string{dir, "--plan", "--batch", fmt.Sprint(p.batch), "--world", fmt.Sprint(p.world), "--rank", fmt.Sprint(p.rank),
					"--seed", fmt.Sprint(p.seed), "--epoch", fmt.Sprint(p.epoch), "--shuffle", p.shuffle, "--remainder", p.remainder}
				out, stderr, err := runPython(t, py, args...)
				if err != nil {
					t.Fatalf("%v: %v\n%s", args, err, stderr)
				}
				var got []warehouse.PlannedBatch
				var raw []struct {
					Indices []int `json:"indices"`
					Repeats int   `json:"repeats"`
				}
				if err := json.Unmarshal([]byte(out), &raw); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
				for _, b := range raw {
					got = append(got, warehouse.PlannedBatch{Indices: b.Indices, Repeats: b.Repeats})
				}
				shuffle, _ := warehouse.ParseShuffle(p.shuffle)
				remainder, _ := warehouse.ParseRemainder(p.remainder)
				want, err := warehouse.PlanBatches(r.Len(), r.ShardStarts(), warehouse.BatchOptions{BatchSize: p.batch, WorldSize: p.world,
					Rank: p.rank, Seed: p.seed, Epoch: p.epoch, Shuffle: shuffle, Remainder: remainder})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%v:\npython %v\n    go %v", args, got, want)
				}
			}
		})
	}
}

// The Python reader refuses the bad inputs of issue item 6 as the Go reader
// does, naming the file.
func TestPythonReaderRefusesBadInput(t *testing.T) {
	py := pythonReader(t)
	dir, _ := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	shard1 := filepath.Join(dir, m.Shards[1].RelativePath)
	original, err := os.ReadFile(shard1)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, warehouse.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		shard func([]byte) []byte
		edit  func(string) string
		want  string
	}{
		{name: "truncated shard", shard: func(b []byte) []byte { return b[:len(b)-10] },
			want: fmt.Sprintf("%s: %d bytes, the manifest says %d", shard1, len(original)-10, len(original))},
		{name: "flipped magic", shard: func(b []byte) []byte { b[0] ^= 0xff; return b }, want: shard1 + `: bad magic b'\xabWH1'`},
		{name: "wrong dtype tag", shard: func(b []byte) []byte { b[8] = 7; return b }, want: shard1 + ": shard_version 1, endianness 0, dtype 7: not readable here"},
		{name: "relative path with ..", edit: func(s string) string {
			return strings.Replace(s, `"shards/shard-00001.twh"`, `"../shard-00001.twh"`, 1)
		}, want: `shards[1].relative_path '../shard-00001.twh' leaves the warehouse`},
		{name: "manifest lies about the count", edit: func(s string) string {
			return strings.Replace(s, fmt.Sprintf(`"samples": %d,`+"\n  \"samples_per_shard\"", m.Samples), fmt.Sprintf(`"samples": %d,`+"\n  \"samples_per_shard\"", m.Samples+1), 1)
		}, want: fmt.Sprintf("samples %d, shards hold %d", m.Samples+1, m.Samples)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte(nil), original...)
			mf := string(manifest)
			if tt.shard != nil {
				b = tt.shard(b)
			}
			if tt.edit != nil {
				mf = tt.edit(mf)
				if mf == string(manifest) {
					t.Fatal("the edit changed nothing")
				}
			}
			if err := os.WriteFile(shard1, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, warehouse.ManifestName), []byte(mf), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := runPython(t, py, dir, "--digests")
			if err == nil || !strings.Contains(stderr, tt.want) {
				t.Fatalf("python: %v\nstderr %s\nwant %q", err, stderr, tt.want)
			}
		})
	}
	// Restored, it reads again.
	os.WriteFile(shard1, original, 0o644)
	os.WriteFile(filepath.Join(dir, warehouse.ManifestName), manifest, 0o644)
	if _, stderr, err := runPython(t, py, dir, "--digests"); err != nil {
		t.Fatalf("restored warehouse: %v\n%s", err, stderr)
	}
}
