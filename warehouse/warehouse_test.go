package warehouse

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/validate"
)

func TestIDRoundTrip(t *testing.T) {
	id := ID(sha256.Sum256([]byte("x")))
	got, err := ParseID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseID(String()) = %v, %v", got, err)
	}
	if want := "v" + id.String()[:16]; id.DirName() != want {
		t.Fatalf("DirName %s, want %s", id.DirName(), want)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("g", 64)} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) succeeded", bad)
		}
	}
}

func TestRecipeCanonical(t *testing.T) {
	var a, b Recipe
	a.Set("b", 2)
	a.Set("a", "x\ny=\"1\"")
	b.Set("a", "x\ny=\"1\"")
	b.Set("b", 2)
	want := "a=\"x\\ny=\\\"1\\\"\"\nb=\"2\"\n"
	if a.Encode() != want {
		t.Fatalf("Encode = %q, want %q", a.Encode(), want)
	}
	if a.ID() != b.ID() {
		t.Fatal("insertion order changed the version")
	}
	if a.ID() != ID(sha256.Sum256([]byte(want))) {
		t.Fatal("ID is not sha256 of the encoding")
	}
	var c Recipe
	c.Set("a", "x\ny=\"1\"")
	c.Set("b", 3)
	if c.ID() == a.ID() {
		t.Fatal("a changed value kept the version")
	}
}

func validManifest() *Manifest {
	return &Manifest{
		FormatVersion: FormatVersion,
		Version:       strings.Repeat("ab", 32),
		DefaultDType:  "F16",
		Samples:       5,
		Summary:       validate.Summary{Total: validate.Counts{Total: 6, Kept: 5}},
		Shards: []Shard{
			{ID: "shard-00000", RelativePath: "shards/shard-00000.twh", FirstSample: 0, Samples: 3, DType: "F16", Endianness: "Little"},
			{ID: "shard-00001", RelativePath: "shards/shard-00001.twh", FirstSample: 3, Samples: 2, DType: "F16", Endianness: "Little"},
		},
		Files: Files{Samples: SamplesName, Fingerprint: FingerprintName, BuildReport: BuildReportName},
	}
}

