package validate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// meaning is what each reason means in words, for a sample whose source
// could not say more (docs/sources/README.md#reason-codes has the same text).
var meaning = map[Reason]string{
	ReasonMissingFile:            "the image file named by the label does not exist",
	ReasonMissingImage:           "the label names no image or says image_present=false",
	ReasonDecodeError:            "the image cannot be decoded",
	ReasonEmpty:                  "the label lists no boxes",
	ReasonInvalidBBox:            "a box is not finite or its max is not greater than its min",
	ReasonBBoxOutOfBounds:        "a box lies outside the image",
	ReasonBadSchema:              "the label is not valid JSON or a field has the wrong type",
	ReasonDuplicateFrame:         "a second label with a frame already seen in this run",
	ReasonPathEscape:             "the image path leaves its folder",
	ReasonSizeMismatch:           "resize_mode none and the image is not the target size",
	ReasonBoxesTruncated:         "more boxes than max_boxes: the extra ones were dropped",
	ReasonDegenerateBoxDropped:   "a box became empty after letterbox and clamping",
	ReasonUnknownClass:           "a box's class is not in the class list",
	ReasonChecksumMismatch:       "a block's checksum does not match its bytes",
	ReasonDecompressError:        "a compressed block does not decompress",
	ReasonBlockSizeMismatch:      "a block's size disagrees with its length, dtype and shape",
	ReasonMissingBlock:           "a declared or configured block is absent",
	ReasonTimestampNotMonotonic:  "the timestamp is not after the previous one",
	ReasonEpisodeGap:             "the chunks leave a gap in the time steps",
	ReasonChunkOverlap:           "chunks overlap or repeat time steps",
	ReasonDimsMismatch:           "the image shape changes within the episode",
	ReasonNonFinite:              "an extra holds NaN or Inf",
	ReasonCameraMissing:          "the configured camera is absent in this frame",
	ReasonLengthMismatch:         "a per-frame vector's length disagrees with the index",
	ReasonZeroFrames:             "the episode has no frames",
	ReasonNoMatchWithinTolerance: "no sample of an extra's sensor is near enough in time",
	ReasonLengthTruncated:        "channels disagreed on length; the common length was used",
	ReasonUnknownImage:           "the annotations name an image id that images does not list",
	ReasonDuplicateImage:         "an image id or file is listed a second time",
	ReasonImageSizeMismatch:      "the dataset's width/height disagree with the image file's header",
	ReasonCrowdSkipped:           "iscrowd annotations were not used as boxes",
}

// Meaning returns what r means in words; an unknown code says so.
func (r Reason) Meaning() string {
	if m, ok := meaning[r]; ok {
		return m
	}
	return "an unknown reason code"
}

// Details maps a sample's reasons to their causes in words, one per
// reason: the first cause found wins (a sample with three bad boxes names
// the first). A reason without an entry is explained by its Meaning.
type Details map[Reason]string

// Note records detail as r's cause unless one is already recorded. It
// allocates the map on first use: d may be nil.
func (d *Details) Note(r Reason, detail string) {
	if detail == "" {
		return
	}
	if *d == nil {
		*d = Details{}
	}
	if _, ok := (*d)[r]; !ok {
		(*d)[r] = detail
	}
}

// Describe returns reasons with their causes, in the order given, as one
// line: "invalid_bbox: bbox_px [10, 20, 5, 40]: x_max is not greater than
// x_min; empty: the
// label lists no boxes". It is "" for a sample without reasons.
func Describe(reasons []Reason, d Details) string {
	var sb strings.Builder
	for i, r := range reasons {
		if i > 0 {
			sb.WriteString("; ")
		}
		detail, ok := d[r]
		if !ok {
			detail = r.Meaning()
		}
		sb.WriteString(string(r))
		sb.WriteString(": ")
		sb.WriteString(detail)
	}
	return sb.String()
}

// ExplainBox says why a box (field names it: bbox_px, bbox_norm, bbox)
// got r from CheckOrder, CheckNorm, CheckPx or NormToPx against a w x h
// image (w or h <= 0: the size is unknown).
func ExplainBox(field string, b [4]float64, r Reason, w, h int) string {
	prefix := field + " " + FormatBox(b) + ": "
	for _, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return prefix + "not finite"
		}
	}
	switch {
	case r == ReasonInvalidBBox && !(b[0] < b[2]):
		return prefix + "x_max is not greater than x_min"
	case r == ReasonInvalidBBox && !(b[1] < b[3]):
		return prefix + "y_max is not greater than y_min"
	case r == ReasonInvalidBBox:
		return prefix + "invalid"
	case w > 0 && h > 0:
		return prefix + fmt.Sprintf("outside the %dx%d image", w, h)
	case w > 0 || h > 0:
		return prefix + fmt.Sprintf("no box fits a %dx%d image", w, h)
	}
	return prefix + "outside [0, 1]"
}

// FormatBox writes a box as the labels do: [x0, y0, x1, y1].
func FormatBox(b [4]float64) string {
	parts := make([]string, 4)
	for i, v := range b {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
