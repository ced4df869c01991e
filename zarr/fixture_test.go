package zarr

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// fixture is a warehouse version written by the test straight through
// shard.Writer (no pipeline), every value a closed-form function of the
// sample index, so the expected store content is computed here without the
// exporter or the shard reader.
type fixture struct {
	root   string // output root with latest -> the version
	dir    string // the version directory
	m      *warehouse.Manifest
	layout shard.Layout
}

type fixtureExtra struct {
	name  string
	shape []int
}

type fixtureSpec struct {
	dtype      shard.DType
	width      int
	height     int
	maxBoxes   int
	extras     []fixtureExtra
	shardSizes []int // samples per warehouse shard
}

func smallSpec(d shard.DType) fixtureSpec {
	return fixtureSpec{dtype: d, width: 5, height: 3, maxBoxes: 3, shardSizes: []int{4, 4, 3},
		extras: []fixtureExtra{{"imu/acc", []int{3}}, {"reward", []int{1}}, {"joint", []int{2, 2}}}}
}

// Every value is exactly representable in f16: multiples of 1/128 below 4
// in magnitude, box coordinates in sixteenths, extras in quarters.
func wantImageValue(i, k int) float32 { return float32((i*131+k*7)%1024-512) / 128 }

func wantBoxCount(i, maxBoxes int) int { return i % (maxBoxes + 1) }

func wantBox(i, j int) [4]float32 {
	return [4]float32{float32(j) / 16, float32(i%4) / 8, float32(j+1) / 16, 7.0 / 8}
}

func wantClass(i, j int) int32 { return int32((i + j) % 3) }

func wantMeta(i int) shard.Meta {
	return shard.Meta{
		SourceIndex: uint32(i % 2), FrameID: uint64(1000 + i), InputSeq: uint64(2*i + 1),
		UnixTimeNs: 1_700_000_000_000_000_000 + int64(i), SimTime: float64(i) * 0.25,
		SrcWidth: 200 + uint32(i), SrcHeight: 150, ResizedWidth: 5, ResizedHeight: 3, PadX: uint32(i % 3), PadY: 1,
		ScaleX: 0.03, ScaleY: 0.02 * float32(i+1), BoxesDropped: uint32(i % 2),
	}
}

func wantExtra(i, e int) float32 { return float32(i) + float32(e)/4 }

// putFloat appends v in dtype d, little-endian.
func putFloat(dst []byte, d shard.DType, v float32) []byte {
	if d == shard.F16 {
		return binary.LittleEndian.AppendUint16(dst, float16.Fromfloat32(v).Bits())
	}
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
}

