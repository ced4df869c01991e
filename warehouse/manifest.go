package warehouse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

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
// source_index refer to Index.
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

// ReadManifest loads and checks dir/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	name := filepath.Join(dir, ManifestName)
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
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
	for _, p := range names {
		if err := checkRelative(p); err != nil {
			return fmt.Errorf("files: %v", err)
		}
	}
	return nil
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
)
