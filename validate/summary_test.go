package validate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// sample is one Add call.
type sample struct {
	nonEmpty bool
	reasons  []Reason
	kept     bool
}

func TestCountsAdd(t *testing.T) {
	tests := []struct {
		name    string
		samples []sample
		want    Counts
	}{
		{"nothing", nil, Counts{}},
		{
			"clean and empty",
			[]sample{{true, nil, true}, {false, []Reason{ReasonEmpty}, true}},
			Counts{Total: 2, NonEmpty: 1, Empty: 1, Kept: 2, ByReason: map[Reason]int64{ReasonEmpty: 1}},
		},
		{
			"empty skipped",
			[]sample{{false, []Reason{ReasonEmpty}, false}},
			Counts{Total: 1, Empty: 1, Skipped: 1, ByReason: map[Reason]int64{ReasonEmpty: 1}},
		},
		{
			// Two invalid reasons on one sample: Invalid counts the sample once,
			// ByReason counts it under each reason.
			"two invalid reasons one sample",
			[]sample{{true, []Reason{ReasonInvalidBBox, ReasonBBoxOutOfBounds}, false}},
			Counts{Total: 1, NonEmpty: 1, Invalid: 1, Skipped: 1,
				ByReason: map[Reason]int64{ReasonInvalidBBox: 1, ReasonBBoxOutOfBounds: 1}},
		},
		{
			"repeated reason counts once",
			[]sample{{false, []Reason{ReasonInvalidBBox, ReasonInvalidBBox}, false}},
			Counts{Total: 1, Empty: 1, Invalid: 1, Skipped: 1, ByReason: map[Reason]int64{ReasonInvalidBBox: 1}},
		},
		{
			// missing_image and missing_file on the same sample: missing once,
			// as MissingImage.
			"both missing reasons",
			[]sample{{true, []Reason{ReasonMissingFile, ReasonMissingImage}, false}},
			Counts{Total: 1, NonEmpty: 1, MissingImage: 1, Skipped: 1,
				ByReason: map[Reason]int64{ReasonMissingFile: 1, ReasonMissingImage: 1}},
		},
		{
			"missing and invalid",
			[]sample{{false, []Reason{ReasonMissingFile, ReasonBadSchema}, false}, {true, []Reason{ReasonMissingImage}, false}},
			Counts{Total: 2, NonEmpty: 1, Empty: 1, MissingImage: 1, MissingFile: 1, Invalid: 1, Skipped: 2,
				ByReason: map[Reason]int64{ReasonMissingFile: 1, ReasonBadSchema: 1, ReasonMissingImage: 1}},
		},
		{
			"warning kept",
			[]sample{{true, []Reason{ReasonBoxesTruncated}, true}},
			Counts{Total: 1, NonEmpty: 1, Kept: 1, ByReason: map[Reason]int64{ReasonBoxesTruncated: 1}},
		},
	}
	for _, tt := range tests {
		var c Counts
		for _, s := range tt.samples {
			c.Add(s.nonEmpty, s.reasons, s.kept)
		}
		if !reflect.DeepEqual(c, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, c, tt.want)
		}
	}
}

func TestCountsMissing(t *testing.T) {
	var c Counts
	c.Add(true, []Reason{ReasonMissingImage, ReasonMissingFile}, false)
	c.Add(true, []Reason{ReasonMissingFile}, false)
	c.Add(true, []Reason{ReasonMissingImage}, false)
	c.Add(true, nil, true)
	if got := c.Missing(); got != 3 {
		t.Errorf("Missing() = %d, want 3 (three samples without image)", got)
	}
}

