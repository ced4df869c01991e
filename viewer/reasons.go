package viewer

import "warehouse-etl/validate"

// reasonWords say what each reason code means, for a person (the codes'
// comments in package validate, in words a reviewer reads).
var reasonWords = map[validate.Reason]string{
	validate.ReasonMissingFile:            "the image file the label names does not exist",
	validate.ReasonMissingImage:           "the label says there is no image, or names none",
	validate.ReasonDecodeError:            "the image exists but could not be decoded",
	validate.ReasonEmpty:                  "the label has no boxes",
	validate.ReasonInvalidBBox:            "a box has min >= max, a non-finite or negative size, or no coordinates",
	validate.ReasonBBoxOutOfBounds:        "a box lies outside the image by more than the tolerance",
	validate.ReasonBadSchema:              "the label JSON does not parse or a field has the wrong type",
	validate.ReasonDuplicateFrame:         "a second label with a frame id already seen in the run",
	validate.ReasonPathEscape:             "the image path leaves its run folder",
	validate.ReasonSizeMismatch:           "resize mode none and the image is not the target size",
	validate.ReasonBoxesTruncated:         "more boxes than max_boxes: the extra ones were dropped (kept)",
	validate.ReasonDegenerateBoxDropped:   "a box became empty after letterbox and clamping (kept)",
	validate.ReasonUnknownClass:           "a box's class is not in the class list",
	validate.ReasonChecksumMismatch:       "a block's CRC or hash does not match its bytes",
	validate.ReasonDecompressError:        "a compressed block does not decompress",
	validate.ReasonBlockSizeMismatch:      "a block's size disagrees with length x dtype x shape",
	validate.ReasonMissingBlock:           "a declared or configured block or channel is absent",
	validate.ReasonTimestampNotMonotonic:  "the timestamp is not after the previous step's",
	validate.ReasonEpisodeGap:             "the episode's chunks leave a gap in the time steps",
	validate.ReasonChunkOverlap:           "the episode's chunks overlap or repeat time steps",
	validate.ReasonDimsMismatch:           "the image shape changes within the episode",
	validate.ReasonNonFinite:              "an extra holds NaN or Inf",
	validate.ReasonCameraMissing:          "the configured camera is absent in this frame",
	validate.ReasonLengthMismatch:         "a per-frame vector's length disagrees with the index",
	validate.ReasonZeroFrames:             "an episode with no frames",
	validate.ReasonNoMatchWithinTolerance: "no sample of an extra's sensor is near enough in time",
	validate.ReasonLengthTruncated:        "channels disagreed on length; the common length was used (kept)",
	validate.ReasonUnknownImage:           "the annotations name an image id the image list does not have",
	validate.ReasonDuplicateImage:         "an image id or file listed a second time",
	validate.ReasonImageSizeMismatch:      "the dataset's width/height disagree with the image file",
	validate.ReasonCrowdSkipped:           "crowd annotations were not used as boxes (kept)",
}

// describeReason is the reason's meaning, or the code when unknown.
func describeReason(code string) string {
	if w, ok := reasonWords[validate.Reason(code)]; ok {
		return w
	}
	return code
}