func writeFixture(t testing.TB, spec fixtureSpec) *fixture {
	t.Helper()
	l := shard.Layout{DType: spec.dtype, Width: spec.width, Height: spec.height, Channels: 3, MaxBoxes: spec.maxBoxes}
	extras := []warehouse.Extra{}
	for _, e := range spec.extras {
		n := 1
		for _, d := range e.shape {
			n *= d
		}
		extras = append(extras, warehouse.Extra{Name: e.name, Shape: e.shape, SourceDType: "f64", Offset: l.ExtraF32})
		l.ExtraF32 += n
	}
	root := filepath.Join(t.TempDir(), "out")
	id := warehouse.ID(sha256.Sum256([]byte(fmt.Sprintf("%+v", spec))))
	dir := filepath.Join(root, id.DirName())
	if err := os.MkdirAll(filepath.Join(dir, "shards"), 0o755); err != nil {
		t.Fatal(err)
	}
	ratio := 0.5
	m := &warehouse.Manifest{
		FormatVersion: warehouse.FormatVersion,
		Version:       id.String(),
		VersionRecipe: "test=\"fixture\"\n",
		CodeVersion:   "warehouse-etl/test",
		DatasetRoot:   "testdata",
		Source:        warehouse.SourceInfo{Kind: "capture", Root: "testdata"},
		Transform: warehouse.Transform{TargetWidth: l.Width, TargetHeight: l.Height, Channels: 3, ResizeMode: "letterbox",
			DType: strings.ToLower(l.DType.String()), MaxBoxes: l.MaxBoxes, Decoder: "test"},
		DefaultDType:        l.DType.String(),
		DefaultShardVersion: uint32(l.Version()),
		CreatedAtMs:         1_700_000_000_000,
		Thresholds:          validate.Thresholds{Invalid: validate.Limit{MaxRatio: &ratio, Action: validate.ActionFail}},
		Classes:             []warehouse.Class{{Index: 0, Name: "polyp"}, {Index: 1, Name: "instrument"}, {Index: 2, Name: "object"}},
		Sources:             []warehouse.SourceEntry{{Index: 0, Name: "run_1"}, {Index: 1, Name: "run_2"}},
		Extras:              extras,
		Files:               warehouse.Files{Samples: warehouse.SamplesName, Fingerprint: warehouse.FingerprintName, BuildReport: warehouse.BuildReportName},
	}
	next := 0
	for k, n := range spec.shardSizes {
		sid := fmt.Sprintf("shard-%05d", k)
		rel := "shards/" + sid + ".twh"
		f, err := os.Create(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		w, err := shard.NewWriter(f, l, n)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			i := next
			var img []byte
			for k := range l.Channels * l.Height * l.Width {
				img = putFloat(img, l.DType, wantImageValue(i, k))
			}
			var boxes [][4]float32
			var classes []int32
			for j := range wantBoxCount(i, l.MaxBoxes) {
				boxes = append(boxes, wantBox(i, j))
				classes = append(classes, wantClass(i, j))
			}
			ex := make([]float32, l.ExtraF32)
			for e := range ex {
				ex[e] = wantExtra(i, e)
			}
			if err := w.Append(shard.Sample{Image: img, Boxes: boxes, ClassIndex: classes, Meta: wantMeta(i), Extras: ex}); err != nil {
				t.Fatal(err)
			}
			next++
		}
		res, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		m.Shards = append(m.Shards, warehouse.Shard{ID: sid, RelativePath: rel, ShardVersion: uint32(l.Version()), FirstSample: int64(next - n), Samples: int64(n),
			Width: l.Width, Height: l.Height, Channels: 3, MaxBoxes: l.MaxBoxes, DType: l.DType.String(), Endianness: "Little",
			Bytes: res.Bytes, ChecksumSHA256: fmt.Sprintf("%x", res.SHA256)})
	}
	m.Samples = int64(next)
	m.InputSamples = int64(next + 1)
	if len(spec.shardSizes) > 0 {
		m.SamplesPerShard = spec.shardSizes[0]
	}
	m.Summary = validate.Summary{Total: validate.Counts{Total: int64(next + 1), NonEmpty: int64(next + 1), Invalid: 1, Kept: int64(next), Skipped: 1}}
	fx := &fixture{root: root, dir: dir, m: m, layout: l}
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, warehouse.ManifestName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(id.DirName(), filepath.Join(root, warehouse.LatestName)); err != nil {
		t.Fatal(err)
	}
	return fx
}

// wantArrays lists every array the store of fx must hold, with the
// expected bytes of sample i, computed from the formulas above.
type wantArray struct {
	name     string
	dataType string
	shape    []int64 // per sample
	dims     []string
	fill     any
	sample   func(i int) []byte
}

