package roverd

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

func TestParseMeta(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // error message; "" for success
	}{
		{"reference example", `{"iq": {"format": "raw", "type": "i2", "shape": [64, 3, 4, 512], "desc": "Raw I/Q stream."},
			"ts": {"format": "raw", "type": "f8", "shape": [], "description": "Timestamp, in seconds."}}`, ""},
		{"args and unknown keys", `{"x": {"format": "lzmaf", "type": "u1", "shape": [2], "args": {"preset": 0}, "units": "m"}}`, ""},
		{"empty object", `{}`, ""},
		{"not JSON", `{ts: 1}`, "roverd: bad meta.json: not a JSON object: invalid character 't' looking for beginning of object key string"},
		{"array", `[1]`, "roverd: bad meta.json: not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{"null", `null`, "roverd: bad meta.json: not a JSON object: null"},
		{"empty", ``, "roverd: bad meta.json: not a JSON object: EOF"},
		{"trailing data", `{} {}`, "roverd: bad meta.json: not a JSON object: data after the JSON value"},
		{"channel not an object", `{"ts": 3}`, `roverd: bad meta.json: channel "ts": not a JSON object`},
		{"channel null", `{"ts": null}`, `roverd: bad meta.json: channel "ts": not a JSON object`},
		{"no shape", `{"ts": {"format": "raw", "type": "f8"}}`, `roverd: bad meta.json: channel "ts": "shape" is required`},
		{"no format", `{"ts": {"type": "f8", "shape": []}}`, `roverd: bad meta.json: channel "ts": "format" is required`},
		{"type not a string", `{"ts": {"format": "raw", "type": 8, "shape": []}}`, `roverd: bad meta.json: channel "ts": "type" must be a string`},
		{"desc not a string", `{"ts": {"format": "raw", "type": "f8", "shape": [], "desc": ["a"]}}`, `roverd: bad meta.json: channel "ts": "desc" must be a string`},
		{"shape not an array", `{"ts": {"format": "raw", "type": "f8", "shape": 3}}`, `roverd: bad meta.json: channel "ts": "shape" must be an array of integers`},
		{"first bad channel by name", `{"zz": 1, "aa": 2}`, `roverd: bad meta.json: channel "aa": not a JSON object`},
		{"negative dimension", `{"a": {"format": "raw", "type": "u1", "shape": [-1]}}`, `roverd: bad meta.json: channel "a": shape[0] = -1: not an integer in [0, 2^31)`},
		{"fractional dimension", `{"a": {"format": "raw", "type": "u1", "shape": [2.5]}}`, `roverd: bad meta.json: channel "a": shape[0] = 2.5: not an integer in [0, 2^31)`},
		{"string dimension", `{"a": {"format": "raw", "type": "u1", "shape": ["3"]}}`, `roverd: bad meta.json: channel "a": shape[0] = 3: not an integer in [0, 2^31)`},
		{"huge dimension", `{"a": {"format": "raw", "type": "u1", "shape": [1e30]}}`, `roverd: bad meta.json: channel "a": shape[0] = 1e30: not an integer in [0, 2^31)`},
		{"too many dimensions", `{"a": {"format": "raw", "type": "u1", "shape": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}`, `roverd: bad meta.json: channel "a": shape has 17 dimensions, more than 16`},
		{"path as a name", `{"../x": {"format": "raw", "type": "u1", "shape": []}}`, `roverd: bad meta.json: channel name "../x" is not a file name`},
		{"meta.json as a name", `{"meta.json": {"format": "raw", "type": "u1", "shape": []}}`, `roverd: bad meta.json: "meta.json" cannot be a channel name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeta([]byte(tc.in))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrMeta) || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant  %s\n(meta %+v)", err, tc.want, m)
			}
		})
	}
	m, err := ParseMeta([]byte(tests[0].in))
	if err != nil {
		t.Fatal(err)
	}
	iq, ts := m.Channels["iq"], m.Channels["ts"]
	if iq.Desc != "Raw I/Q stream." || ts.Desc != "Timestamp, in seconds." || !slices.Equal(iq.Shape, []int{64, 3, 4, 512}) || len(ts.Shape) != 0 {
		t.Fatalf("parsed %+v %+v", iq, ts)
	}
	c, err := m.Channel("iq")
	if err != nil || c.RecordBytes != 64*3*4*512*2 || c.Elements() != 64*3*4*512 {
		t.Fatalf("iq channel %+v, %v", c, err)
	}
	if _, err := m.timestamps(); err != nil {
		t.Fatal(err)
	}
}

func TestChannelErrors(t *testing.T) {
	m, err := ParseMeta([]byte(`{
		"big": {"format": "raw", "type": "f8", "shape": [65536, 65536]},
		"empty": {"format": "raw", "type": "f4", "shape": [0, 3]},
		"fmt": {"format": "hdf5", "type": "f4", "shape": []},
		"cplx": {"format": "raw", "type": "c8", "shape": []}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, want string }{
		{"big", `roverd: bad meta.json: channel "big": a record of shape [65536 65536] f8 is more than 536870912 bytes`},
		{"empty", `roverd: bad meta.json: channel "empty": shape [0 3] has no elements`},
		{"fmt", `roverd: bad meta.json: channel "fmt": unknown format "hdf5" (known: raw, lzma, lzmaf, mjpg, npz, jpg)`},
		{"cplx", `channel "cplx": roverd: unknown type name: "c8" (numpy size-in-bytes names: b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8)`},
		{"nope", `roverd: no such channel: channel "nope" is not declared (declared: big, cplx, empty, fmt)`},
	}
	for _, tc := range tests {
		if _, err := m.Channel(tc.name); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant  %s", tc.name, err, tc.want)
		}
	}
}

func TestParseDType(t *testing.T) {
	good := map[string]string{
		"f4": "f32", "<f4": "f32", "=f8": "f64", "|u1": "u8", "b1": "bool", "i1": "i8", "i2": "i16",
		"i4": "i32", "i8": "i64", "u2": "u16", "u4": "u32", "u8": "u64", "f2": "f16",
	}
	for in, want := range good {
		d, err := ParseDType(in)
		if err != nil || d.Canonical() != want {
			t.Errorf("ParseDType(%q) = %v %q, %v; want %s", in, d, d.Canonical(), err, want)
		}
	}
	for _, in := range []string{"", "f", "f3", "f16", "float32", "c8", "U4", "V12", "O", "|O", "M8", ">f4", "<f9", "f4 "} {
		if _, err := ParseDType(in); !errors.Is(err, ErrUnknownType) {
			t.Errorf("ParseDType(%q) err = %v", in, err)
		}
	}
}

// AppendFloat32 against values written out by hand for each type.
func TestAppendFloat32(t *testing.T) {
	tests := []struct {
		typ  string
		in   []byte
		want []float32
	}{
		{"b1", []byte{0, 1, 7}, []float32{0, 1, 1}},
		{"i1", []byte{0xFF, 0x7F}, []float32{-1, 127}},
		{"u1", []byte{0xFF}, []float32{255}},
		{"i2", []byte{0xFE, 0xFF, 0x00, 0x80}, []float32{-2, -32768}},
		{"u2", []byte{0x34, 0x12}, []float32{0x1234}},
		{"i4", []byte{0xFF, 0xFF, 0xFF, 0xFF}, []float32{-1}},
		{"u4", []byte{0, 0, 0, 0x80}, []float32{2147483648}},
		{"i8", []byte{0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, []float32{-3}},
		{"u8", []byte{0, 0, 0, 0, 0, 0, 0, 0x80}, []float32{9223372036854775808}},
		{"f2", []byte{0x00, 0x3C, 0x00, 0xC0}, []float32{1, -2}}, // IEEE half 1.0 and -2.0
		{"f4", f32bytes(1.5, -0.25), []float32{1.5, -0.25}},
		{"f8", f64bytes(0.1, 1e300), []float32{0.1, float32(math.Inf(1))}},
	}
	for _, tc := range tests {
		d, err := ParseDType(tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.AppendFloat32(nil, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.typ, got, tc.want)
		}
	}
}

func TestParseNPYHeader(t *testing.T) {
	tests := []struct {
		in    string
		descr string
		shape []int
		want  string
	}{
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }          \n", "<f4", []int{3}, ""},
		{"{'descr': '|u1', 'fortran_order': False, 'shape': (4, 5, 3), }\n", "|u1", []int{4, 5, 3}, ""},
		{"{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n", "<f8", []int{}, ""},
		{`{"shape": (2L, 3L), "fortran_order": True, "descr": "<i2"}`, "<i2", []int{2, 3}, ""},
		{"{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", "", nil, "roverd: bad npy data: structured dtypes are not supported"},
		{"{'descr': '<f4', 'shape': (3,), }", "", nil, "roverd: bad npy data: header lacks descr, fortran_order or shape"},
		{"{'descr': '<f4', 'descr': '<f4'}", "", nil, `roverd: bad npy data: header repeats key "descr"`},
		{"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,)}", "", nil, "roverd: bad npy data: fortran_order is neither True nor False"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", "", nil, "roverd: bad npy data: shape: dimension 0 is not a non-negative integer"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", "", nil, `roverd: bad npy data: unknown header key "x"`},
		{"{'descr': '<f4' 'fortran_order': False}", "", nil, `roverd: bad npy data: header: expected ',' or '}' after "descr"`},
		{"['descr']", "", nil, `roverd: bad npy data: header is not a dict: "['descr']"`},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", "", nil, "roverd: bad npy data: header: text after the dict"},
		{"{'descr", "", nil, "roverd: bad npy data: header key: unterminated string"},
	}
	for _, tc := range tests {
		a, err := parseNPYHeader(tc.in)
		if tc.want != "" {
			if err == nil || err.Error() != tc.want {
				t.Errorf("%q: err = %v\nwant  %s", tc.in, err, tc.want)
			}
			continue
		}
		if err != nil || a.descr != tc.descr || !slices.Equal(a.shape, tc.shape) {
			t.Errorf("%q: %+v, %v", tc.in, a, err)
		}
	}
}

// FuzzMeta checks that ParseMeta never panics, agrees with encoding/json on
// what is a JSON object, and returns only channels it validated.
func FuzzMeta(f *testing.F) {
	fuzzmem.AddFiles(f, "../../testdata/roverd/*/*/meta.json")
	f.Add([]byte(`{"ts": {"format": "raw", "type": "f8", "shape": [], "desc": "t"}, "video.avi": {"format": "mjpg", "type": "u1", "shape": [1080, 1920, 3]}}`))
	f.Add([]byte(`{"acc": {"format": "lzmaf", "type": "<f4", "shape": [3], "args": {"x": [1, {"y": null}]}}}`))
	f.Add([]byte(`{"a": {"format": "raw", "type": "V12", "shape": [2.5]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := fuzzmem.Call(t, metaAllocBound, func() (*Meta, error) { return ParseMeta(data) })
		var obj map[string]map[string]any
		jsonOK := json.Unmarshal(data, &obj) == nil && obj != nil
		if err != nil {
			if !errors.Is(err, ErrMeta) {
				t.Fatalf("error %v does not wrap ErrMeta", err)
			}
			return
		}
		if !jsonOK {
			t.Fatalf("accepted %q, which encoding/json does not read as an object of objects", data)
		}
		if len(m.Channels) != len(obj) {
			t.Fatalf("%d channels, encoding/json sees %d", len(m.Channels), len(obj))
		}
		for name, c := range m.Channels {
			if c.Name != name || checkChannelName(name) != nil || len(c.Shape) > maxShapeDims {
				t.Fatalf("channel %q: %+v", name, c)
			}
			if c.Format != obj[name]["format"] || c.Type != obj[name]["type"] {
				t.Fatalf("channel %q: %+v, encoding/json reads %v", name, c, obj[name])
			}
			for _, d := range c.Shape {
				if d < 0 {
					t.Fatalf("channel %q: shape %v", name, c.Shape)
				}
			}
			if rc, err := m.Channel(name); err == nil && (rc.RecordBytes <= 0 || rc.RecordBytes > MaxRecordBytes) {
				t.Fatalf("channel %q: record of %d bytes", name, rc.RecordBytes)
			}
		}
	})
}

// FuzzNPY checks that parseNPY never panics and that what it accepts is
// consistent: a known type, data exactly as long as the shape says.
func FuzzNPY(f *testing.F) {
	for _, p := range []string{"vec/000000.npz", "img/000000.npz"} {
		b := readFile(f, npzFixtures+"/"+p)
		// The .npy member of a stored npz starts after the 38-byte local
		// header of "data.npy"; seed with the array itself.
		if i := indexOf(b, []byte(npyMagic)); i >= 0 {
			f.Add(b[i:])
		}
	}
	f.Add([]byte("\x93NUMPY\x01\x00\x46\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }            \n\x00\x00\x00\x00\x00\x00\xf0\x3f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := fuzzmem.Call(t, npyAllocBound, func() (npyArray, error) { return parseNPY(data) })
		if err != nil {
			if !errors.Is(err, ErrNPY) {
				t.Fatalf("error %v does not wrap ErrNPY", err)
			}
			return
		}
		d, err := ParseDType(a.descr)
		if err != nil {
			t.Fatalf("accepted descr %q: %v", a.descr, err)
		}
		n := int64(d.Size)
		for _, x := range a.shape {
			n *= int64(x)
		}
		if int64(len(a.data)) != n {
			t.Fatalf("%d data bytes for %v %s", len(a.data), a.shape, a.descr)
		}
	})
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}
