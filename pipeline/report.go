package pipeline

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"time"

	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Report is build_report.json: how the build went. Unlike the manifest it
// holds timings, so it differs between runs.
type Report struct {
	Version          string           `json:"version"`
	CodeVersion      string           `json:"code_version"`
	Host             string           `json:"host"`
	GOOS             string           `json:"goos"`
	GOARCH           string           `json:"goarch"`
	Workers          int              `json:"workers"`
	StartedAtMs      int64            `json:"started_at_ms"`
	InputSamples     int64            `json:"input_samples"`
	Samples          int64            `json:"samples"`
	Skipped          int64            `json:"skipped"`
	SkippedByReason  map[string]int64 `json:"skipped_by_reason"`
	Shards           int              `json:"shards"`
	BytesWritten     int64            `json:"bytes_written"`
	SamplesPerSecond float64          `json:"samples_per_second"`
	MBPerSecond      float64          `json:"mb_per_second"`
	// JPEGFallbacks counts the JPEG samples the build's JPEG decoder left
	// to image/jpeg (transforms.Counts.JPEGFallback): progressive,
	// arithmetic-coded, 12-bit and CMYK files in the pure-Go build, CMYK
	// in the turbojpeg build. They decode at full size, more slowly.
	JPEGFallbacks int64       `json:"jpeg_fallbacks"`
	Reuse         ReuseReport `json:"reuse"` // samples copied from published versions (reuse.go)
	Phases        Phases      `json:"phases_seconds"`

	start time.Time // StartedAtMs with the monotonic clock, for Phases.Total
}

// Phases are wall-clock seconds per pipeline phase, except Read, Decode,
// Resize and Normalize, which are summed over workers (CPU-seconds of that
// work, which may exceed the wall time of Write they happen in).
type Phases struct {
	Scan      float64 `json:"scan"`      // list, fingerprint, parse labels, read image headers (the source's work)
	Validate  float64 `json:"validate"`  // reason codes, geometry and box plans, summary, thresholds
	Read      float64 `json:"read"`      // image file reads, summed over workers
	Decode    float64 `json:"decode"`    // header, decompression, EXIF orientation, summed over workers
	Resize    float64 `json:"resize"`    // both resampler passes (with the JPEG decoders' row-by-row YCbCr->RGB), summed over workers
	Normalize float64 `json:"normalize"` // lookup-table conversion and padding, summed over workers
	Write     float64 `json:"write"`     // pass 2 wall time: transform pool and ordered shard writes
	Publish   float64 `json:"publish"`   // manifest, fsync, rename
	Total     float64 `json:"total"`
}

func newReport(b *builder, start time.Time) *Report {
	host, _ := os.Hostname()
	return &Report{
		Version: b.id.String(), CodeVersion: CodeVersion, Host: host, GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		Workers: b.workers, StartedAtMs: start.UnixMilli(), start: start,
	}
}

func (r *Report) finish(m *warehouse.Manifest, w *writeResult) {
	t := m.Summary.Total
	r.InputSamples, r.Samples, r.Skipped = t.Total, t.Kept, t.Skipped
	r.JPEGFallbacks = w.jpegFallbacks
	r.SkippedByReason = map[string]int64{}
	for reason, n := range t.ByReason {
		switch reason.Class() {
		case validate.ClassWarning:
			continue
		case validate.ClassEmpty:
			if !m.Transform.SkipEmpty {
				continue // kept
			}
		}
		r.SkippedByReason[string(reason)] = n
	}
	r.Shards, r.BytesWritten = len(w.shards), w.bytes
	if r.Phases.Write > 0 {
		r.SamplesPerSecond = float64(w.samples) / r.Phases.Write
		r.MBPerSecond = float64(w.bytes) / (1 << 20) / r.Phases.Write
	}
}

// manifest assembles the manifest of a finished build.
func (b *builder) manifest(scan *scanResult, w *writeResult, summary validate.Summary) *warehouse.Manifest {
	c := b.cfg
	l := shardLayout(c, b.extraF32)
	return &warehouse.Manifest{
		FormatVersion: warehouse.FormatVersion,
		Version:       b.id.String(),
		VersionRecipe: b.recipe.Encode(),
		CodeVersion:   CodeVersion,
		DatasetRoot:   datasetRoot(c),
		Source:        warehouse.SourceInfo{Kind: c.Source.Kind, Root: datasetRoot(c), LabelKeys: sourceLabelKeys(c)},
		Transform: warehouse.Transform{
			TargetWidth: c.TargetSize[0], TargetHeight: c.TargetSize[1], Channels: 3,
			ResizeMode: c.ResizeMode, PadValue: c.PadValue, Mean: c.Normalize.Mean, Std: c.Normalize.Std,
			DType: c.DType, MaxBoxes: c.MaxBoxes, SkipEmpty: c.SkipEmpty, Decoder: transforms.DecoderIdentity(),
		},
		DefaultDType:        l.DType.String(),
		DefaultShardVersion: uint32(l.Version()),
		Thresholds:          b.thresholds,
		Summary:             summary,
		Classes:             scan.classes.classes,
		Sources:             b.sourceEntries(),
		Extras:              b.manifestExtras(),
		ImageStats:          w.sums.stats(),
		SourceFingerprint:   scan.fingerprint,
		InputSamples:        scan.inputs,
		Samples:             w.samples,
		SamplesPerShard:     w.spp,
		Shards:              w.shards,
		Files: warehouse.Files{
			Samples: warehouse.SamplesName, Fingerprint: warehouse.FingerprintName, BuildReport: warehouse.BuildReportName,
		},
	}
}

// encodeJSON is v as indented JSON with a final newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// sourceEntries is the manifest's table of runs or episodes (never nil:
// the manifest says [] for none).
func (b *builder) sourceEntries() []warehouse.SourceEntry {
	entries := b.src.Entries()
	if b.staged != nil && b.staged.entries != nil {
		entries = b.staged.entries // read from the stored plan (plan.go)
	}
	out := make([]warehouse.SourceEntry, len(entries))
	copy(out, entries)
	return out
}

// manifestExtras describes the extras section with each extra's offset.
func (b *builder) manifestExtras() []warehouse.Extra {
	out := make([]warehouse.Extra, len(b.extras))
	offset := 0
	for i, e := range b.extras {
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		out[i] = warehouse.Extra{Name: e.Name, Shape: shape, SourceDType: e.SourceDType, Offset: offset}
		offset += e.Elements()
	}
	return out
}
