package validate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func count(n int64) *int64     { return &n }
func ratio(r float64) *float64 { return &r }

func TestEvaluate(t *testing.T) {
	// 40 samples: 5 invalid, 2 missing images + 1 missing file, 10 empty.
	c := Counts{Total: 40, Invalid: 5, MissingImage: 2, MissingFile: 1, Empty: 10, NonEmpty: 30}
	tests := []struct {
		name string
		th   Thresholds
		want []Finding
	}{
		{"no limits", Thresholds{}, nil},
		{"count equal to limit passes", Thresholds{Invalid: Limit{MaxCount: count(5)}}, nil},
		{
			"count above limit", Thresholds{Invalid: Limit{MaxCount: count(4)}},
			[]Finding{{Threshold: "invalid.max_count", Value: 5, Count: 5, Total: 40, Limit: 4, Action: ActionFail}},
		},
		{"ratio equal to limit passes", Thresholds{Invalid: Limit{MaxRatio: ratio(0.125)}}, nil},
		{
			"ratio above limit", Thresholds{Invalid: Limit{MaxRatio: ratio(0.05), Action: ActionWarn}},
			[]Finding{{Threshold: "invalid.max_ratio", Value: 0.125, Count: 5, Total: 40, Limit: 0.05, Action: ActionWarn}},
		},
		{"missing counts image and file: 3 passes", Thresholds{Missing: Limit{MaxCount: count(3)}}, nil},
		{
			"missing 3 > 2", Thresholds{Missing: Limit{MaxCount: count(2), MaxRatio: ratio(0.075)}},
			[]Finding{{Threshold: "missing.max_count", Value: 3, Count: 3, Total: 40, Limit: 2, Action: ActionFail}},
		},
		{
			"empty ratio 0.25", Thresholds{Empty: Limit{MaxRatio: ratio(0.2), Action: ActionWarn}},
			[]Finding{{Threshold: "empty.max_ratio", Value: 0.25, Count: 10, Total: 40, Limit: 0.2, Action: ActionWarn}},
		},
		{"every limit equal to its count passes", Thresholds{Invalid: Limit{MaxCount: count(5)}, Missing: Limit{MaxCount: count(3)}, Empty: Limit{MaxCount: count(10), MaxRatio: ratio(0.25)}}, nil},
		{
			"every category, in order",
			Thresholds{
				Empty:   Limit{MaxCount: count(0), MaxRatio: ratio(0)},
				Missing: Limit{MaxRatio: ratio(0.07)},
				Invalid: Limit{MaxCount: count(0), Action: ActionFail},
			},
			[]Finding{
				{Threshold: "invalid.max_count", Value: 5, Count: 5, Total: 40, Limit: 0, Action: ActionFail},
				{Threshold: "missing.max_ratio", Value: 0.075, Count: 3, Total: 40, Limit: 0.07, Action: ActionFail},
				{Threshold: "empty.max_count", Value: 10, Count: 10, Total: 40, Limit: 0, Action: ActionFail},
				{Threshold: "empty.max_ratio", Value: 0.25, Count: 10, Total: 40, Limit: 0, Action: ActionFail},
			},
		},
	}
	for _, tt := range tests {
		got := tt.th.Evaluate(c)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestEvaluateNoSamples(t *testing.T) {
	// Total 0: every ratio is 0, so a zero ratio limit passes.
	th := Thresholds{Invalid: Limit{MaxRatio: ratio(0)}, Missing: Limit{MaxCount: count(0)}, Empty: Limit{MaxRatio: ratio(0)}}
	if got := th.Evaluate(Counts{}); got != nil {
		t.Errorf("Evaluate(empty counts) = %v, want none", got)
	}
}

func TestFindingError(t *testing.T) {
	tests := []struct {
		f    Finding
		want string
	}{
		{
			Finding{Threshold: "invalid.max_ratio", Value: 0.125, Count: 5, Total: 40, Limit: 0.05, Action: ActionFail},
			"threshold invalid.max_ratio exceeded: 0.125 (5 of 40 samples) > limit 0.05 (action fail)",
		},
		{
			Finding{Threshold: "missing.max_count", Value: 3, Count: 3, Total: 1000000, Limit: 2, Action: ActionWarn},
			"threshold missing.max_count exceeded: 3 (3 of 1000000 samples) > limit 2 (action warn)",
		},
	}
	for _, tt := range tests {
		if got := tt.f.Error(); got != tt.want {
			t.Errorf("Error() = %q\nwant      %q", got, tt.want)
		}
		if got := tt.f.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestThresholdsJSON(t *testing.T) {
	th := Thresholds{
		Invalid: Limit{MaxRatio: ratio(0.05), Action: ActionFail},
		Missing: Limit{MaxCount: count(3)},
		Empty:   Limit{MaxCount: count(0), MaxRatio: ratio(0.5), Action: ActionWarn},
	}
	got, err := json.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"invalid":{"max_ratio":0.05,"action":"fail"},"missing":{"max_count":3},"empty":{"max_count":0,"max_ratio":0.5,"action":"warn"}}`
	if string(got) != want {
		t.Errorf("json = %s\nwant   %s", got, want)
	}
	var back Thresholds
	if err := json.Unmarshal([]byte(want), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, th) {
		t.Errorf("round trip = %+v, want %+v", back, th)
	}
}

func TestThresholdsValidate(t *testing.T) {
	tests := []struct {
		name string
		th   Thresholds
		want []string // substrings of the error; nil = valid
	}{
		{"zero", Thresholds{}, nil},
		{"bounds", Thresholds{Invalid: Limit{MaxCount: count(0), MaxRatio: ratio(0)}, Empty: Limit{MaxRatio: ratio(1), Action: ActionWarn}}, nil},
		{"negative count", Thresholds{Missing: Limit{MaxCount: count(-1)}}, []string{"missing.max_count -1"}},
		{"ratio above 1", Thresholds{Empty: Limit{MaxRatio: ratio(1.5)}}, []string{"empty.max_ratio 1.5"}},
		{"bad action and negative ratio", Thresholds{Invalid: Limit{MaxRatio: ratio(-0.1), Action: "stop"}},
			[]string{"invalid.max_ratio -0.1", `invalid.action "stop"`}},
	}
	for _, tt := range tests {
		err := tt.th.Validate()
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want %v", tt.name, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
}

// Check splits Evaluate's findings by action, each side in Evaluate's order,
// and ThresholdError says who refused: a build, or Open of a directory.
func TestCheck(t *testing.T) {
	c := Counts{Total: 40, Invalid: 5, MissingImage: 3, Empty: 10, NonEmpty: 30}
	th := Thresholds{
		Invalid: Limit{MaxCount: count(1), Action: ActionWarn},
		Missing: Limit{MaxCount: count(2), MaxRatio: ratio(0.05)},
		Empty:   Limit{MaxRatio: ratio(0.2), Action: ActionWarn},
	}
	failed, warned := th.Check(c)
	names := func(fs []Finding) (out []string) {
		for _, f := range fs {
			out = append(out, f.Threshold)
		}
		return out
	}
	if got := names(failed); !reflect.DeepEqual(got, []string{"missing.max_count", "missing.max_ratio"}) {
		t.Errorf("failed %v", got)
	}
	if got := names(warned); !reflect.DeepEqual(got, []string{"invalid.max_count", "empty.max_ratio"}) {
		t.Errorf("warned %v", got)
	}
	if f, w := (Thresholds{}).Check(c); f != nil || w != nil {
		t.Errorf("no limits: %v %v", f, w)
	}
	e := &ThresholdError{Findings: failed}
	const findings = "threshold missing.max_count exceeded: 3 (3 of 40 samples) > limit 2 (action fail); " +
		"threshold missing.max_ratio exceeded: 0.075 (3 of 40 samples) > limit 0.05 (action fail)"
	if got, want := e.Error(), "validation failed: "+findings; got != want {
		t.Errorf("build: %q\nwant %q", got, want)
	}
	e.Dir = "/w/v1"
	if got, want := e.Error(), "/w/v1: refusing a warehouse whose validation summary exceeds its thresholds: "+findings; got != want {
		t.Errorf("open: %q\nwant %q", got, want)
	}
}

func TestLimitDescribe(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		want string
	}{
		{Limit{}, "no limit"},
		{Limit{MaxCount: count(3)}, "max_count 3 (fail)"},
		{Limit{MaxCount: count(3), MaxRatio: ratio(0.05), Action: ActionWarn}, "max_count 3, max_ratio 0.05 (warn)"},
	} {
		if got := c.l.Describe(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
}
