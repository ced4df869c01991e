// Package validate holds the per-sample reason codes, the label checks that
// produce them, the per-run and total summaries, and the thresholds that can
// fail a build. It imports nothing of this module: sources call its checks,
// the pipeline accumulates its summaries and evaluates its thresholds.
//
// # Reasons and classes
//
// Every Reason belongs to one Class. Invalid and Missing reasons always skip
// the sample; an Empty reason skips it only when the build sets skip_empty;
// Warning reasons describe a sample that is kept (see Skip).
//
// # Counting
//
// Counts are counts of samples, never of boxes or reasons. Every input
// sample, kept or skipped, is added exactly once:
//
//   - Total: every sample.
//   - NonEmpty / Empty: whether the sample has at least one valid box (a box
//     that passed every check). NonEmpty + Empty = Total. A sample whose
//     boxes are all invalid counts as Empty here although its reasons are
//     invalid_bbox and not empty; ByReason[empty] counts only the samples
//     with the empty reason (a label without any boxes).
//   - Invalid: samples with at least one reason of class Invalid.
//   - MissingImage: samples with missing_image or camera_missing. MissingFile: samples with
//     missing_file and without missing_image, so that MissingImage +
//     MissingFile counts every sample with a missing image exactly once
//     (this is the "missing" count the thresholds use).
//   - Kept / Skipped: whether the sample goes into the warehouse.
//     Kept + Skipped = Total.
//   - ByReason: samples per reason; a sample with two reasons counts under
//     both, a reason listed twice on one sample counts once.
//
// A sample counted as kept that later fails (a decode error found at
// transform time) is moved with Summary.RecordLate, which keeps all of the
// above true.
package validate

import (
	"cmp"
	"slices"
)

// Reason is a stable, machine-readable code attached to a sample. Codes are
// part of the on-disk contract (manifest summary, skipped.jsonl, Parquet):
// never rename one, only add.
type Reason string

// Label and image reasons.
const (
	ReasonMissingFile          Reason = "missing_file"           // the image file named by the label does not exist
	ReasonMissingImage         Reason = "missing_image"          // the label says image_present=false, or names no image
	ReasonDecodeError          Reason = "decode_error"           // the image exists but cannot be decoded
	ReasonEmpty                Reason = "empty"                  // the sample has no boxes
	ReasonInvalidBBox          Reason = "invalid_bbox"           // min >= max, non-finite, negative size, or neither bbox_px nor bbox_norm
	ReasonBBoxOutOfBounds      Reason = "bbox_out_of_bounds"     // a box lies outside the image by more than the tolerance
	ReasonBadSchema            Reason = "bad_schema"             // label JSON unparseable or a field has the wrong type
	ReasonDuplicateFrame       Reason = "duplicate_frame"        // a second label with a frame_id already seen in the same run
	ReasonPathEscape           Reason = "path_escape"            // the image path leaves its run folder
	ReasonSizeMismatch         Reason = "size_mismatch"          // resize mode none and the image is not the target size
	ReasonBoxesTruncated       Reason = "boxes_truncated"        // more boxes than max_boxes: the extra ones were dropped (warning)
	ReasonDegenerateBoxDropped Reason = "degenerate_box_dropped" // a box became empty after letterbox and clamping (warning)
	ReasonUnknownClass         Reason = "unknown_class"          // a box's class is not in the pinned class list
)

// Episode reasons (WShard, kinodb, roverd sources).
const (
	ReasonChecksumMismatch       Reason = "checksum_mismatch"         // a block's CRC or hash does not match its bytes
	ReasonDecompressError        Reason = "decompress_error"          // a compressed block or stream does not decompress
	ReasonBlockSizeMismatch      Reason = "block_size_mismatch"       // a block's size disagrees with length x dtype x shape
	ReasonMissingBlock           Reason = "missing_block"             // a declared or configured block/channel is absent
	ReasonTimestampNotMonotonic  Reason = "timestamp_not_monotonic"   // a time step's timestamp is not after the previous one
	ReasonEpisodeGap             Reason = "episode_gap"               // chunks leave a gap in the time-step range
	ReasonChunkOverlap           Reason = "chunk_overlap"             // chunks overlap or repeat time steps
	ReasonDimsMismatch           Reason = "dims_mismatch"             // the image shape changes within an episode
	ReasonNonFinite              Reason = "nonfinite"                 // an extra holds NaN or Inf
	ReasonCameraMissing          Reason = "camera_missing"            // the configured camera is absent in this frame
	ReasonLengthMismatch         Reason = "length_mismatch"           // a per-frame vector's length disagrees with the index
	ReasonZeroFrames             Reason = "zero_frames"               // an episode with no frames (one placeholder sample records it)
	ReasonNoMatchWithinTolerance Reason = "no_match_within_tolerance" // no sample of an extra's sensor is near enough in time
	ReasonLengthTruncated        Reason = "length_truncated"          // channels disagreed on length; the common length was used (warning)
)

