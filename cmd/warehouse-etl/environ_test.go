package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"warehouse-etl/validate"
)

func limitCount(n int64) *int64     { return &n }
func limitRatio(r float64) *float64 { return &r }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestThresholdsFromEnv(t *testing.T) {
	base := validate.Thresholds{
		Invalid: validate.Limit{MaxRatio: limitRatio(0.05), Action: validate.ActionFail},
		Missing: validate.Limit{MaxCount: limitCount(10), MaxRatio: limitRatio(0.05)},
		Empty:   validate.Limit{MaxRatio: limitRatio(0.5), Action: validate.ActionWarn},
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    validate.Thresholds
		wantErr []string
	}{
		{"no variables", nil, base, nil},
		{"empty and blank values change nothing", map[string]string{"WAREHOUSE_MAX_INVALID": "", "WAREHOUSE_EMPTY_ACTION": "  "}, base, nil},
		{
			"set counts, ratios, actions",
			map[string]string{
				"WAREHOUSE_MAX_INVALID": "3", "WAREHOUSE_MAX_INVALID_RATIO": "0.25", "WAREHOUSE_INVALID_ACTION": "warn",
				"WAREHOUSE_MAX_MISSING": " 0 ", "WAREHOUSE_MISSING_ACTION": "fail",
				"WAREHOUSE_MAX_EMPTY_RATIO": "1", "WAREHOUSE_EMPTY_ACTION": "fail",
			},
			validate.Thresholds{
				Invalid: validate.Limit{MaxCount: limitCount(3), MaxRatio: limitRatio(0.25), Action: validate.ActionWarn},
				Missing: validate.Limit{MaxCount: limitCount(0), MaxRatio: limitRatio(0.05), Action: validate.ActionFail},
				Empty:   validate.Limit{MaxRatio: limitRatio(1), Action: validate.ActionFail},
			},
			nil,
		},
		{
			"off removes limits",
			map[string]string{"WAREHOUSE_MAX_MISSING": "off", "WAREHOUSE_MAX_MISSING_RATIO": "off", "WAREHOUSE_MAX_EMPTY_RATIO": "off"},
			validate.Thresholds{Invalid: base.Invalid, Missing: validate.Limit{}, Empty: validate.Limit{Action: validate.ActionWarn}},
			nil,
		},
		{"negative count", map[string]string{"WAREHOUSE_MAX_INVALID": "-1"}, validate.Thresholds{}, []string{"WAREHOUSE_MAX_INVALID="}},
		{"count not integer", map[string]string{"WAREHOUSE_MAX_EMPTY": "2.5"}, validate.Thresholds{}, []string{"WAREHOUSE_MAX_EMPTY="}},
		{"ratio above 1", map[string]string{"WAREHOUSE_MAX_MISSING_RATIO": "1.01"}, validate.Thresholds{}, []string{"WAREHOUSE_MAX_MISSING_RATIO="}},
		{"ratio NaN", map[string]string{"WAREHOUSE_MAX_EMPTY_RATIO": "NaN"}, validate.Thresholds{}, []string{"WAREHOUSE_MAX_EMPTY_RATIO="}},
		{"ratio percent", map[string]string{"WAREHOUSE_MAX_INVALID_RATIO": "5%"}, validate.Thresholds{}, []string{"WAREHOUSE_MAX_INVALID_RATIO="}},
		{"action off is not an action", map[string]string{"WAREHOUSE_INVALID_ACTION": "off"}, validate.Thresholds{}, []string{"WAREHOUSE_INVALID_ACTION="}},
		{
			"every malformed variable reported",
			map[string]string{"WAREHOUSE_MISSING_ACTION": "Fail", "WAREHOUSE_MAX_EMPTY": "x", "WAREHOUSE_MAX_INVALID": "7"},
			validate.Thresholds{}, []string{"WAREHOUSE_MISSING_ACTION=", "WAREHOUSE_MAX_EMPTY="},
		},
	}
	for _, tt := range tests {
		got, err := thresholdsFromEnv(base, func(k string) string { return tt.env[k] })
		if tt.wantErr != nil {
			if err == nil {
				t.Errorf("%s: no error, want %v", tt.name, tt.wantErr)
				continue
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error %q does not name %q", tt.name, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, mustJSON(t, got), mustJSON(t, tt.want))
		}
	}
	// The receiver is unchanged.
	if *base.Missing.MaxCount != 10 || *base.Invalid.MaxRatio != 0.05 {
		t.Error("thresholdsFromEnv modified the thresholds it was given")
	}
}
