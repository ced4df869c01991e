package container

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

var update = flag.Bool("update", false, "rewrite the FuzzNewReader seed corpus in testdata/fuzz from testdata/golden")

const goldenDir = "testdata/golden"

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseGolden(t testing.TB, name string) *Reader {
	t.Helper()
	b := readGolden(t, name)
	r, err := NewReader(bytes.NewReader(b), int64(len(b)), name, Limits{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// TestGoldenProvenance checks the copied reference files against the sha256
// table of testdata/golden/SOURCES.md, so a changed copy cannot pass
// silently.
func TestGoldenProvenance(t *testing.T) {
	f, err := os.Open(filepath.Join(goldenDir, "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checked := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "|")
		if len(cols) < 5 || !strings.Contains(cols[1], ".") || strings.TrimSpace(cols[1]) == "file" {
			continue
		}
		name, size, sum := strings.TrimSpace(cols[1]), strings.TrimSpace(cols[2]), strings.TrimSpace(cols[3])
		b := readGolden(t, name)
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum || strconv.Itoa(len(b)) != size {
			t.Errorf("%s: %d bytes sha256 %x, SOURCES.md says %s bytes %s", name, len(b), got, size, sum)
		}
		checked++
	}
	if checked != 5 {
		t.Fatalf("checked %d files from SOURCES.md, want 5", checked)
	}
}

// TestReferenceHashes asserts the reference values of golden_hashes.json
// with the hash functions the reader uses.
func TestReferenceHashes(t *testing.T) {
	var ref struct {
		CRC32CHello  string `json:"crc32c_hello"`
		XXMetaManif  string `json:"xxhash64_meta_manifest"`
		XXSignalObs  string `json:"xxhash64_signal_obs"`
		DTypeSizes   map[string]int
		Unrecognized map[string]any `json:"-"`
	}
	if err := json.Unmarshal(readGolden(t, "golden_hashes.json"), &ref); err != nil {
		t.Fatal(err)
	}
	hexOf := func(v uint64) string { return fmt.Sprintf("0x%x", v) }
	for _, c := range []struct{ what, got, want string }{
		{`CRC32C("hello")`, hexOf(uint64(Checksum([]byte("hello")))), ref.CRC32CHello},
		{`xxHash64("meta/manifest")`, hexOf(xxhash.Sum64String("meta/manifest")), ref.XXMetaManif},
		{`xxHash64("signal/obs")`, hexOf(xxhash.Sum64String("signal/obs")), ref.XXSignalObs},
	} {
		if c.got != c.want || c.want == "" {
			t.Errorf("%s = %s, golden_hashes.json says %q", c.what, c.got, c.want)
		}
	}
}

// goldenEntry is what the reference generator (golden/generate.go) says it
// wrote for one block.
type goldenEntry struct {
	name     string
	flags    uint16
	origSize uint64
	content  uint16
	check    func(t *testing.T, data []byte) // nil: size and CRC only
}

func f32At(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

func allF32(want func(i int) float32) func(t *testing.T, b []byte) {
	return func(t *testing.T, b []byte) {
		t.Helper()
		for i := range len(b) / 4 {
			if got := f32At(b, i); got != want(i) {
				t.Fatalf("element %d = %v, want %v", i, got, want(i))
			}
		}
	}
}

func doneLast(t *testing.T, b []byte) {
	t.Helper()
	for i, v := range b {
		want := byte(0)
		if i == len(b)-1 {
			want = 1
		}
		if v != want {
			t.Fatalf("done[%d] = %d, want %d", i, v, want)
		}
	}
}

func jsonHas(keys ...string) func(t *testing.T, b []byte) {
	return func(t *testing.T, b []byte) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Fatalf("JSON lacks %q: %s", k, b)
			}
		}
	}
}

// TestGoldenFiles reads every block of every reference file and checks what
// the reference generator says it wrote: names in order, flags, sizes,
// content types, and the values of the signal blocks.
func TestGoldenFiles(t *testing.T) {
	alt := func(a, b float32) func(int) float32 {
		return func(i int) float32 {
			if i%2 == 0 {
				return a
			}
			return b
		}
	}
	cases := []struct {
		file    string
		align   uint8
		comp    Compression
		entries []goldenEntry
	}{
		{"simple_episode.wshard", 64, CompressNone, []goldenEntry{
			{"meta/wshard", 0, 54, ContentJSON, jsonHas("timebase", "version")},
			{"meta/episode", 0, 135, ContentJSON, jsonHas("episode_id", "env_id", "length_T", "timestep_range")},
			{"meta/channels", 0, 154, ContentJSON, jsonHas("channels")},
			{"signal/state", 0, 160, ContentRaw, allF32(func(i int) float32 { return float32(i) })},
			{"action/ctrl", 0, 80, ContentRaw, allF32(alt(0.1, 0.2))},
			{"reward", 0, 40, ContentRaw, allF32(alt(1.0, 0.5))},
			{"done", 0, 10, ContentRaw, doneLast},
		}},
		{"dtype_zoo.wshard", 64, CompressNone, []goldenEntry{
			{"meta/wshard", 0, 53, ContentJSON, nil},
			{"meta/episode", 0, 140, ContentJSON, nil},
			{"meta/channels", 0, 379, ContentJSON, jsonHas("channels")},
			{"signal/f32_ch", 0, 16, ContentRaw, allF32(func(i int) float32 { return float32(i + 1) })},
			{"signal/f64_ch", 0, 32, ContentRaw, func(t *testing.T, b []byte) {
				for i := range 4 {
					if got := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])); got != float64(10*(i+1)) {
						t.Fatalf("f64[%d] = %v", i, got)
					}
				}
			}},
			{"signal/i32_ch", 0, 16, ContentRaw, func(t *testing.T, b []byte) {
				want := []int32{-1, 0, 1, math.MaxInt32}
				for i, w := range want {
					if got := int32(binary.LittleEndian.Uint32(b[4*i:])); got != w {
						t.Fatalf("i32[%d] = %d, want %d", i, got, w)
					}
				}
			}},
			{"signal/u8_ch", 0, 4, ContentRaw, func(t *testing.T, b []byte) {
				if !bytes.Equal(b, []byte{0, 127, 255, 42}) {
					t.Fatalf("u8 = %v", b)
				}
			}},
			{"signal/bf16_ch", 0, 8, ContentRaw, func(t *testing.T, b []byte) {
				want := []uint16{0x3F80, 0x4000, 0x4040, 0x4080}
				for i, w := range want {
					if got := binary.LittleEndian.Uint16(b[2*i:]); got != w {
						t.Fatalf("bf16[%d] = 0x%04x, want 0x%04x", i, got, w)
					}
				}
			}},
			{"reward", 0, 16, ContentRaw, allF32(func(int) float32 { return 0 })},
			{"done", 0, 4, ContentRaw, doneLast},
		}},
		{"per_block_compressed.wshard", 64, CompressZstd, []goldenEntry{
			{"meta/wshard", 0, 54, ContentJSON, nil},
			{"meta/episode", 0, 149, ContentJSON, nil},
			{"meta/channels", 0, 81, ContentJSON, nil},
			{"signal/obs", EntryCompressed | EntryZstd, 3200, ContentRaw, allF32(func(int) float32 { return 1.25 })},
			{"reward", EntryCompressed | EntryZstd, 400, ContentRaw, allF32(func(int) float32 { return 1 })},
			{"done", 0, 100, ContentRaw, doneLast},
		}},
		{"omen_uncert.wshard", 64, CompressNone, []goldenEntry{
			{"meta/wshard", 0, 77, ContentJSON, jsonHas("residual_edges")},
			{"meta/episode", 0, 144, ContentJSON, nil},
			{"meta/channels", 0, 166, ContentJSON, nil},
			{"signal/joint_pos", 0, 120, ContentRaw, allF32(func(i int) float32 { return float32(i) * 0.1 })},
			{"action/torque", 0, 120, ContentRaw, allF32(func(i int) float32 { return float32(i) * 0.01 })},
			{"reward", 0, 40, ContentRaw, allF32(func(i int) float32 { return float32(i) * 0.5 })},
			{"done", 0, 10, ContentRaw, doneLast},
			{"omen/joint_pos/dreamer", 0, 120, ContentRaw, allF32(func(i int) float32 { return float32(float32(i)*0.1) + 0.01 })},
			{"uncert/joint_pos/dreamer/variance", 0, 120, ContentRaw, allF32(func(int) float32 { return 0.05 })},
			{"residual/joint_pos/sign2nddiff", 0, 2, ContentRaw, nil},
		}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r := parseGolden(t, c.file)
			h := r.Header()
			if h.Role != RoleWShard || h.Flags != 0xA2 || h.Alignment != c.align || h.Compression != c.comp {
				t.Fatalf("header %+v", h)
			}
			if len(r.Entries()) != len(c.entries) {
				t.Fatalf("%d entries, want %d", len(r.Entries()), len(c.entries))
			}
			for i, want := range c.entries {
				e := r.Entries()[i]
				if e.Name != want.name || e.Flags != want.flags || e.OrigSize != want.origSize || e.ContentType != want.content {
					t.Fatalf("entry %d = %+v, want %+v", i, e, want)
				}
				if got, ok := r.Lookup(want.name); !ok || got != e {
					t.Fatalf("Lookup(%q) = %+v, %v", want.name, got, ok)
				}
				if e.Offset%uint64(c.align) != 0 {
					t.Fatalf("%s at %d is not %d-aligned", e.Name, e.Offset, c.align)
				}
				data, err := r.ReadBlock(e)
				if err != nil {
					t.Fatal(err)
				}
				if uint64(len(data)) != want.origSize {
					t.Fatalf("%s: %d bytes", e.Name, len(data))
				}
				if err := r.Verify(e); err != nil {
					t.Fatal(err)
				}
				if want.check != nil {
					t.Run(e.Name, func(t *testing.T) { want.check(t, data) })
				}
			}
			if _, ok := r.Lookup("signal/absent"); ok {
				t.Fatal("Lookup found a block that is not there")
			}
		})
	}
}