// Detection dataset reasons (COCO and YOLO sources).
const (
	ReasonUnknownImage      Reason = "unknown_image"       // COCO annotations name an image id that `images` does not list (one placeholder sample per id)
	ReasonDuplicateImage    Reason = "duplicate_image"     // an image id or file listed a second time
	ReasonImageSizeMismatch Reason = "image_size_mismatch" // the dataset's width/height disagree with the image file's header
	ReasonCrowdSkipped      Reason = "crowd_skipped"       // COCO iscrowd annotations were not used as boxes (warning)
)

// Class groups reasons by what they do to a sample.
type Class string

// Reason classes.
const (
	ClassInvalid Class = "invalid" // the sample is wrong: always skipped, counted in Invalid
	ClassMissing Class = "missing" // the sample has no image: always skipped, counted in MissingImage/MissingFile
	ClassEmpty   Class = "empty"   // the sample has no boxes: skipped only with skip_empty
	ClassWarning Class = "warning" // the sample is kept; something about it was adjusted
)

// allReasons is every known reason in its stable order, with its class.
// The order is the order of Sample.Reasons after Normalize.
var allReasons = []struct {
	reason Reason
	class  Class
}{
	{ReasonMissingImage, ClassMissing},
	{ReasonMissingFile, ClassMissing},
	{ReasonCameraMissing, ClassMissing},
	{ReasonPathEscape, ClassInvalid},
	{ReasonBadSchema, ClassInvalid},
	{ReasonDuplicateFrame, ClassInvalid},
	{ReasonDecodeError, ClassInvalid},
	{ReasonInvalidBBox, ClassInvalid},
	{ReasonBBoxOutOfBounds, ClassInvalid},
	{ReasonSizeMismatch, ClassInvalid},
	{ReasonUnknownClass, ClassInvalid},
	{ReasonChecksumMismatch, ClassInvalid},
	{ReasonDecompressError, ClassInvalid},
	{ReasonBlockSizeMismatch, ClassInvalid},
	{ReasonMissingBlock, ClassInvalid},
	{ReasonTimestampNotMonotonic, ClassInvalid},
	{ReasonEpisodeGap, ClassInvalid},
	{ReasonChunkOverlap, ClassInvalid},
	{ReasonDimsMismatch, ClassInvalid},
	{ReasonNonFinite, ClassInvalid},
	{ReasonLengthMismatch, ClassInvalid},
	{ReasonZeroFrames, ClassInvalid},
	{ReasonNoMatchWithinTolerance, ClassInvalid},
	{ReasonUnknownImage, ClassInvalid},
	{ReasonDuplicateImage, ClassInvalid},
	{ReasonImageSizeMismatch, ClassInvalid},
	{ReasonEmpty, ClassEmpty},
	{ReasonBoxesTruncated, ClassWarning},
	{ReasonDegenerateBoxDropped, ClassWarning},
	{ReasonLengthTruncated, ClassWarning},
	{ReasonCrowdSkipped, ClassWarning},
}

// AllReasons returns every known reason in a stable order: missing, then
// invalid, then empty, then warnings. Reports list reasons in this order.
func AllReasons() []Reason {
	out := make([]Reason, len(allReasons))
	for i, e := range allReasons {
		out[i] = e.reason
	}
	return out
}

// rank is r's position in AllReasons, or len(AllReasons) when unknown.
func (r Reason) rank() int {
	for i, e := range allReasons {
		if e.reason == r {
			return i
		}
	}
	return len(allReasons)
}

// Class returns the class of r. A code this package does not know is
// ClassInvalid: a reason nobody classified must not let a sample through.
func (r Reason) Class() Class {
	if i := r.rank(); i < len(allReasons) {
		return allReasons[i].class
	}
	return ClassInvalid
}

// Skip reports whether a sample with these reasons stays out of the
// warehouse: any Invalid or Missing reason, or an Empty reason when
// skipEmpty is set. Warning reasons never skip.
func Skip(reasons []Reason, skipEmpty bool) bool {
	for _, r := range reasons {
		switch r.Class() {
		case ClassInvalid, ClassMissing:
			return true
		case ClassEmpty:
			if skipEmpty {
				return true
			}
		}
	}
	return false
}

// Normalize returns reasons without repeats, in AllReasons order (unknown
// codes last, by name), so that equal sets of reasons compare and print
// equal. It does not modify its argument.
func Normalize(reasons []Reason) []Reason {
	if len(reasons) == 0 {
		return nil
	}
	out := slices.Clone(reasons)
	slices.SortFunc(out, func(a, b Reason) int {
		if c := cmp.Compare(a.rank(), b.rank()); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return slices.Compact(out)
}
