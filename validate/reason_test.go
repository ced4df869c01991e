package validate

import (
	"slices"
	"testing"
)

func TestReasonClass(t *testing.T) {
	tests := []struct {
		reason Reason
		want   Class
	}{
		{"missing_image", ClassMissing},
		{"missing_file", ClassMissing},
		{"invalid_bbox", ClassInvalid},
		{"bbox_out_of_bounds", ClassInvalid},
		{"bad_schema", ClassInvalid},
		{"duplicate_frame", ClassInvalid},
		{"path_escape", ClassInvalid},
		{"decode_error", ClassInvalid},
		{"size_mismatch", ClassInvalid},
		{"empty", ClassEmpty},
		{"boxes_truncated", ClassWarning},
		{"degenerate_box_dropped", ClassWarning},
		{"unknown_class", ClassInvalid},
		// Unknown codes fail closed.
		{"some_future_code", ClassInvalid},
		{"", ClassInvalid},
	}
	for _, tt := range tests {
		if got := tt.reason.Class(); got != tt.want {
			t.Errorf("Reason(%q).Class() = %q, want %q", tt.reason, got, tt.want)
		}
	}
}

func TestAllReasons(t *testing.T) {
	// The order is part of the report format: written out by hand.
	want := []Reason{
		"missing_image", "missing_file", "camera_missing",
		"path_escape", "bad_schema", "duplicate_frame", "decode_error",
		"invalid_bbox", "bbox_out_of_bounds", "size_mismatch", "unknown_class",
		"checksum_mismatch", "decompress_error", "block_size_mismatch", "missing_block",
		"timestamp_not_monotonic", "episode_gap", "chunk_overlap", "dims_mismatch",
		"nonfinite", "length_mismatch", "zero_frames", "no_match_within_tolerance",
		"unknown_image", "duplicate_image", "image_size_mismatch",
		"empty",
		"boxes_truncated", "degenerate_box_dropped", "length_truncated", "crowd_skipped",
	}
	got := AllReasons()
	if !slices.Equal(got, want) {
		t.Fatalf("AllReasons() = %v\nwant %v", got, want)
	}
	// Every declared constant is listed.
	declared := []Reason{ReasonMissingFile, ReasonMissingImage, ReasonDecodeError, ReasonEmpty,
		ReasonInvalidBBox, ReasonBBoxOutOfBounds, ReasonBadSchema, ReasonDuplicateFrame,
		ReasonPathEscape, ReasonSizeMismatch, ReasonBoxesTruncated, ReasonDegenerateBoxDropped,
		ReasonUnknownClass}
	for _, r := range declared {
		if !slices.Contains(got, r) {
			t.Errorf("AllReasons() lacks %s", r)
		}
	}
	// The caller owns the returned slice.
	got[0] = "changed"
	if AllReasons()[0] != "missing_image" {
		t.Error("AllReasons returned shared storage")
	}
}

func TestSkip(t *testing.T) {
	tests := []struct {
		name      string
		reasons   []Reason
		skipEmpty bool
		want      bool
	}{
		{"clean", nil, false, false},
		{"clean skip_empty", nil, true, false},
		{"invalid", []Reason{ReasonInvalidBBox}, false, true},
		{"missing", []Reason{ReasonMissingFile}, false, true},
		{"missing image", []Reason{ReasonMissingImage}, false, true},
		{"empty kept", []Reason{ReasonEmpty}, false, false},
		{"empty skipped", []Reason{ReasonEmpty}, true, true},
		{"warnings kept", []Reason{ReasonBoxesTruncated, ReasonDegenerateBoxDropped}, true, false},
		{"warning then invalid", []Reason{ReasonBoxesTruncated, ReasonDecodeError}, false, true},
		{"empty then missing", []Reason{ReasonEmpty, ReasonMissingImage}, false, true},
		{"unknown code", []Reason{"new_code"}, false, true},
	}
	for _, tt := range tests {
		if got := Skip(tt.reasons, tt.skipEmpty); got != tt.want {
			t.Errorf("%s: Skip(%v, %v) = %v, want %v", tt.name, tt.reasons, tt.skipEmpty, got, tt.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want []Reason
	}{
		{nil, nil},
		{[]Reason{}, nil},
		{[]Reason{ReasonEmpty}, []Reason{ReasonEmpty}},
		{[]Reason{ReasonInvalidBBox, ReasonMissingFile, ReasonInvalidBBox}, []Reason{ReasonMissingFile, ReasonInvalidBBox}},
		{[]Reason{"zz_new", ReasonBoxesTruncated, "aa_new", ReasonBadSchema}, []Reason{ReasonBadSchema, ReasonBoxesTruncated, "aa_new", "zz_new"}},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		got := Normalize(in)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Normalize(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("Normalize modified its argument: %v", in)
		}
	}
}
