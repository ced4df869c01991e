package analytics

import (
	"encoding/json"
	"reflect"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/warehouse"
)

// Fuzz targets for every decoder of this package; seed corpora live in
// testdata/fuzz/<target>/. Run one with, for example,
//
//	go test ./analytics -run '^$' -fuzz FuzzDecodeSampleLine -fuzztime 20s

// A decoded line satisfies the shape checks and survives a JSON round trip.
func FuzzDecodeSampleLine(f *testing.F) {
	f.Add([]byte(keptLine))
	f.Add([]byte(skippedLine))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := fuzzmem.Call(t, sampleLineAllocBound, func() (*sampleLine, error) { return decodeSampleLine(raw) })
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
		back, err := decodeSampleLine(again)
		if err != nil {
			t.Fatalf("re-encoded line rejected: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(s, back) {
			t.Fatalf("round trip changed the line:\n%+v\n%+v", s, back)
		}
	})
}

// A decoded report has no negative count or time, and publish and total
// are the only phases a build-time export leaves out.
func FuzzDecodeBuildReport(f *testing.F) {
	f.Add([]byte(validReport))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := fuzzmem.Call(t, buildReportAllocBound, func() (*buildReport, error) { return decodeBuildReport(raw) })
		if err != nil {
			return
		}
		if r.Workers < 0 || r.InputSamples < 0 || r.Samples < 0 || r.Skipped < 0 || r.Shards < 0 || r.BytesWritten < 0 {
			t.Fatalf("negative count accepted: %+v", r)
		}
		all, early := r.phases(false), r.phases(true)
		if len(all) != 9 || !reflect.DeepEqual(all[:7], early) {
			t.Fatalf("phases %v, before publish %v", all, early)
		}
		for _, p := range all {
			if !(p.seconds >= 0) {
				t.Fatalf("phase %s: %v seconds accepted", p.name, p.seconds)
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
		entries, err := fuzzmem.Call(t, recipeAllocBound, func() (map[string]string, error) { return parseRecipe(raw) })
		if err != nil {
			return
		}
		var r warehouse.Recipe
		for k, v := range entries {
			r.Set(k, v)
		}
		back, err := parseRecipe(r.Encode())
		if err != nil {
			t.Fatalf("re-encoded recipe rejected: %v\n%q", err, r.Encode())
		}
		if len(entries) > 0 && !reflect.DeepEqual(entries, back) {
			t.Fatalf("round trip changed the recipe: %v vs %v", entries, back)
		}
	})
}
