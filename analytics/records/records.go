// Package records decodes the per-version records the analytics export
// reads besides the shards: the lines of samples.jsonl, build_report.json
// and the manifest's version_recipe (docs/format/manifest.md). They are
// files a warehouse directory carries, so every decoder here bounds its
// input before decoding and checks what it accepts; FuzzDecodeSampleLine,
// FuzzDecodeBuildReport and FuzzParseRecipe fuzz them. The package imports
// neither arrow-go nor anything of ours, so that its fuzz targets build in
// seconds (the arrow-using analytics package takes minutes to build with
// the fuzzer's instrumentation; docs/fuzzing.md).
package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// MaxSampleLineBytes bounds one samples.jsonl line before it is decoded. A
// line holds a few paths, reason codes and at most max_boxes class indices:
// a few hundred bytes in practice.
const MaxSampleLineBytes = 1 << 20

// SampleLine is one line of samples.jsonl as docs/format/manifest.md
// defines it: every input sample in scan order, kept or not, with where it
// landed. The pipeline writes it and the analytics export reads it; its
// field order and omitempty tags are the file's bytes.
type SampleLine struct {
	Seq         int64      `json:"seq"`
	Source      string     `json:"source"`
	SourceIndex int64      `json:"source_index"`
	Frame       uint64     `json:"frame"`
	UnixTimeNs  int64      `json:"unix_time_ns"`
	SimTime     float64    `json:"sim_time"`
	LabelPath   string     `json:"label_path"`
	ImagePath   string     `json:"image_path"`
	Width       int64      `json:"width"`
	Height      int64      `json:"height"`
	Kept        bool       `json:"kept"`
	Reasons     []string   `json:"reasons"`
	Detail      string     `json:"detail,omitempty"` // every reason with its cause in words (validate.Describe)
	Error       string     `json:"error,omitempty"`  // the late decode failure, when there was one
	Index       int64      `json:"index"`            // position among kept samples, -1 when skipped
	Shard       string     `json:"shard,omitempty"`
	ShardIndex  int64      `json:"shard_index"` // position within the shard, -1 when skipped
	BoxCount    int64      `json:"box_count"`
	ClassIndex  []int64    `json:"class_index,omitempty"`
	Letterbox   *Letterbox `json:"letterbox,omitempty"` // kept samples: where the image landed in the target
	// Identity is the kept sample's input identity: the hex sha256 of
	// what decides its image tensor (the encoded image bytes and the
	// pixel recipe), "" (left out) for a skipped sample, one whose image
	// could not be read, and in versions built before it existed.
	Identity string `json:"identity,omitempty"`
}

// Letterbox is the provenance of a kept sample's image in target space:
// the source was scaled by (scale_x, scale_y) to resized_width x
// resized_height and placed at (pad_x, pad_y).
type Letterbox struct {
	ScaleX        float64 `json:"scale_x"`
	ScaleY        float64 `json:"scale_y"`
	ResizedWidth  int64   `json:"resized_width"`
	ResizedHeight int64   `json:"resized_height"`
	PadX          int64   `json:"pad_x"`
	PadY          int64   `json:"pad_y"`
}

// DecodeSampleLine decodes one line and checks what does not depend on
// its neighbours: field ranges and the kept/skipped shape.
func DecodeSampleLine(raw []byte) (*SampleLine, error) {
	if len(raw) > MaxSampleLineBytes {
		return nil, fmt.Errorf("line is %d bytes, more than %d", len(raw), MaxSampleLineBytes)
	}
	// index and shard_index are -1 when absent, as for a skipped sample.
	s := &SampleLine{Index: -1, ShardIndex: -1}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	switch {
	case s.Seq < 0:
		return nil, fmt.Errorf("seq %d", s.Seq)
	case s.Frame > math.MaxInt64:
		return nil, fmt.Errorf("frame %d does not fit int64", s.Frame)
	case s.SourceIndex < 0:
		return nil, fmt.Errorf("source_index %d", s.SourceIndex)
	case s.Width < 0 || s.Height < 0:
		return nil, fmt.Errorf("size %dx%d", s.Width, s.Height)
	case s.BoxCount != int64(len(s.ClassIndex)):
		return nil, fmt.Errorf("box_count %d but %d class indices", s.BoxCount, len(s.ClassIndex))
	}
	for _, c := range s.ClassIndex {
		if c < 0 {
			return nil, fmt.Errorf("class_index %d", c)
		}
	}
	for _, r := range s.Reasons {
		if r == "" {
			return nil, errors.New("an empty reason code")
		}
	}
	if s.Kept {
		if s.Index < 0 || s.Shard == "" || s.ShardIndex < 0 || s.Letterbox == nil {
			return nil, fmt.Errorf("kept sample without index, shard, shard_index or letterbox")
		}
	} else if s.Index != -1 || s.Shard != "" || s.ShardIndex != -1 || s.BoxCount != 0 || s.Letterbox != nil {
		return nil, fmt.Errorf("skipped sample with a shard position, boxes or letterbox")
	}
	if s.Identity != "" && !isHexDigest(s.Identity) {
		return nil, fmt.Errorf("identity %.80q: want 64 lowercase hex digits", s.Identity)
	}
	if s.Reasons == nil {
		s.Reasons = []string{}
	}
	if len(s.ClassIndex) == 0 {
		s.ClassIndex = nil // as written: class_index is left out when empty
	}
	return s, nil
}

