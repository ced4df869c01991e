package roverd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ulikunitz/xz"

	"warehouse-etl/sources"
)

// demoRoot is the committed demo (testdata/roverdgen).
const demoRoot = "../../testdata/roverd"

var demoExtras = []string{"imu/acc", "imu/avel", "imu/rot"}

func demoOptions() Options {
	return Options{Extras: demoExtras, ToleranceMs: 50}
}

// copyDemo copies the demo into a temp dir that a test may damage.
func copyDemo(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "roverd")
	if err := os.CopyFS(dst, os.DirFS(demoRoot)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func mustNew(t testing.TB, root string, opts Options) *Source {
	t.Helper()
	s, err := New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scanAll scans and returns every sample, checking the Seq contract.
func scanAll(t testing.TB, s *Source) []*sources.Sample {
	t.Helper()
	var out []*sources.Sample
	err := s.Scan(context.Background(), func(smp *sources.Sample) error {
		if smp.Seq != int64(len(out)) {
			t.Fatalf("sample seq %d, want %d", smp.Seq, len(out))
		}
		c := *smp
		out = append(out, &c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func f64bytes(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// xzBytes compresses with ulikunitz/xz's writer: a different encoder than
// the liblzma the fixtures come from, and not the code under test.
func xzBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// meta is a meta.json channel entry for tests.
func meta(format, typ string, shape ...int) map[string]any {
	if shape == nil {
		shape = []int{}
	}
	return map[string]any{"format": format, "type": typ, "shape": shape, "desc": "test"}
}

var tsMeta = meta("raw", "f8")

// The demo recordings as testdata/roverdgen/main.go documents them.
type demoRecording struct {
	name        string
	t0          float64
	frames      int // frames used: min(camera ts, video)
	blue        int
	base        int
	imuN        int
	gap0, gap1  int
	imuCommon   int // IMU records used
	truncated   bool
	noMatchFrom int // frames [noMatchFrom, noMatchTo] have no IMU record within 50 ms
	noMatchTo   int
}

var demo = []demoRecording{
	{name: "drive_2", t0: 1700000000.0, frames: 12, blue: 60, base: 0, imuN: 120, gap0: 35, gap1: 68, imuCommon: 86, noMatchFrom: 4, noMatchTo: 6},
	{name: "drive_10", t0: 1700000100.0, frames: 8, blue: 160, base: 1000, imuN: 90, gap0: 1, gap1: 0, imuCommon: 90, truncated: true, noMatchFrom: 1, noMatchTo: 0},
}

// imuRecords are the IMU records on disk: each one's time and counter n.
func (r demoRecording) imuRecords() (ts []float64, n []int) {
	for i := range r.imuN {
		if i >= r.gap0 && i <= r.gap1 {
			continue
		}
		ts = append(ts, r.t0-0.018+0.01*float64(i))
		n = append(n, i)
	}
	return ts, n
}

// imuValues are acc, avel, rot for counter n, as float32 like the files.
func (r demoRecording) imuValues(n int) []float32 {
	m := float64(r.base + n)
	a := 0.05 * m
	c, s := math.Cos(a), math.Sin(a)
	return []float32{
		float32(0.01 * m), float32(-0.02 * m), float32(9.81 + 0.001*m),
		float32(math.Sin(0.1 * m)), float32(math.Cos(0.1 * m)), 0.25,
		float32(c), float32(-s), 0, float32(s), float32(c), 0, 0, 0, 1,
	}
}

// nearest is the join rule written out by exhaustive search: the record
// with the smallest |ts - t|, the earlier one on a tie, if within tol.
func nearest(ts []float64, t, tol float64) (int, bool) {
	best, bestD := -1, math.Inf(1)
	for i, v := range ts {
		if d := math.Abs(v - t); d < bestD {
			best, bestD = i, d
		}
	}
	return best, best >= 0 && bestD <= tol
}
