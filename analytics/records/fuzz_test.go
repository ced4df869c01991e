package records

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/warehouse"
)

// Fuzz targets for every decoder of this package; seed corpora live in
// testdata/fuzz/<target>/. Run one with, for example,
//
//	go test ./analytics/records -run '^$' -fuzz FuzzDecodeSampleLine -fuzztime 20s

// A decoded line satisfies the shape checks and survives a JSON round trip.
func FuzzDecodeSampleLine(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := fuzzmem.Call(t, sampleLineAllocBound, func() (*SampleLine, error) { return DecodeSampleLine(raw) })
		if err != nil {
			return
		}
		if s.BoxCount != int64(len(s.ClassIndex)) || s.Reasons == nil || (s.Kept && s.Letterbox == nil) || (!s.Kept && s.Index != -1) {
			t.Fatalf("accepted an inconsistent line: %+v", s)
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeSampleLine(again)
		if err != nil {
			t.Fatalf("re-encoded line rejected: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(s, back) {
			t.Fatalf("round trip changed the line:\n%+v\n%+v", s, back)
		}
	})
}

// A decoded report has no negative count, rate or phase time. (That
// publish and total are the only phases a build-time export leaves out is
// the export's business: analytics.TestDecodeBuildReport.)
func FuzzDecodeBuildReport(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := fuzzmem.Call(t, buildReportAllocBound, func() (*BuildReport, error) { return DecodeBuildReport(raw) })
		if err != nil {
			return
		}
		if r.Workers < 0 || r.InputSamples < 0 || r.Samples < 0 || r.Skipped < 0 || r.Shards < 0 || r.BytesWritten < 0 {
			t.Fatalf("negative count accepted: %+v", r)
		}
		p := r.Phases
		for _, v := range []float64{r.SamplesPerSecond, r.MBPerSecond, p.Scan, p.Validate, p.Read, p.Decode, p.Resize, p.Normalize, p.Write, p.Publish, p.Total} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("rate or phase time %v accepted: %+v", v, r)
			}
		}
	})
}

// A parsed recipe, encoded again by warehouse.Recipe (the writer), parses
// to the same entries.
func FuzzParseRecipe(f *testing.F) {
	f.Add("dtype=\"f16\"\ntarget_size=\"384x384\"\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		entries, err := fuzzmem.Call(t, recipeAllocBound, func() (map[string]string, error) { return ParseRecipe(raw) })
		if err != nil {
			return
		}
		var r warehouse.Recipe
		for k, v := range entries {
			r.Set(k, v)
		}
		back, err := ParseRecipe(r.Encode())
		if err != nil {
			t.Fatalf("re-encoded recipe rejected: %v\n%q", err, r.Encode())
		}
		if len(entries) > 0 && !reflect.DeepEqual(entries, back) {
			t.Fatalf("round trip changed the recipe: %v vs %v", entries, back)
		}
	})
}
