package warehouse

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseManifestChecksums(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	covered := func(m *Manifest) {
		m.Files.Checksums = map[string]FileChecksum{
			SamplesName: {1, sum}, FingerprintName: {2, sum}, BuildReportName: {3, sum},
			ZarrStoreName + "/zarr.json": {4, sum},
		}
	}
	tests := []struct {
		name   string
		mutate func(m *Manifest)
		want   string
	}{
		{"valid", func(m *Manifest) {}, ""},
		{"escaping path", func(m *Manifest) { m.Files.Checksums["../x"] = FileChecksum{1, sum} }, `files.checksums: "../x" is not a clean relative path`},
		{"a shard", func(m *Manifest) { m.Files.Checksums["shards/shard-00001.twh"] = FileChecksum{1, sum} }, `"shards/shard-00001.twh" is a shard, the manifest or its digest`},
		{"the manifest", func(m *Manifest) { m.Files.Checksums[ManifestName] = FileChecksum{1, sum} }, `"manifest.json" is a shard`},
		{"the digest", func(m *Manifest) { m.Files.Checksums[ManifestDigestName] = FileChecksum{1, sum} }, `"manifest.json.sha256" is a shard`},
		{"upper-case hex", func(m *Manifest) { m.Files.Checksums[SamplesName] = FileChecksum{1, strings.ToUpper(sum)} }, `files.checksums["samples.jsonl"]: bytes 1, sha256`},
		{"short hex", func(m *Manifest) { m.Files.Checksums[SamplesName] = FileChecksum{1, sum[2:]} }, `want bytes >= 0 and 64 lowercase hex digits`},
		{"negative size", func(m *Manifest) { m.Files.Checksums[SamplesName] = FileChecksum{-1, sum} }, `bytes -1`},
		{"a named file unlisted", func(m *Manifest) { delete(m.Files.Checksums, FingerprintName) }, `no entry for "fingerprint.jsonl", which files names`},
		{"parquet unlisted", func(m *Manifest) {
			m.Files.Parquet = &ParquetFiles{Samples: SamplesParquetName, Runs: RunsParquetName, Build: BuildParquetName}
		}, `no entry for "samples.parquet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validManifest()
			covered(m)
			tt.mutate(m)
			raw, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			_, err = ParseManifest(raw)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrManifest containing %q", err, tt.want)
			}
		})
	}
}

func TestManifestDigestFormat(t *testing.T) {
	d := ManifestDigest([]byte("{}\n"))
	// sha256sum -c accepts it: "<hex>  manifest.json\n".
	if want := "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356  manifest.json\n"; string(d) != want {
		t.Fatalf("digest %q, want %q", d, want)
	}
	dir := t.TempDir()
	if err := WriteManifest(dir, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if sealed, p := CheckManifestDigest(dir, []byte("{}\n")); !sealed || p != nil {
		t.Fatalf("its own digest: sealed %v, %+v", sealed, p)
	}
	// Every flip of every byte of the digest is noticed.
	for i := range d {
		for _, mask := range []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff} {
			bad := []byte(string(d))
			bad[i] ^= mask
			if err := os.WriteFile(filepath.Join(dir, ManifestDigestName), bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, p := CheckManifestDigest(dir, []byte("{}\n")); p == nil {
				t.Fatalf("byte %d ^ %#x went unnoticed", i, mask)
			}
		}
	}
	// A digest followed by more bytes is no digest.
	if err := os.WriteFile(filepath.Join(dir, ManifestDigestName), append(d, d...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, p := CheckManifestDigest(dir, []byte("{}\n")); p == nil || p.File != ManifestDigestName {
		t.Fatalf("a doubled digest: %+v", p)
	}
}
