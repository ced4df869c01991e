// Package warehousetest writes small warehouse versions for tests, straight
// through shard.Writer and a hand-made manifest (no pipeline), with every
// value a closed-form function of the sample index, so that a test
// computes what a reader must return independently of the reader: the
// Fixture of the tests of package warehouse, of verify, and of whatever
// else reads a version.
package warehousetest

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
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

// Fixture is a warehouse written by the test straight through shard.Writer
// (no pipeline), with every value a closed-form function of the sample
// index, so expectations are computed here independently of the reader.
type Fixture struct {
	Root   string // output root holding latest -> the version
	Dir    string // the version directory
	M      *warehouse.Manifest
	Layout shard.Layout
}

// Spec is the shape of a fixture.
type Spec struct {
	DType      shard.DType
	Width      int
	Height     int
	MaxBoxes   int
	Extras     [][]int // shapes of the extras
	ShardSizes []int   // samples per shard, in order
}

// DefaultSpec is the fixture most tests use: F16, 6x4 pixels, 3 boxes,
// shards of 4, 4 and 3 samples.
func DefaultSpec() Spec {
	return Spec{DType: shard.F16, Width: 6, Height: 4, MaxBoxes: 3, ShardSizes: []int{4, 4, 3}}
}

// WantImageValue and the other Want functions are the expected values of
// sample i. Every value is exactly representable in f16
// (multiples of 1/128 below 4 in magnitude; box coordinates in sixteenths).
func WantImageValue(i, k int) float32 { return float32((i*131+k*7)%1024-512) / 128 }

func WantBoxes(i, maxBoxes int) [][4]float32 {
	out := make([][4]float32, i%(maxBoxes+1))
	for j := range out {
		out[j] = [4]float32{float32(j) / 16, float32(i%4) / 8, float32(j+1) / 16, 7.0 / 8}
	}
	return out
}

func WantClasses(i, maxBoxes int) []int32 {
	out := make([]int32, i%(maxBoxes+1))
	for j := range out {
		out[j] = int32((i + j) % 3)
	}
	return out
}

func WantMeta(i int) shard.Meta {
	return shard.Meta{
		SourceIndex: uint32(i % 2), FrameID: uint64(1000 + i), InputSeq: uint64(2*i + 1),
		UnixTimeNs: 1_700_000_000_000_000_000 + int64(i), SimTime: float64(i) * 0.25,
		SrcWidth: 200, SrcHeight: 150, ResizedWidth: 6, ResizedHeight: 3, PadX: 0, PadY: 1,
		ScaleX: 0.03, ScaleY: 0.02, BoxesDropped: uint32(i % 2),
	}
}

func WantExtras(i, n int) []float32 {
	out := make([]float32, n)
	for e := range out {
		out[e] = float32(i) + float32(e)/4
	}
	return out
}

// WantImageBytes encodes sample i's image in dtype d, little-endian.
func WantImageBytes(l shard.Layout, i int) []byte {
	n := l.Channels * l.Height * l.Width
	d := l.DType.Size()
	out := make([]byte, n*d)
	for k := range n {
		v := WantImageValue(i, k)
		if l.DType == shard.F16 {
			binary.LittleEndian.PutUint16(out[2*k:], float16.Fromfloat32(v).Bits())
		} else {
			binary.LittleEndian.PutUint32(out[4*k:], math.Float32bits(v))
		}
	}
	return out
}

