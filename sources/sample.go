// Package sources defines the Sample record that every input layout yields.
// Each sub-package (capture, and later wshard, kdb, roverd) scans one layout
// in a stable order, runs the label checks of package validate on what it
// reads, and hands the pipeline fully described samples.
package sources

import (
	"context"
	"fmt"

	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// ClassKey names a class as the labels spell it: a numeric id, a name, or
// both. The pipeline maps keys to dense class indices recorded in the manifest.
type ClassKey struct {
	ID    int64  `json:"id,omitempty"`
	HasID bool   `json:"has_id,omitempty"`
	Name  string `json:"name,omitempty"`
}

// Box is one labelled box in source pixels, already resolved from bbox_px or
// bbox_norm and checked: x0 < x1, y0 < y1, all finite, inside the image up to
// the tolerance (and clamped to it).
type Box struct {
	X0    float64  `json:"x0"`
	Y0    float64  `json:"y0"`
	X1    float64  `json:"x1"`
	Y1    float64  `json:"y1"`
	Class ClassKey `json:"class"`
}

// Sample is one input sample, kept or not. Sources fill every field they
// know; Reasons lists everything validation found (empty for a clean sample).
type Sample struct {
	Seq         int64   `json:"seq"`               // position in scan order over all inputs, from 0
	Source      string  `json:"source"`            // run folder or episode name
	SourceIndex int32   `json:"source_index"`      // index of Source in scan order
	Frame       uint64  `json:"frame"`             // frame_id or time step
	UnixTimeNs  int64   `json:"unix_time_ns"`      // wall-clock capture time, 0 when unknown
	SimTime     float64 `json:"sim_time"`          // simulation time in seconds, 0 when unknown
	LabelPath   string  `json:"label_path"`        // label file, relative to the dataset root ("" when none)
	ImagePath   string  `json:"image_path"`        // image file, relative to the dataset root ("" when none)
	Width       int     `json:"width"`             // source image width from its header, 0 when unknown
	Height      int     `json:"height"`            // source image height from its header, 0 when unknown
	Locator     string  `json:"locator,omitempty"` // where a non-file image lives (episode sources); opaque to the pipeline
	Boxes       []Box   `json:"boxes,omitempty"`
	// ValidBoxes counts the label's boxes that passed every check that could
	// be made. It equals len(Boxes) when the image size is known; when it is
	// not (image missing, escaping or unreadable) boxes cannot be resolved
	// to pixels and Boxes is empty, but a box that is fine as far as the
	// label goes still counts, so the sample is counted as non-empty
	// (validate.Counts) for what its label says, not for its image's fate.
	ValidBoxes int               `json:"valid_boxes"`
	Reasons    []validate.Reason `json:"reasons,omitempty"`
	// Details says, per reason, what the source found in words (the box,
	// the byte of the JSON, the header's size); a reason without one is
	// explained by its Meaning (validate.Describe).
	Details validate.Details `json:"details,omitempty"`
	// Extras are the sample's low-dimensional signals (state, action,
	// reward, ...) flattened in the order and shapes of Source.Extras,
	// converted to float32. Empty for sources without extras; a sample
	// whose extras could not be read carries a reason instead.
	Extras []float32 `json:"extras,omitempty"`
}

// Reject adds reason r to s with its cause in words (see validate.Details).
// Sources that collect reasons in a slice of their own call Explain.
func (s *Sample) Reject(r validate.Reason, detail string) {
	s.Reasons = append(s.Reasons, r)
	s.Details.Note(r, detail)
}

// Explain records detail as the cause of reason r without adding r.
func (s *Sample) Explain(r validate.Reason, detail string) {
	s.Details.Note(r, detail)
}

// Image is a sample's image as a source hands it over: either encoded file
// bytes (PNG, JPEG, ...) that the transforms package decodes, or raw 8-bit
// RGB pixels (episode sources that store frames uncompressed). Sources
// expand grayscale frames to RGB themselves.
type Image struct {
	Encoded []byte
	Pixels  []byte // packed RGB rows, Stride bytes apart
	Width   int
	Height  int
	Stride  int
	// Release, when set, is called once the caller no longer reads
	// Encoded or Pixels: the source may then reuse or drop their memory
	// (wshard's cached camera blocks).
	Release func()
}

// ExtraSpec describes one extra carried per sample: a fixed-shape tensor
// stored as float32 in the shard's extras section.
type ExtraSpec struct {
	Name        string `json:"name"`         // e.g. "action/ctrl", "reward"
	Shape       []int  `json:"shape"`        // per-sample shape; [] for a scalar
	SourceDType string `json:"source_dtype"` // the dtype in the source file, e.g. "f64", "bf16"
}

// Elements is the number of float32 values the extra takes per sample.
func (e ExtraSpec) Elements() int {
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	return n
}

// ClassLister is a Source whose dataset declares its class table (COCO
// categories, YOLO names). Classes returns it in index order, valid from
// New on; the pipeline uses it instead of the classes the boxes happen to
// use (a box whose key it does not list gets unknown_class), unless the
// config pins its own list of names.
type ClassLister interface {
	Classes() []ClassKey
}

// Source is one input layout rooted at a dataset directory.
type Source interface {
	// Kind is the config name of the layout, e.g. "capture".
	Kind() string
	// Scan calls fn for every input sample in a stable order: sources in
	// natural order, frames in frame order. Seq counts from 0 without gaps.
	// A malformed input becomes a sample with reasons, never an error; Scan
	// returns an error only when the dataset itself cannot be read.
	Scan(ctx context.Context, fn func(*Sample) error) error
	// Fingerprint calls fn for every file Scan reads, in a stable order.
	Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error
	// ReadImage returns a sample's image. An error here, for a sample the
	// scan accepted, becomes a late decode_error for that sample.
	ReadImage(s *Sample) (Image, error)
	// Extras lists the per-sample extras every Sample.Extras follows, in
	// order; nil when the source has none. Valid after New.
	Extras() []ExtraSpec
	// Entries describes the runs or episodes seen by the last Scan, in
	// source index order.
	Entries() []warehouse.SourceEntry
}

// String names a class key as the labels spell it: "3", "car" or "3 (car)".
func (k ClassKey) String() string {
	switch {
	case k.HasID && k.Name != "":
		return fmt.Sprintf("%d (%s)", k.ID, k.Name)
	case k.HasID:
		return fmt.Sprint(k.ID)
	}
	return fmt.Sprintf("%q", k.Name)
}
