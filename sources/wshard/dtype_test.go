package wshard

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestDTypeSizes checks all 13 dtypes against the reference sizes in
// golden_hashes.json and that every alias names the same dtype.
func TestDTypeSizes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(goldenDir, "golden_hashes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		DTypeSizes map[string]int `json:"dtype_sizes"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.DTypeSizes) != 13 {
		t.Fatalf("golden_hashes.json lists %d dtypes", len(ref.DTypeSizes))
	}
	for name, size := range ref.DTypeSizes {
		d, err := ParseDType(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Size() != size || d.String() != name {
			t.Errorf("%s: size %d name %q, reference size %d", name, d.Size(), d, size)
		}
	}
	for alias, canonical := range map[string]string{
		"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
		"int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
		"uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool_": "bool",
	} {
		a, err1 := ParseDType(alias)
		c, err2 := ParseDType(canonical)
		if err1 != nil || err2 != nil || a != c {
			t.Errorf("alias %s -> %v (%v), canonical %s -> %v (%v)", alias, a, err1, canonical, c, err2)
		}
	}
	for _, bad := range []string{"", "F32", "float", "qint4", "complex64"} {
		if _, err := ParseDType(bad); err == nil {
			t.Errorf("ParseDType(%q) accepted", bad)
		}
	}
}

// TestFloat32s converts hand-written little-endian elements of every dtype.
// Expected values are spelled as literals or bit patterns.
func TestFloat32s(t *testing.T) {
	f32 := math.Float32frombits
	cases := []struct {
		dtype string
		raw   []byte
		want  []float32
	}{
		{"f32", []byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f}, []float32{1, f32(0x7fc00000)}},
		{"f64", []byte{0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, []float32{f32(0x3dcccccd), float32(math.Inf(1))}},
		// f16: 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal), +Inf, a NaN.
		{"f16", []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x7c, 0x01, 0x7e}, []float32{1, -2, 65504, f32(0x33800000), float32(math.Inf(1)), f32(0x7fc02000)}},
		// bf16: 1.0, -123.5 (0xC2F7), the smallest subnormal (0x0001), -Inf.
		{"bf16", []byte{0x80, 0x3f, 0xf7, 0xc2, 0x01, 0x00, 0x80, 0xff}, []float32{1, -123.5, f32(0x00010000), float32(math.Inf(-1))}},
		{"i64", []byte{0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0, 0}, []float32{-5, 1 << 40}},
		{"u64", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []float32{f32(0x5f800000)}},
		{"i32", []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0x80}, []float32{f32(0x4f000000), -2147483648}},
		{"u32", []byte{0xff, 0xff, 0xff, 0xff}, []float32{f32(0x4f800000)}},
		{"i16", []byte{0x00, 0x80, 0xff, 0x7f}, []float32{-32768, 32767}},
		{"u16", []byte{0xff, 0xff}, []float32{65535}},
		{"i8", []byte{0x80, 0x7f, 0xff}, []float32{-128, 127, -1}},
		{"u8", []byte{0, 42, 255}, []float32{0, 42, 255}},
		{"bool", []byte{0, 1, 2}, []float32{0, 1, 1}},
	}
	for _, c := range cases {
		d, err := ParseDType(c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(c.want))
		d.Float32s(got, c.raw)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
				t.Errorf("%s[%d] = %v (0x%08x), want %v (0x%08x)", c.dtype, i, got[i], math.Float32bits(got[i]), c.want[i], math.Float32bits(c.want[i]))
			}
		}
	}
}

// TestEncodeInvertsFloat32s: the test-data encoder and the reader agree on
// values every dtype represents exactly.
func TestEncodeInvertsFloat32s(t *testing.T) {
	vals := []float64{0, 1, 2, 3, 64, 100, 127}
	for d := F32; d <= Bool; d++ {
		in := vals
		if d == Bool {
			in = []float64{0, 1, 0, 1}
		}
		raw, err := Encode(d, in)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(in))
		d.Float32s(got, raw)
		for i := range in {
			if float64(got[i]) != in[i] {
				t.Errorf("%s: %v -> %v", d, in[i], got[i])
			}
		}
	}
}
