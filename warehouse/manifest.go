package warehouse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/validate"
)

// FormatVersion is the manifest format this code writes and reads.
//
//	1: the first format: TWH1 v1 shards with the TWMD per-sample section.
const FormatVersion = 1

// ManifestName is the manifest's file name inside a version directory.
const ManifestName = "manifest.json"

// MaxManifestBytes bounds what a reader loads before parsing.
const MaxManifestBytes = 256 << 20

// Manifest is manifest.json: the description of one complete version. Every
// field except CreatedAtMs is a pure function of the config and the inputs.
type Manifest struct {
	FormatVersion       int                 `json:"format_version"`
	Version             string              `json:"version"`
	VersionRecipe       string              `json:"version_recipe"`
	CodeVersion         string              `json:"code_version"`
	DatasetRoot         string              `json:"dataset_root"`
	Source              SourceInfo          `json:"source"`
	Transform           Transform           `json:"transform"`
	DefaultDType        string              `json:"default_dtype"`
	DefaultShardVersion uint32              `json:"default_shard_version"`
	CreatedAtMs         int64               `json:"created_at_ms"`
	Thresholds          validate.Thresholds `json:"thresholds"`
	Summary             validate.Summary    `json:"summary"`
	Classes             []Class             `json:"classes"`
	Sources             []SourceEntry       `json:"sources"`
	Extras              []Extra             `json:"extras"`
	ImageStats          ImageStats          `json:"image_stats"`
	ExtraStats          []ExtraStats        `json:"extra_stats,omitempty"` // windows.go; absent without extras and in versions built before windows
	SourceFingerprint   Fingerprint         `json:"source_fingerprint"`
	InputSamples        int64               `json:"input_samples"`
	Samples             int64               `json:"samples"`
	SamplesPerShard     int                 `json:"samples_per_shard"`
	Shards              []Shard             `json:"shards"`
	Files               Files               `json:"files"`
}

// SourceInfo names the input layout.
type SourceInfo struct {
	Kind      string   `json:"kind"`
	Root      string   `json:"root"`
	LabelKeys []string `json:"label_keys,omitempty"`
}

// Transform is the cacheable transform configuration.
type Transform struct {
	TargetWidth  int       `json:"target_width"`
	TargetHeight int       `json:"target_height"`
	Channels     int       `json:"channels"`
	ResizeMode   string    `json:"resize_mode"`
	PadValue     int       `json:"pad_value"`
	Mean         []float64 `json:"mean,omitempty"`
	Std          []float64 `json:"std,omitempty"`
	DType        string    `json:"dtype"`
	MaxBoxes     int       `json:"max_boxes"`
	SkipEmpty    bool      `json:"skip_empty"`
	Decoder      string    `json:"decoder"`
}

// Class is one entry of the class table; shards store Index.
type Class struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	ID    *int64 `json:"id,omitempty"` // the numeric id the labels used, when they used one
}

// SourceEntry is one run or episode: summary.runs and the shards' meta
// source_index refer to Index. A source describes the runs or episodes it
// scanned with it (its name as in the summary, plus free-form attributes:
// an episode's task text, embodiment, fps, ...), for the manifest and the
// analytics export.
type SourceEntry struct {
	Index      int               `json:"index"`
	Name       string            `json:"name"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Extra is one per-sample extra tensor in the shards' extras section: the
// float32 values at [Offset, Offset+prod(Shape)) of each sample's extras.
type Extra struct {
	Name        string `json:"name"`
	Shape       []int  `json:"shape"`
	SourceDType string `json:"source_dtype"`
	Offset      int    `json:"offset"`
}

// ImageStats are per-channel statistics of the image values after
// normalization (as stored for F16 and F32; for U8 the values a reader's
// normalization gives, those of an F32 build), over the image content of every kept sample
// (letterbox padding excluded). Drift checks compare them across versions.
type ImageStats struct {
	Values int64      `json:"values"` // values per channel
	Mean   [3]float64 `json:"mean"`
	Std    [3]float64 `json:"std"`
}

// Fingerprint summarises the input files the version was built from; the
// full listing is Files.Fingerprint.
type Fingerprint struct {
	Files  int64  `json:"files"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Shard is one shards[] entry.
type Shard struct {
	ID             string `json:"id"`
	RelativePath   string `json:"relative_path"`
	ShardVersion   uint32 `json:"shard_version"`
	FirstSample    int64  `json:"first_sample"`
	Samples        int64  `json:"samples"`
	Width          int    `json:"width"`
	Height         int    `json:"height"`
	Channels       int    `json:"channels"`
	MaxBoxes       int    `json:"max_boxes"`
	DType          string `json:"dtype"`
	Endianness     string `json:"endianness"`
	Bytes          int64  `json:"bytes"`
	ChecksumSHA256 string `json:"checksum_sha256"`
}

// Files names the other files of the version directory.
type Files struct {
	Samples     string `json:"samples"`
	Fingerprint string `json:"fingerprint"`
	BuildReport string `json:"build_report"`
	// Parquet names the analytics exports (docs/format/parquet.md). It is
	// absent in manifests written before builds exported Parquet; `export
	// parquet` adds the files to such a version without rewriting its
	// manifest.
	Parquet *ParquetFiles `json:"parquet,omitempty"`
	// Checksums records the size and sha256 of every file of the version
	// directory other than the shards (shards[] records theirs),
	// manifest.json and manifest.json.sha256, by path relative to the
	// version directory: samples.jsonl, fingerprint.jsonl,
	// build_report.json, the Parquet exports, and every file of the Zarr
	// store when the build wrote one. Absent in manifests written before
	// builds recorded them (such a version's other files are not covered).
	Checksums map[string]FileChecksum `json:"checksums,omitempty"`
	// Episodes names the episode index (EpisodesName, windows.go) of a
	// build with extras; absent without extras and in versions built
	// before windows (their recipes have no "episodes" key).
	Episodes string `json:"episodes,omitempty"`
}

// FileChecksum is one Files.Checksums entry.
type FileChecksum struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // lowercase hex of the whole file
}

