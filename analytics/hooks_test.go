package analytics

import (
	"reflect"
	"strings"
)

// JSON keys the decoders read, for the external tests that compare them
// with what the pipeline writes.
var (
	SampleLineKeys  = jsonKeys(reflect.TypeFor[sampleLine]())
	LetterboxKeys   = jsonKeys(reflect.TypeFor[letterbox]())
	BuildReportKeys = jsonKeys(reflect.TypeFor[buildReport]())
	PhaseKeys       = jsonKeys(phasesType())
)

func phasesType() reflect.Type {
	f, _ := reflect.TypeFor[buildReport]().FieldByName("Phases")
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
