package dtype

import "testing"

func TestDType(t *testing.T) {
	tests := []struct {
		d          DType
		size       int
		name       string // String: the manifest's and the shard format's
		configName string // ConfigName: the build config's
	}{
		{F32, 4, "F32", "f32"},
		{F16, 2, "F16", "f16"},
		{U8, 1, "U8", "u8"},
		{DType(3), 0, "DType(3)", "dtype(3)"},
		{7, 0, "DType(7)", "dtype(7)"},
	}
	for _, tc := range tests {
		if tc.d.Size() != tc.size || tc.d.String() != tc.name || tc.d.ConfigName() != tc.configName {
			t.Errorf("DType %d: Size %d String %q ConfigName %q, want %d %q %q",
				uint32(tc.d), tc.d.Size(), tc.d.String(), tc.d.ConfigName(), tc.size, tc.name, tc.configName)
		}
		parsed, err := Parse(tc.name)
		parsedConfig, errConfig := ParseConfig(tc.configName)
		if tc.size == 0 {
			if err == nil || errConfig == nil {
				t.Errorf("Parse(%q) or ParseConfig(%q) succeeded", tc.name, tc.configName)
			}
			continue
		}
		if err != nil || parsed != tc.d {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.name, parsed, err, tc.d)
		}
		if errConfig != nil || parsedConfig != tc.d {
			t.Errorf("ParseConfig(%q) = %v, %v; want %v", tc.configName, parsedConfig, errConfig, tc.d)
		}
	}
	// The numbering is the shard header's dtype field.
	if F32 != 0 || F16 != 1 || U8 != 2 {
		t.Errorf("F32, F16, U8 = %d, %d, %d; the shard header says 0, 1, 2", F32, F16, U8)
	}
	if _, err := ParseConfig("bf16"); err == nil {
		t.Error("ParseConfig(bf16) accepted")
	}
	if _, err := Parse("f16"); err == nil || err.Error() != `unknown dtype "f16" (want F32, F16 or U8)` {
		t.Errorf("Parse(f16) error = %v", err)
	}
}

func TestBoxDType(t *testing.T) {
	for d, want := range map[DType]DType{F32: F32, F16: F16, U8: F32} {
		if got := d.BoxDType(); got != want {
			t.Errorf("%v.BoxDType() = %v, want %v", d, got, want)
		}
	}
}