func Write(t testing.TB, spec Spec) *Fixture {
	t.Helper()
	l := shard.Layout{DType: spec.DType, Width: spec.Width, Height: spec.Height, Channels: 3, MaxBoxes: spec.MaxBoxes}
	var extras []warehouse.Extra
	for e, shape := range spec.Extras {
		n := 1
		for _, d := range shape {
			n *= d
		}
		extras = append(extras, warehouse.Extra{Name: fmt.Sprintf("extra%d", e), Shape: shape, SourceDType: "f32", Offset: l.ExtraF32})
		l.ExtraF32 += n
	}
	root := filepath.Join(t.TempDir(), "out")
	version := sha256.Sum256([]byte(fmt.Sprintf("%+v", spec)))
	id := warehouse.ID(version)
	dir := filepath.Join(root, id.DirName())
	if err := os.MkdirAll(filepath.Join(dir, "shards"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &warehouse.Manifest{
		FormatVersion: warehouse.FormatVersion,
		Version:       id.String(),
		VersionRecipe: "test=\"Fixture\"\n",
		CodeVersion:   "warehouse-etl/test",
		DatasetRoot:   "testdata",
		Source:        warehouse.SourceInfo{Kind: "capture", Root: "testdata"},
		Transform: warehouse.Transform{TargetWidth: l.Width, TargetHeight: l.Height, Channels: 3, ResizeMode: "letterbox",
			DType: strings.ToLower(l.DType.String()), MaxBoxes: l.MaxBoxes, Decoder: "test"},
		DefaultDType:        l.DType.String(),
		DefaultShardVersion: uint32(l.Version()),
		Thresholds:          validate.Thresholds{Invalid: validate.Limit{MaxRatio: Ptr(0.5), Action: validate.ActionFail}},
		Classes:             []warehouse.Class{{Index: 0, Name: "polyp"}, {Index: 1, Name: "instrument"}, {Index: 2, Name: "object"}},
		Sources:             []warehouse.SourceEntry{{Index: 0, Name: "run_1"}, {Index: 1, Name: "run_2"}},
		Extras:              extras,
		Files:               warehouse.Files{Samples: warehouse.SamplesName, Fingerprint: warehouse.FingerprintName, BuildReport: warehouse.BuildReportName},
	}
	if m.Extras == nil {
		m.Extras = []warehouse.Extra{}
	}
	next := 0
	for k, n := range spec.ShardSizes {
		id := fmt.Sprintf("shard-%05d", k)
		rel := "shards/" + id + ".twh"
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
			boxes := WantBoxes(i, l.MaxBoxes)
			if err := w.Append(shard.Sample{Image: WantImageBytes(l, i), Boxes: boxes, ClassIndex: WantClasses(i, l.MaxBoxes),
				Meta: WantMeta(i), Extras: WantExtras(i, l.ExtraF32)}); err != nil {
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
		m.Shards = append(m.Shards, warehouse.Shard{ID: id, RelativePath: rel, ShardVersion: uint32(l.Version()), FirstSample: int64(next - n), Samples: int64(n),
			Width: l.Width, Height: l.Height, Channels: 3, MaxBoxes: l.MaxBoxes, DType: l.DType.String(), Endianness: "Little",
			Bytes: res.Bytes, ChecksumSHA256: fmt.Sprintf("%x", res.SHA256)})
	}
	m.Samples = int64(next)
	m.InputSamples = int64(next + 1)
	m.SamplesPerShard = spec.ShardSizes[0]
	m.Summary = validate.Summary{Total: validate.Counts{Total: int64(next + 1), NonEmpty: int64(next + 1), Invalid: 1, Kept: int64(next), Skipped: 1}}
	fx := &Fixture{Root: root, Dir: dir, M: m, Layout: l}
	fx.WriteManifest(t)
	if err := os.Symlink(id.DirName(), filepath.Join(root, warehouse.LatestName)); err != nil {
		t.Fatal(err)
	}
	return fx
}

func Ptr[T any](v T) *T { return &v }

// WriteManifest (re)writes fx.M as the version's manifest.json.
func (fx *Fixture) WriteManifest(t testing.TB) {
	t.Helper()
	raw, err := fx.M.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.Dir, warehouse.ManifestName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ShardPath is the absolute path of shard k.
func (fx *Fixture) ShardPath(k int) string {
	return filepath.Join(fx.Dir, filepath.FromSlash(fx.M.Shards[k].RelativePath))
}

// PatchShard overwrites bytes of shard k at off.
func (fx *Fixture) PatchShard(t testing.TB, k int, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(fx.ShardPath(k), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// FlipByte inverts every bit of one byte of shard k.
func (fx *Fixture) FlipByte(t testing.TB, k int, off int64) {
	t.Helper()
	raw, err := os.ReadFile(fx.ShardPath(k))
	if err != nil {
		t.Fatal(err)
	}
	fx.PatchShard(t, k, off, []byte{^raw[off]})
}
