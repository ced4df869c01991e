package warehouse

import (
	"context"
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
	if sealed, p := checkManifestDigest(dir, []byte("{}\n")); !sealed || p != nil {
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
			if _, p := checkManifestDigest(dir, []byte("{}\n")); p == nil {
				t.Fatalf("byte %d ^ %#x went unnoticed", i, mask)
			}
		}
	}
	// A digest followed by more bytes is no digest.
	if err := os.WriteFile(filepath.Join(dir, ManifestDigestName), append(d, d...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, p := checkManifestDigest(dir, []byte("{}\n")); p == nil || p.File != ManifestDigestName {
		t.Fatalf("a doubled digest: %+v", p)
	}
}

// sealFixture gives a fixture the side files a build writes and a manifest
// that records their checksums, sealed by its digest.
func sealFixture(t *testing.T, fx *fixture) {
	t.Helper()
	files := map[string]string{
		SamplesName: "{\"seq\":0}\n", FingerprintName: "{\"path\":\"a\"}\n", BuildReportName: "{}\n",
		ZarrStoreName + "/zarr.json": "{\"zarr_format\":3}", ZarrStoreName + "/images/c/0/0/0/0": "chunk bytes",
	}
	fx.m.Files.Checksums = map[string]FileChecksum{}
	for name, content := range files {
		p := filepath.Join(fx.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		sum, err := FileSHA256(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		fx.m.Files.Checksums[name] = sum
	}
	raw, err := fx.m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(fx.dir, raw); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCoversEveryFile(t *testing.T) {
	ctx := context.Background()
	verify := func(t *testing.T, dir string, full bool) *VerifyResult {
		t.Helper()
		r, err := VerifyReport(ctx, dir, VerifyOptions{Full: full})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// A version from before checksums: readable, verified, with a note.
	fx := writeFixture(t, defaultSpec())
	if _, err := ReadManifest(fx.dir); err != nil {
		t.Fatal(err)
	}
	if r := verify(t, fx.dir, true); len(r.Findings) != 0 || len(r.Notes) != 1 || r.Notes[0] != NoteUncovered {
		t.Fatalf("uncovered version: %+v", r)
	}

	sealFixture(t, fx)
	for _, full := range []bool{false, true} {
		if r := verify(t, fx.dir, full); len(r.Findings) != 0 || len(r.Notes) != 0 {
			t.Fatalf("sealed version, full=%v: %+v", full, r)
		}
	}
	if _, err := ReadManifest(fx.dir); err != nil {
		t.Fatal(err)
	}

	// Each case damages a copy and expects the one finding.
	copyDir := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), filepath.Base(fx.dir))
		if err := os.CopyFS(d, os.DirFS(fx.dir)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rewrite := func(t *testing.T, d, name string, edit func([]byte) []byte) {
		p := filepath.Join(d, filepath.FromSlash(name))
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, edit(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 1; return b }
	}
	chunk := ZarrStoreName + "/images/c/0/0/0/0"
	for _, tc := range []struct {
		name        string
		damage      func(t *testing.T, d string)
		quick, full FindingKind // "" = no finding
		file        string
		readErr     string // ReadManifest's error, "" when it reads
	}{
		{"manifest byte", func(t *testing.T, d string) { rewrite(t, d, ManifestName, flip(10)) },
			FindingManifestDigest, FindingManifestDigest, ManifestName, "the manifest or its digest is damaged"},
		{"digest hex digit", func(t *testing.T, d string) { rewrite(t, d, ManifestDigestName, flip(3)) },
			FindingManifestDigest, FindingManifestDigest, ManifestName, "the manifest or its digest is damaged"},
		{"digest file name", func(t *testing.T, d string) { rewrite(t, d, ManifestDigestName, flip(70)) },
			FindingManifestDigest, FindingManifestDigest, ManifestDigestName, `is not "<64 lowercase hex digits>  manifest.json\n"`},
		{"digest missing", func(t *testing.T, d string) { os.Remove(filepath.Join(d, ManifestDigestName)) },
			FindingManifestDigest, FindingManifestDigest, ManifestDigestName, "manifest.json.sha256: manifest invalid: missing"},
		{"side file byte", func(t *testing.T, d string) { rewrite(t, d, SamplesName, flip(2)) },
			FindingFileChecksum, FindingFileChecksum, SamplesName, ""},
		{"side file truncated", func(t *testing.T, d string) { rewrite(t, d, BuildReportName, func(b []byte) []byte { return b[:1] }) },
			FindingFileSize, FindingFileSize, BuildReportName, ""},
		{"side file missing", func(t *testing.T, d string) { os.Remove(filepath.Join(d, FingerprintName)) },
			FindingFileMissing, FindingFileMissing, FingerprintName, ""},
		{"side file a directory", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, FingerprintName))
			os.Mkdir(filepath.Join(d, FingerprintName), 0o755)
		}, FindingFileSize, FindingFileSize, FingerprintName, ""},
		{"zarr metadata byte", func(t *testing.T, d string) { rewrite(t, d, ZarrStoreName+"/zarr.json", flip(0)) },
			FindingFileChecksum, FindingFileChecksum, ZarrStoreName + "/zarr.json", ""},
		{"zarr chunk byte", func(t *testing.T, d string) { rewrite(t, d, chunk, flip(4)) },
			"", FindingFileChecksum, chunk, ""},
		{"zarr chunk truncated", func(t *testing.T, d string) { rewrite(t, d, chunk, func(b []byte) []byte { return b[:3] }) },
			FindingFileSize, FindingFileSize, chunk, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t)
			tc.damage(t, d)
			for _, full := range []bool{false, true} {
				want := tc.quick
				if full {
					want = tc.full
				}
				r := verify(t, d, full)
				if want == "" {
					if len(r.Findings) != 0 {
						t.Errorf("full=%v: findings %+v, want none", full, r.Findings)
					}
					continue
				}
				if len(r.Findings) != 1 || r.Findings[0].Kind != want || r.Findings[0].File != tc.file || r.Findings[0].Shard != "" || r.Findings[0].Sample != -1 {
					t.Errorf("full=%v: findings %+v, want one %s naming %s", full, r.Findings, want, tc.file)
				}
			}
			_, err := ReadManifest(d)
			switch {
			case tc.readErr == "" && err != nil:
				t.Errorf("ReadManifest: %v", err)
			case tc.readErr != "" && (!errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tc.readErr)):
				t.Errorf("ReadManifest: %v, want ErrManifest containing %q", err, tc.readErr)
			}
		})
	}
}