func (fx *fixture) wantArrays() []wantArray {
	l := fx.layout
	b := l.MaxBoxes
	floatType := map[shard.DType]string{shard.F16: "float16", shard.F32: "float32"}[l.DType]
	u32 := func(get func(m shard.Meta) uint32) func(int) []byte {
		return func(i int) []byte { return binary.LittleEndian.AppendUint32(nil, get(wantMeta(i))) }
	}
	out := []wantArray{
		{"images", floatType, []int64{3, int64(l.Height), int64(l.Width)}, []string{"sample", "channel", "y", "x"}, 0.0, func(i int) []byte {
			var o []byte
			for k := range 3 * l.Height * l.Width {
				o = putFloat(o, l.DType, wantImageValue(i, k))
			}
			return o
		}},
		{"boxes", floatType, []int64{int64(b), 4}, []string{"sample", "box", "coord"}, 0.0, func(i int) []byte {
			var o []byte
			for j := range b {
				var box [4]float32
				if j < wantBoxCount(i, b) {
					box = wantBox(i, j)
				}
				for _, v := range box {
					o = putFloat(o, l.DType, v)
				}
			}
			return o
		}},
		{"box_mask", floatType, []int64{int64(b)}, []string{"sample", "box"}, 0.0, func(i int) []byte {
			var o []byte
			for j := range b {
				o = putFloat(o, l.DType, map[bool]float32{true: 1, false: 0}[j < wantBoxCount(i, b)])
			}
			return o
		}},
		{"class_index", "int32", []int64{int64(b)}, []string{"sample", "box"}, -1.0, func(i int) []byte {
			var o []byte
			for j := range b {
				c := int32(-1)
				if j < wantBoxCount(i, b) {
					c = wantClass(i, j)
				}
				o = binary.LittleEndian.AppendUint32(o, uint32(c))
			}
			return o
		}},
		{"box_count", "uint32", nil, []string{"sample"}, 0.0, func(i int) []byte {
			return binary.LittleEndian.AppendUint32(nil, uint32(wantBoxCount(i, b)))
		}},
		{"source_index", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.SourceIndex })},
		{"frame_id", "uint64", nil, []string{"sample"}, 0.0, func(i int) []byte { return binary.LittleEndian.AppendUint64(nil, wantMeta(i).FrameID) }},
		{"input_seq", "uint64", nil, []string{"sample"}, 0.0, func(i int) []byte { return binary.LittleEndian.AppendUint64(nil, wantMeta(i).InputSeq) }},
		{"unix_time_ns", "int64", nil, []string{"sample"}, 0.0, func(i int) []byte {
			return binary.LittleEndian.AppendUint64(nil, uint64(wantMeta(i).UnixTimeNs))
		}},
		{"sim_time", "float64", nil, []string{"sample"}, 0.0, func(i int) []byte {
			return binary.LittleEndian.AppendUint64(nil, math.Float64bits(wantMeta(i).SimTime))
		}},
		{"src_width", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.SrcWidth })},
		{"src_height", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.SrcHeight })},
		{"resized_width", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.ResizedWidth })},
		{"resized_height", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.ResizedHeight })},
		{"pad_x", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.PadX })},
		{"pad_y", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.PadY })},
		{"scale_x", "float32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return math.Float32bits(m.ScaleX) })},
		{"scale_y", "float32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return math.Float32bits(m.ScaleY) })},
		{"boxes_dropped", "uint32", nil, []string{"sample"}, 0.0, u32(func(m shard.Meta) uint32 { return m.BoxesDropped })},
	}
	for _, e := range fx.m.Extras {
		node := "extras." + strings.ReplaceAll(e.Name, "/", ".")
		shape := make([]int64, len(e.Shape))
		dims := []string{"sample"}
		n := 1
		for k, d := range e.Shape {
			shape[k] = int64(d)
			dims = append(dims, fmt.Sprintf("%s_%d", node, k))
			n *= d
		}
		off := e.Offset
		out = append(out, wantArray{node, "float32", shape, dims, 0.0, func(i int) []byte {
			var o []byte
			for k := range n {
				o = binary.LittleEndian.AppendUint32(o, math.Float32bits(wantExtra(i, off+k)))
			}
			return o
		}})
	}
	return out
}

// treeDigest maps every file under dir (relative, slash-separated) to the
// sha256 of its bytes (of its target, for a symlink).
func treeDigest(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		read := os.ReadFile
		if d.Type()&fs.ModeSymlink != 0 {
			read = func(p string) ([]byte, error) { l, err := os.Readlink(p); return []byte(l), err }
		}
		raw, err := read(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = sha256.Sum256(raw)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// crc32cBitwise is CRC-32C computed bit by bit from the reflected
// polynomial 0x82F63B78, independently of hash/crc32.
func crc32cBitwise(b []byte) uint32 {
	c := ^uint32(0)
	for _, x := range b {
		c ^= uint32(x)
		for range 8 {
			if c&1 == 1 {
				c = c>>1 ^ 0x82F63B78
			} else {
				c >>= 1
			}
		}
	}
	return ^c
}