// ParquetFiles names the Parquet exports of a version.
type ParquetFiles struct {
	Samples string `json:"samples"`
	Runs    string `json:"runs"`
	Build   string `json:"build"`
}

// Encode returns the manifest's canonical bytes: indented JSON, a trailing
// newline, map keys sorted (encoding/json sorts them).
func (m *Manifest) Encode() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrManifest marks a manifest that cannot be trusted.
var ErrManifest = errors.New("manifest invalid")

// ManifestDigestName is the manifest's detached digest beside it, in
// sha256sum's format: "<64 lowercase hex digits>  manifest.json\n".
const ManifestDigestName = ManifestName + ".sha256"

// ManifestDigest returns the contents of manifest.json.sha256 for the
// manifest bytes raw.
func ManifestDigest(raw []byte) []byte {
	sum := sha256.Sum256(raw)
	return []byte(hex.EncodeToString(sum[:]) + "  " + ManifestName + "\n")
}

// DigestError is what CheckManifestDigest or MissingDigest found wrong
// with the manifest of the version directory Dir: File is the file to
// blame (relative to Dir: manifest.json or manifest.json.sha256), Err the
// detail. It wraps ErrManifest.
type DigestError struct {
	Dir  string
	File string
	Err  error
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("%s: %v: %v", filepath.Join(e.Dir, e.File), ErrManifest, e.Err)
}

func (e *DigestError) Unwrap() error { return ErrManifest }

// CheckManifestDigest compares dir/manifest.json.sha256 with the manifest
// bytes raw. sealed says whether the digest exists; a missing digest is no
// problem here (a manifest from before digests), the caller decides once
// it has parsed the manifest (MissingDigest).
func CheckManifestDigest(dir string, raw []byte) (sealed bool, p *DigestError) {
	return checkManifestDigestIn(dir, pathOpener(dir), raw)
}

// opener opens a file of a version directory by its name in it: by path
// (pathOpener), or relative to a directory handle a reader pinned at Open.
type opener func(name string) (*os.File, error)

// pathOpener opens the files of the version directory dir by path.
func pathOpener(dir string) opener {
	return func(name string) (*os.File, error) { return os.Open(filepath.Join(dir, name)) }
}

func checkManifestDigestIn(dir string, open opener, raw []byte) (sealed bool, p *DigestError) {
	f, err := open(ManifestDigestName)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, &DigestError{dir, ManifestDigestName, err}
	}
	defer f.Close()
	want := ManifestDigest(raw)
	got, err := io.ReadAll(io.LimitReader(f, int64(len(want))+1))
	if err != nil {
		return true, &DigestError{dir, ManifestDigestName, err}
	}
	if !wellFormedDigest(got) {
		return true, &DigestError{dir, ManifestDigestName, fmt.Errorf("%q is not \"<64 lowercase hex digits>  %s\\n\"", trimForMessage(got), ManifestName)}
	}
	if !bytes.Equal(got, want) {
		return true, &DigestError{dir, ManifestName, fmt.Errorf("sha256 %s, but %s records %s: the manifest or its digest is damaged",
			want[:sha256.Size*2], ManifestDigestName, got[:sha256.Size*2])}
	}
	return true, nil
}