func TestCountsJSON(t *testing.T) {
	c := Counts{Total: 8, NonEmpty: 7, Empty: 1, MissingImage: 2, MissingFile: 3, Invalid: 4, Kept: 5, Skipped: 6,
		ByReason: map[Reason]int64{ReasonEmpty: 1, ReasonBadSchema: 4}}
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"total":8,"non_empty":7,"empty":1,"missing_image":2,"missing_file":3,"invalid":4,"kept":5,"skipped":6,"by_reason":{"bad_schema":4,"empty":1}}`
	if string(got) != want {
		t.Errorf("json = %s\nwant   %s", got, want)
	}
	run, err := json.Marshal(RunSummary{Name: "run_2", Index: 1, Counts: Counts{Total: 1, Kept: 1, NonEmpty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	wantRun := `{"name":"run_2","index":1,"total":1,"non_empty":1,"empty":0,"missing_image":0,"missing_file":0,"invalid":0,"kept":1,"skipped":0}`
	if string(run) != wantRun {
		t.Errorf("run json = %s\nwant       %s", run, wantRun)
	}
}

func TestSummaryBuilder(t *testing.T) {
	var b SummaryBuilder
	adds := []struct {
		index int
		name  string
		s     sample
	}{
		{0, "run_2", sample{true, nil, true}},
		{0, "run_2", sample{false, []Reason{ReasonEmpty}, true}},
		{2, "run_10", sample{true, []Reason{ReasonMissingFile}, false}},
		{2, "run_10", sample{true, nil, true}},
		{3, "run_11", sample{false, []Reason{ReasonBadSchema}, false}},
	}
	for _, a := range adds {
		if err := b.Add(a.index, a.name, a.s.nonEmpty, a.s.reasons, a.s.kept); err != nil {
			t.Fatalf("Add(%d, %s): %v", a.index, a.name, err)
		}
	}
	want := Summary{
		Runs: []RunSummary{
			{Name: "run_2", Index: 0, Counts: Counts{Total: 2, NonEmpty: 1, Empty: 1, Kept: 2, ByReason: map[Reason]int64{ReasonEmpty: 1}}},
			{Name: "run_10", Index: 2, Counts: Counts{Total: 2, NonEmpty: 2, MissingFile: 1, Kept: 1, Skipped: 1, ByReason: map[Reason]int64{ReasonMissingFile: 1}}},
			{Name: "run_11", Index: 3, Counts: Counts{Total: 1, Empty: 1, Invalid: 1, Skipped: 1, ByReason: map[Reason]int64{ReasonBadSchema: 1}}},
		},
		Total: Counts{Total: 5, NonEmpty: 3, Empty: 2, MissingFile: 1, Invalid: 1, Kept: 3, Skipped: 2,
			ByReason: map[Reason]int64{ReasonEmpty: 1, ReasonMissingFile: 1, ReasonBadSchema: 1}},
	}
	got := b.Result()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Result():\n got %+v\nwant %+v", got, want)
	}
	// The result is a snapshot.
	got.Total.ByReason[ReasonEmpty] = 99
	got.Runs[0].Kept = 99
	if again := b.Result(); !reflect.DeepEqual(again, want) {
		t.Errorf("changing a Result changed the builder: %+v", again)
	}

	errorCases := []struct {
		index int
		name  string
		want  string
	}{
		{2, "run_10", "not in scan order"},
		{3, "run_12", "is run run_11, not run_12"},
	}
	for _, ec := range errorCases {
		err := b.Add(ec.index, ec.name, true, nil, true)
		if err == nil || !strings.Contains(err.Error(), ec.want) {
			t.Errorf("Add(%d, %s) = %v, want error containing %q", ec.index, ec.name, err, ec.want)
		}
	}
	if again := b.Result(); !reflect.DeepEqual(again, want) {
		t.Errorf("a rejected Add changed the counts: %+v", again)
	}
}

func TestSummaryBuilderEmpty(t *testing.T) {
	var b SummaryBuilder
	got, err := json.Marshal(b.Result())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"runs":[],"total":{"total":0,"non_empty":0,"empty":0,"missing_image":0,"missing_file":0,"invalid":0,"kept":0,"skipped":0}}`
	if string(got) != want {
		t.Errorf("empty summary json = %s\nwant %s", got, want)
	}
}