func TestParseManifest(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m *Manifest)
		raw    func(b []byte) []byte
		want   string
	}{
		{name: "valid"},
		{name: "future format", mutate: func(m *Manifest) { m.FormatVersion = 2 }, want: "format_version 2, this build reads 1"},
		{name: "escaping shard path", mutate: func(m *Manifest) { m.Shards[1].RelativePath = "../x.twh" }, want: `shards[1].relative_path: "../x.twh" is not a clean relative path`},
		{name: "absolute shard path", mutate: func(m *Manifest) { m.Shards[0].RelativePath = "/etc/passwd" }, want: `shards[0].relative_path: "/etc/passwd"`},
		{name: "unclean shard path", mutate: func(m *Manifest) { m.Shards[0].RelativePath = "shards/../../x" }, want: `shards[0].relative_path`},
		{name: "samples lie", mutate: func(m *Manifest) { m.Samples = 6; m.Summary.Total.Kept = 6 }, want: "samples 6 but shards hold 5"},
		{name: "gap in shards", mutate: func(m *Manifest) { m.Shards[1].FirstSample = 4 }, want: "shards[1] (shard-00001): first_sample 4"},
		{name: "summary disagrees", mutate: func(m *Manifest) { m.Summary.Total.Kept = 4 }, want: "summary.total.kept 4"},
		{name: "dtype disagrees", mutate: func(m *Manifest) { m.Shards[0].DType = "F32" }, want: "dtype F32 endianness Little, manifest default F16"},
		{name: "big endian", mutate: func(m *Manifest) { m.Shards[0].Endianness = "Big" }, want: "endianness Big"},
		{name: "bad version", mutate: func(m *Manifest) { m.Version = "zz" }, want: `version "zz"`},
		{name: "unknown field", raw: func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"version":`), []byte(`"surprise": 1, "version":`), 1)
		}, want: `unknown field "surprise"`},
		{name: "no format version", raw: func(b []byte) []byte { return []byte(`{"version": "x"}`) }, want: "no format_version"},
		{name: "not json", raw: func(b []byte) []byte { return b[:len(b)/2] }, want: "manifest invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validManifest()
			if tt.mutate != nil {
				tt.mutate(m)
			}
			raw, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if tt.raw != nil {
				raw = tt.raw(raw)
			}
			_, err = ParseManifest(raw)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("valid manifest refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrManifest containing %q", err, tt.want)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	raw, err := validManifest().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"format_version": 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := fuzzmem.Call(t, parseManifestAllocBound, func() (*Manifest, error) { return ParseManifest(b) })
		if err != nil {
			return
		}
		// Anything accepted must be self-consistent.
		var sum int64
		for _, s := range m.Shards {
			if checkRelative(s.RelativePath) != nil {
				t.Fatalf("accepted path %q", s.RelativePath)
			}
			sum += s.Samples
		}
		if sum != m.Samples {
			t.Fatalf("accepted %d samples over shards holding %d", m.Samples, sum)
		}
	})
}

func TestResolveDirRefusesEscapingPointer(t *testing.T) {
	root := t.TempDir()
	if err := os.Symlink("../elsewhere", filepath.Join(root, LatestName)); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveDir(root); err == nil || !strings.Contains(err.Error(), "must name a version directory beside it") {
		t.Fatalf("ResolveDir: %v", err)
	}
	if _, err := ResolveDir(t.TempDir()); err == nil {
		t.Fatal("ResolveDir of an empty dir succeeded")
	}
}

func TestFingerprintFirstChange(t *testing.T) {
	stored := []FileEntry{{Path: "a", Size: 1, MtimeNs: 10}, {Path: "b", Size: 2, MtimeNs: 20}, {Path: "c", Size: 3, MtimeNs: 30}}
	dir := t.TempDir()
	listing := filepath.Join(dir, FingerprintName)
	var buf bytes.Buffer
	fw := NewFingerprintWriter(&buf)
	for _, e := range stored {
		if err := fw.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(listing, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if fw.Sum().Files != 3 || fw.Sum().Bytes != 6 {
		t.Fatalf("Sum = %+v", fw.Sum())
	}
	tests := []struct {
		name    string
		current []FileEntry
		want    string
	}{
		{"same", stored, ""},
		{"resized", []FileEntry{{Path: "a", Size: 1, MtimeNs: 10}, {Path: "b", Size: 5, MtimeNs: 20}, {Path: "c", Size: 3, MtimeNs: 30}}, "b changed size (2 -> 5 bytes)"},
		{"touched", []FileEntry{{Path: "a", Size: 1, MtimeNs: 10}, {Path: "b", Size: 2, MtimeNs: 21}, {Path: "c", Size: 3, MtimeNs: 30}}, "b was modified (mtime changed)"},
		{"added at end", append(append([]FileEntry{}, stored...), FileEntry{Path: "d", Size: 1, MtimeNs: 1}), "d was added"},
		{"removed at end", stored[:2], "c was removed"},
		{"removed in middle", []FileEntry{{Path: "a", Size: 1, MtimeNs: 10}, {Path: "c", Size: 3, MtimeNs: 30}}, "c was added or b was removed"},
		{"content", []FileEntry{{Path: "a", Size: 1, MtimeNs: 10}, {Path: "b", Size: 2, MtimeNs: 20, SHA256: "ab"}, {Path: "c", Size: 3, MtimeNs: 30}}, "b was modified (content changed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FirstChange(listing, func(fn func(FileEntry) error) error {
				for _, e := range tt.current {
					if err := fn(e); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil || got != tt.want {
				t.Fatalf("FirstChange = %q, %v; want %q", got, err, tt.want)
			}
			h := NewFingerprintWriter(nil)
			for _, e := range tt.current {
				h.Add(e)
			}
			if (h.Sum() == fw.Sum()) != (tt.want == "") {
				t.Fatalf("digest equality disagrees with FirstChange for %s", fmt.Sprint(tt.current))
			}
		})
	}
}