// MaxReportBytes bounds build_report.json before it is read: it is a
// few dozen fields.
const MaxReportBytes = 1 << 20

// BuildReport is build_report.json as docs/format/manifest.md defines it
// (written by pipeline.Report).
type BuildReport struct {
	Version          string  `json:"version"`
	CodeVersion      string  `json:"code_version"`
	Host             string  `json:"host"`
	GOOS             string  `json:"goos"`
	GOARCH           string  `json:"goarch"`
	Workers          int64   `json:"workers"`
	StartedAtMs      int64   `json:"started_at_ms"`
	InputSamples     int64   `json:"input_samples"`
	Samples          int64   `json:"samples"`
	Skipped          int64   `json:"skipped"`
	Shards           int64   `json:"shards"`
	BytesWritten     int64   `json:"bytes_written"`
	SamplesPerSecond float64 `json:"samples_per_second"`
	MBPerSecond      float64 `json:"mb_per_second"`
	JPEGFallbacks    *int64  `json:"jpeg_fallbacks"` // nil in reports written before it
	// Reuse is what the version's shards took from published versions;
	// nil in reports written before reuse existed.
	Reuse *struct {
		Reused      int64 `json:"reused"`
		Decoded     int64 `json:"decoded"`
		FellBack    int64 `json:"fell_back"`
		BytesCopied int64 `json:"bytes_copied"`
	} `json:"reuse"`
	Phases struct {
		Scan      float64 `json:"scan"`
		Validate  float64 `json:"validate"`
		Read      float64 `json:"read"`
		Decode    float64 `json:"decode"`
		Resize    float64 `json:"resize"`
		Normalize float64 `json:"normalize"`
		Write     float64 `json:"write"`
		Publish   float64 `json:"publish"`
		Total     float64 `json:"total"`
	} `json:"phases_seconds"`
}

// DecodeBuildReport decodes and range-checks report bytes.
func DecodeBuildReport(raw []byte) (*BuildReport, error) {
	if len(raw) > MaxReportBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", len(raw), MaxReportBytes)
	}
	var r BuildReport
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	for name, v := range map[string]int64{
		"workers": r.Workers, "input_samples": r.InputSamples, "samples": r.Samples,
		"skipped": r.Skipped, "shards": r.Shards, "bytes_written": r.BytesWritten,
	} {
		if v < 0 {
			return nil, fmt.Errorf("%s is %d", name, v)
		}
	}
	if r.JPEGFallbacks != nil && (*r.JPEGFallbacks < 0 || *r.JPEGFallbacks > r.Samples) {
		return nil, fmt.Errorf("jpeg_fallbacks is %d of %d samples", *r.JPEGFallbacks, r.Samples)
	}
	if u := r.Reuse; u != nil && (u.Reused < 0 || u.Decoded < 0 || u.FellBack < 0 || u.FellBack > u.Decoded || u.BytesCopied < 0) {
		return nil, fmt.Errorf("reuse counts %d reused, %d decoded, %d fell back, %d bytes", u.Reused, u.Decoded, u.FellBack, u.BytesCopied)
	}
	p := r.Phases
	for _, v := range []float64{r.SamplesPerSecond, r.MBPerSecond, p.Scan, p.Validate, p.Read, p.Decode, p.Resize, p.Normalize, p.Write, p.Publish, p.Total} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("a rate or phase time is %v", v)
		}
	}
	return &r, nil
}

// MaxRecipeBytes bounds a version recipe before it is parsed; real ones are
// a few kilobytes.
const MaxRecipeBytes = 1 << 20

// ParseRecipe decodes a version_recipe: one `key="go-quoted value"` line
// per key, each ending in a newline (warehouse.Recipe.Encode).
func ParseRecipe(s string) (map[string]string, error) {
	if len(s) > MaxRecipeBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", len(s), MaxRecipeBytes)
	}
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("no final newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		key, quoted, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("line %d: no key=value", i+1)
		}
		value, err := strconv.Unquote(quoted)
		if err != nil || !strings.HasPrefix(quoted, `"`) {
			return nil, fmt.Errorf("line %d (%s): value is not a quoted string", i+1, key)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: key %s repeated", i+1, key)
		}
		out[key] = value
	}
	return out, nil
}

// isHexDigest reports whether s is a sha256 in lowercase hex.
func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
