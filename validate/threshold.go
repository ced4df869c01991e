package validate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Action says what an exceeded threshold does to the build.
type Action string

// Threshold actions. The empty Action means ActionFail.
const (
	ActionFail Action = "fail" // the build stops with a threshold error
	ActionWarn Action = "warn" // the build goes on; the finding is reported
)

// resolved returns the action that applies: "" is ActionFail.
func (a Action) resolved() Action {
	if a == "" {
		return ActionFail
	}
	return a
}

// Limit bounds one count. A nil MaxCount or MaxRatio is no limit. The limit
// is exceeded when count > MaxCount or count/Total > MaxRatio (strictly:
// equal to the limit passes; with Total 0 the ratio is 0).
type Limit struct {
	MaxCount *int64   `json:"max_count,omitempty"`
	MaxRatio *float64 `json:"max_ratio,omitempty"`
	Action   Action   `json:"action,omitempty"`
}

// Thresholds are the limits a build checks against its total counts:
// Invalid on Counts.Invalid, Missing on Counts.Missing() (MissingImage +
// MissingFile), Empty on Counts.Empty.
type Thresholds struct {
	Invalid Limit `json:"invalid"`
	Missing Limit `json:"missing"`
	Empty   Limit `json:"empty"`
}

// Finding is one exceeded limit.
type Finding struct {
	Threshold string  `json:"threshold"` // category.kind, e.g. "invalid.max_ratio"
	Value     float64 `json:"value"`     // the count, or count/total for a ratio
	Count     int64   `json:"count"`
	Total     int64   `json:"total"`
	Limit     float64 `json:"limit"`
	Action    Action  `json:"action"` // never empty
}

// Error describes the finding, e.g.
// "threshold invalid.max_ratio exceeded: 0.125 (5 of 40 samples) > limit 0.05 (action fail)".
func (f Finding) Error() string {
	return fmt.Sprintf("threshold %s exceeded: %s (%d of %d samples) > limit %s (action %s)",
		f.Threshold, formatNumber(f.Value), f.Count, f.Total, formatNumber(f.Limit), f.Action)
}

// String is Error.
func (f Finding) String() string { return f.Error() }

func formatNumber(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// category is one limit with its name and the count it bounds.
type category struct {
	name  string
	limit *Limit
	count func(Counts) int64
}

func (t *Thresholds) categories() []category {
	return []category{
		{"invalid", &t.Invalid, func(c Counts) int64 { return c.Invalid }},
		{"missing", &t.Missing, func(c Counts) int64 { return c.Missing() }},
		{"empty", &t.Empty, func(c Counts) int64 { return c.Empty }},
	}
}

// Evaluate returns every exceeded limit, in the order invalid, missing,
// empty and within each max_count before max_ratio.
func (t Thresholds) Evaluate(c Counts) []Finding {
	var out []Finding
	for _, cat := range t.categories() {
		n := cat.count(c)
		action := cat.limit.Action.resolved()
		if m := cat.limit.MaxCount; m != nil && n > *m {
			out = append(out, Finding{Threshold: cat.name + ".max_count", Value: float64(n),
				Count: n, Total: c.Total, Limit: float64(*m), Action: action})
		}
		ratio := 0.0
		if c.Total > 0 {
			ratio = float64(n) / float64(c.Total)
		}
		if m := cat.limit.MaxRatio; m != nil && ratio > *m {
			out = append(out, Finding{Threshold: cat.name + ".max_ratio", Value: ratio,
				Count: n, Total: c.Total, Limit: *m, Action: action})
		}
	}
	return out
}

// Validate checks every limit: max_count >= 0, max_ratio in [0,1], action
// fail, warn or empty.
func (t Thresholds) Validate() error {
	var errs []error
	for _, cat := range t.categories() {
		if m := cat.limit.MaxCount; m != nil && *m < 0 {
			errs = append(errs, fmt.Errorf("%s.max_count %d: must be >= 0", cat.name, *m))
		}
		if m := cat.limit.MaxRatio; m != nil && !(*m >= 0 && *m <= 1) {
			errs = append(errs, fmt.Errorf("%s.max_ratio %v: must be in [0,1]", cat.name, *m))
		}
		if a := cat.limit.Action; a != "" && a != ActionFail && a != ActionWarn {
			errs = append(errs, fmt.Errorf("%s.action %q: must be fail or warn", cat.name, a))
		}
	}
	return errors.Join(errs...)
}

// WithEnv returns t with the environment's overrides applied, read through
// getenv (os.Getenv in the CLI). For each category C in INVALID, MISSING,
// EMPTY:
//
//	WAREHOUSE_MAX_C         max_count: an integer >= 0, or "off" for no limit
//	WAREHOUSE_MAX_C_RATIO   max_ratio: a number in [0,1], or "off" for no limit
//	WAREHOUSE_C_ACTION      action: fail or warn
//
// An unset or empty variable changes nothing. A malformed value is an
// error naming the variable; all malformed variables are reported at once.
func (t Thresholds) WithEnv(getenv func(string) string) (Thresholds, error) {
	var errs []error
	for _, cat := range t.categories() {
		up := strings.ToUpper(cat.name)
		if v, ok := envValue(getenv, "WAREHOUSE_MAX_"+up); ok {
			n, err := parseCountLimit(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("WAREHOUSE_MAX_%s=%q: %w", up, v, err))
			} else {
				cat.limit.MaxCount = n
			}
		}
		if v, ok := envValue(getenv, "WAREHOUSE_MAX_"+up+"_RATIO"); ok {
			r, err := parseRatioLimit(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("WAREHOUSE_MAX_%s_RATIO=%q: %w", up, v, err))
			} else {
				cat.limit.MaxRatio = r
			}
		}
		if v, ok := envValue(getenv, "WAREHOUSE_"+up+"_ACTION"); ok {
			switch a := Action(v); a {
			case ActionFail, ActionWarn:
				cat.limit.Action = a
			default:
				errs = append(errs, fmt.Errorf("WAREHOUSE_%s_ACTION=%q: must be fail or warn", up, v))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Thresholds{}, err
	}
	return t, nil
}

// envValue returns the trimmed value of name and whether it is set to
// something.
func envValue(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

func parseCountLimit(v string) (*int64, error) {
	if v == "off" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, errors.New(`must be an integer >= 0 or "off"`)
	}
	return &n, nil
}

func parseRatioLimit(v string) (*float64, error) {
	if v == "off" {
		return nil, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
		return nil, errors.New(`must be a number in [0,1] or "off"`)
	}
	return &r, nil
}

// Check evaluates t on c and splits the exceeded limits by action: failed
// (action fail) stop a build and make Open refuse the warehouse, warned
// (action warn) are only reported. Both keep Evaluate's order.
func (t Thresholds) Check(c Counts) (failed, warned []Finding) {
	for _, f := range t.Evaluate(c) {
		if f.Action == ActionWarn {
			warned = append(warned, f)
		} else {
			failed = append(failed, f)
		}
	}
	return failed, warned
}

// ThresholdError is a validation summary over a limit with action fail: a
// build publishes nothing (the CLI exits 3), Open refuses the warehouse.
type ThresholdError struct {
	Dir      string    // the warehouse Open refused; empty for a build
	Findings []Finding // the failed findings
}

func (e *ThresholdError) Error() string {
	msgs := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		msgs[i] = f.String()
	}
	if e.Dir == "" {
		return "validation failed: " + strings.Join(msgs, "; ")
	}
	return e.Dir + ": refusing a warehouse whose validation summary exceeds its thresholds: " + strings.Join(msgs, "; ")
}