// wellFormedDigest reports whether b is exactly what ManifestDigest
// writes for some manifest.
func wellFormedDigest(b []byte) bool {
	const hexLen = sha256.Size * 2
	if len(b) != hexLen+2+len(ManifestName)+1 || string(b[hexLen:]) != "  "+ManifestName+"\n" {
		return false
	}
	for _, c := range b[:hexLen] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// trimForMessage bounds damaged bytes quoted in an error.
func trimForMessage(b []byte) string {
	if len(b) > 100 {
		return string(b[:100]) + "..."
	}
	return string(b)
}

// MissingDigest is the problem with a parsed manifest of dir that has no
// digest beside it (sealed false): one that records file checksums was
// written with a digest, so its absence is damage; an older manifest needs
// none.
func MissingDigest(dir string, m *Manifest, sealed bool) *DigestError {
	if sealed || m.Files.Checksums == nil {
		return nil
	}
	return &DigestError{dir, ManifestDigestName, fmt.Errorf("missing: the manifest records file checksums, so it was published with a digest")}
}

// ReadManifestBytes reads dir/manifest.json, at most MaxManifestBytes+1
// bytes (ParseManifest refuses more).
func ReadManifestBytes(dir string) ([]byte, error) {
	return readManifestBytesIn(dir, pathOpener(dir))
}

func readManifestBytesIn(dir string, open opener) ([]byte, error) {
	name := filepath.Join(dir, ManifestName)
	f, err := open(ManifestName)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return raw, nil
}

// ReadManifest loads and checks dir/manifest.json: first against its
// digest dir/manifest.json.sha256 (required when the manifest records file
// checksums, which every build since digests existed does), then as
// ParseManifest does. Errors wrap ErrManifest and name the file to blame.
func ReadManifest(dir string) (*Manifest, error) {
	return readManifestIn(dir, pathOpener(dir))
}

// readManifestIn is ReadManifest with the version's files opened by open
// (dir names them in errors).
func readManifestIn(dir string, open opener) (*Manifest, error) {
	raw, err := readManifestBytesIn(dir, open)
	if err != nil {
		return nil, err
	}
	sealed, p := checkManifestDigestIn(dir, open, raw)
	if p != nil {
		return nil, p
	}
	name := filepath.Join(dir, ManifestName)
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if p := MissingDigest(dir, m, sealed); p != nil {
		return nil, p
	}
	return m, nil
}

// WriteManifest publishes raw (Manifest.Encode's bytes) as dir/manifest.json
// with its digest: manifest.json.sha256 first, then the manifest, each
// fsynced. A build calls it last, inside its temporary directory, which
// outputroot.VersionLock.Publish then makes durable and renames into place whole, so no
// reader sees one file without the other. (Outside a build, a crash
// between the two writes leaves a digest that disagrees with the
// manifest: verify reports it, nothing trusts it.)
func WriteManifest(dir string, raw []byte) error {
	if err := atomicfile.WriteSynced(filepath.Join(dir, ManifestDigestName), ManifestDigest(raw)); err != nil {
		return err
	}
	return atomicfile.WriteSynced(filepath.Join(dir, ManifestName), raw)
}

// ParseManifest decodes and checks manifest bytes: size, format version,
// known fields, internal consistency, and paths that stay inside the root.
func ParseManifest(raw []byte) (*Manifest, error) {
	if len(raw) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrManifest, MaxManifestBytes)
	}
	var probe struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if probe.FormatVersion == nil {
		return nil, fmt.Errorf("%w: no format_version", ErrManifest)
	}
	if *probe.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%w: format_version %d, this build reads %d", ErrManifest, *probe.FormatVersion, FormatVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrManifest, err)
	}
	return &m, nil
}