func TestRecordLate(t *testing.T) {
	newSummary := func() Summary {
		var b SummaryBuilder
		for _, a := range []struct {
			index int
			name  string
			s     sample
		}{
			{0, "a", sample{true, nil, true}},
			{0, "a", sample{true, nil, true}},
			{1, "b", sample{true, nil, true}},
			{1, "b", sample{false, []Reason{ReasonMissingImage}, false}},
		} {
			if err := b.Add(a.index, a.name, a.s.nonEmpty, a.s.reasons, a.s.kept); err != nil {
				t.Fatal(err)
			}
		}
		return b.Result()
	}
	tests := []struct {
		name      string
		index     int
		reason    Reason
		wantErr   string
		wantRun   Counts // counts of run index after the call
		wantTotal Counts
	}{
		{
			name: "decode error moves a kept sample", index: 0, reason: ReasonDecodeError,
			wantRun: Counts{Total: 2, NonEmpty: 2, Invalid: 1, Kept: 1, Skipped: 1, ByReason: map[Reason]int64{ReasonDecodeError: 1}},
			wantTotal: Counts{Total: 4, NonEmpty: 3, Empty: 1, MissingImage: 1, Invalid: 1, Kept: 2, Skipped: 2,
				ByReason: map[Reason]int64{ReasonMissingImage: 1, ReasonDecodeError: 1}},
		},
		{
			name: "missing file moves a kept sample", index: 1, reason: ReasonMissingFile,
			wantRun: Counts{Total: 2, NonEmpty: 1, Empty: 1, MissingImage: 1, MissingFile: 1, Skipped: 2,
				ByReason: map[Reason]int64{ReasonMissingImage: 1, ReasonMissingFile: 1}},
			wantTotal: Counts{Total: 4, NonEmpty: 3, Empty: 1, MissingImage: 1, MissingFile: 1, Kept: 2, Skipped: 2,
				ByReason: map[Reason]int64{ReasonMissingImage: 1, ReasonMissingFile: 1}},
		},
		{
			name: "warning only counts", index: 0, reason: ReasonDegenerateBoxDropped,
			wantRun: Counts{Total: 2, NonEmpty: 2, Kept: 2, ByReason: map[Reason]int64{ReasonDegenerateBoxDropped: 1}},
			wantTotal: Counts{Total: 4, NonEmpty: 3, Empty: 1, MissingImage: 1, Kept: 3, Skipped: 1,
				ByReason: map[Reason]int64{ReasonMissingImage: 1, ReasonDegenerateBoxDropped: 1}},
		},
		{name: "unknown index", index: 7, reason: ReasonDecodeError, wantErr: "unknown source index 7"},
		{name: "empty is not late", index: 0, reason: ReasonEmpty, wantErr: "decided at scan time"},
	}
	for _, tt := range tests {
		s := newSummary()
		before := newSummary()
		err := s.RecordLate(tt.index, tt.reason)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
			}
			if !reflect.DeepEqual(s, before) {
				t.Errorf("%s: a rejected RecordLate changed the summary", tt.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(s.Runs[tt.index].Counts, tt.wantRun) {
			t.Errorf("%s: run\n got %+v\nwant %+v", tt.name, s.Runs[tt.index].Counts, tt.wantRun)
		}
		if !reflect.DeepEqual(s.Total, tt.wantTotal) {
			t.Errorf("%s: total\n got %+v\nwant %+v", tt.name, s.Total, tt.wantTotal)
		}
	}
}

func TestRecordLateNoKeptSample(t *testing.T) {
	var b SummaryBuilder
	if err := b.Add(0, "a", true, []Reason{ReasonBadSchema}, false); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordLate(0, ReasonDecodeError); err == nil || !strings.Contains(err.Error(), "no kept sample") {
		t.Errorf("RecordLate with no kept sample = %v, want error", err)
	}
	// Through the builder while the scan runs: the same accounting.
	if err := b.Add(0, "a", true, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := b.RecordLate(0, ReasonDecodeError); err != nil {
		t.Fatal(err)
	}
	got := b.Result().Total
	want := Counts{Total: 2, NonEmpty: 2, Invalid: 2, Skipped: 2, ByReason: map[Reason]int64{ReasonBadSchema: 1, ReasonDecodeError: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("total\n got %+v\nwant %+v", got, want)
	}
}