// TestWriterReproducesGolden rebuilds each reference file from its blocks
// with Writer and compares the bytes: the writer lays files out exactly as
// the reference implementation does.
func TestWriterReproducesGolden(t *testing.T) {
	for _, name := range []string{"simple_episode.wshard", "dtype_zoo.wshard", "per_block_compressed.wshard", "omen_uncert.wshard"} {
		t.Run(name, func(t *testing.T) {
			want := readGolden(t, name)
			r := parseGolden(t, name)
			w := Writer{Role: r.Header().Role, Alignment: r.Header().Alignment, Compression: r.Header().Compression}
			for _, e := range r.Entries() {
				data, err := r.ReadBlock(e)
				if err != nil {
					t.Fatal(err)
				}
				w.Add(Block{Name: e.Name, Data: data, Compression: e.Compression(), ContentType: e.ContentType})
			}
			got, err := w.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("writer output differs from the reference file (%d vs %d bytes); first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestUpdateFuzzCorpus rewrites the FuzzNewReader seeds under -update.
func TestUpdateFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/FuzzNewReader")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzNewReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"simple_episode", "dtype_zoo", "per_block_compressed", "omen_uncert"} {
		b := readGolden(t, name+".wshard")
		seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "golden-"+name), []byte(seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lz := handmadeLZ4Container()
	seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(lz)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, "handmade-lz4"), []byte(seed), 0o644); err != nil {
		t.Fatal(err)
	}
}
