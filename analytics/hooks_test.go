package analytics

import (
	"reflect"
	"strings"

	"warehouse-etl/analytics/records"
)

// JSON keys the decoders read, for the external tests that compare them
// with what the pipeline writes.
var (
	SampleLineKeys  = jsonKeys(reflect.TypeFor[records.SampleLine]())
	LetterboxKeys   = jsonKeys(reflect.TypeFor[records.Letterbox]())
	BuildReportKeys = jsonKeys(reflect.TypeFor[records.BuildReport]())
	PhaseKeys       = jsonKeys(phasesType())
)

func phasesType() reflect.Type {
	f, _ := reflect.TypeFor[records.BuildReport]().FieldByName("Phases")
	return f.Type
}

func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}