func (m *Manifest) check() error {
	if _, err := ParseID(m.Version); err != nil {
		return err
	}
	if t := m.Transform; len(t.Mean) != 0 || len(t.Std) != 0 {
		// A U8 reader normalizes with these: they must describe a
		// normalization the build could have applied.
		if len(t.Mean) != 3 || len(t.Std) != 3 {
			return fmt.Errorf("transform: mean %v and std %v must both have 3 values or both be absent", t.Mean, t.Std)
		}
		for c := range 3 {
			if math.IsNaN(t.Mean[c]) || math.IsInf(t.Mean[c], 0) || !(t.Std[c] > 0) || math.IsInf(t.Std[c], 0) {
				return fmt.Errorf("transform: channel %d: mean %v std %v, want finite mean and finite std > 0", c, t.Mean[c], t.Std[c])
			}
		}
	}
	var total int64
	for i, s := range m.Shards {
		if err := checkRelative(s.RelativePath); err != nil {
			return fmt.Errorf("shards[%d].relative_path: %v", i, err)
		}
		if s.Samples <= 0 || s.FirstSample != total {
			return fmt.Errorf("shards[%d] (%s): first_sample %d, samples %d; want first_sample %d and samples > 0", i, s.ID, s.FirstSample, s.Samples, total)
		}
		if s.DType != m.DefaultDType || s.Endianness != "Little" {
			return fmt.Errorf("shards[%d] (%s): dtype %s endianness %s, manifest default %s Little", i, s.ID, s.DType, s.Endianness, m.DefaultDType)
		}
		total += s.Samples
	}
	if total != m.Samples {
		return fmt.Errorf("samples %d but shards hold %d", m.Samples, total)
	}
	if m.Summary.Total.Kept != m.Samples {
		return fmt.Errorf("samples %d but summary.total.kept %d", m.Samples, m.Summary.Total.Kept)
	}
	offset := 0
	for i, e := range m.Extras {
		n := 1
		for _, d := range e.Shape {
			if d <= 0 {
				return fmt.Errorf("extras[%d] (%s): shape %v", i, e.Name, e.Shape)
			}
			n *= d
		}
		if e.Offset != offset {
			return fmt.Errorf("extras[%d] (%s): offset %d, want %d", i, e.Name, e.Offset, offset)
		}
		offset += n
	}
	names := []string{m.Files.Samples, m.Files.Fingerprint, m.Files.BuildReport}
	if pq := m.Files.Parquet; pq != nil {
		names = append(names, pq.Samples, pq.Runs, pq.Build)
	}
	if m.Files.Episodes != "" {
		names = append(names, m.Files.Episodes)
	}
	if err := m.checkExtraStats(); err != nil {
		return err
	}
	for _, p := range names {
		if err := checkRelative(p); err != nil {
			return fmt.Errorf("files: %v", err)
		}
	}
	return m.checkChecksums(names)
}

// checkChecksums checks files.checksums: clean relative paths, none of
// them a shard, the manifest or its digest, well-formed entries, and every
// file files names listed.
func (m *Manifest) checkChecksums(names []string) error {
	sums := m.Files.Checksums
	if sums == nil {
		return nil
	}
	shards := make(map[string]bool, len(m.Shards))
	for _, s := range m.Shards {
		shards[s.RelativePath] = true
	}
	for _, p := range slices.Sorted(maps.Keys(sums)) {
		e := sums[p]
		if err := checkRelative(p); err != nil {
			return fmt.Errorf("files.checksums: %v", err)
		}
		if p == ManifestName || p == ManifestDigestName || shards[p] {
			return fmt.Errorf("files.checksums: %q is a shard, the manifest or its digest, which it does not list", p)
		}
		if e.Bytes < 0 || !isHexSHA256(e.SHA256) {
			return fmt.Errorf("files.checksums[%q]: bytes %d, sha256 %q; want bytes >= 0 and 64 lowercase hex digits", p, e.Bytes, e.SHA256)
		}
	}
	for _, p := range names {
		if _, ok := sums[p]; !ok {
			return fmt.Errorf("files.checksums: no entry for %q, which files names", p)
		}
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkRelative refuses paths that could leave the version directory.
func checkRelative(p string) error {
	if p == "" || path.IsAbs(p) || strings.Contains(p, "\\") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("%q is not a clean relative path inside the warehouse", p)
	}
	return nil
}

// Names of the other files in a version directory.
const (
	SamplesName     = "samples.jsonl"
	BuildReportName = "build_report.json"

	SamplesParquetName = "samples.parquet"
	RunsParquetName    = "runs.parquet"
	BuildParquetName   = "build.parquet"

	// ZarrStoreName is the Zarr store's directory when the build writes
	// one (zarr.StoreName).
	ZarrStoreName = "warehouse.zarr"
)

// IsBulkFile reports whether a files.checksums entry holds sample data
// rather than a description of it: the Zarr store's chunk files (every
// file under the store but its zarr.json metadata documents). Like the
// shards, quick verification checks their size and only Full re-hashes
// them.
func IsBulkFile(rel string) bool {
	return strings.HasPrefix(rel, ZarrStoreName+"/") && path.Base(rel) != "zarr.json"
}

// FileSHA256 returns the size and sha256 of the file at p, stopping early
// when ctx ends.
func FileSHA256(ctx context.Context, p string) (FileChecksum, error) {
	f, err := os.Open(p)
	if err != nil {
		return FileChecksum{}, err
	}
	defer f.Close()
	return ReaderSHA256(ctx, f)
}

// ReaderSHA256 is the size and hex sha256 of everything r yields,
// stopping early when ctx ends.
func ReaderSHA256(ctx context.Context, r io.Reader) (FileChecksum, error) {
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, r})
	if err != nil {
		return FileChecksum{}, err
	}
	return FileChecksum{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// ctxReader stops a long read when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
