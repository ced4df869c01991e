package analytics_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"warehouse-etl/analytics"
	"warehouse-etl/config"
	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// shardBoxes walks a version's shards with the shard package and returns
// boxes per class name and every box's width, height and area.
func shardBoxes(t *testing.T, dir string, m *warehouse.Manifest) (perClass map[string]int64, sizes [3][]float64) {
	t.Helper()
	names := map[int32]string{}
	for _, c := range m.Classes {
		names[int32(c.Index)] = c.Name
	}
	perClass = map[string]int64{}
	for _, s := range m.Shards {
		r, err := shard.Open(filepath.Join(dir, s.RelativePath))
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Len() {
			classes := r.ClassIndex(i)
			for j, b := range r.Boxes(i) {
				perClass[names[classes[j]]]++
				w, h := float64(b[2]-b[0]), float64(b[3]-b[1])
				sizes[0] = append(sizes[0], w)
				sizes[1] = append(sizes[1], h)
				sizes[2] = append(sizes[2], w*h)
			}
		}
		r.Close()
	}
	return perClass, sizes
}

// quantized maps values to the 1/1024 bins the diff documents.
func quantized(vs []float64) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = max(0, min(int(v*1024), 1023))
	}
	sort.Ints(out)
	return out
}

// exactKS is the two-sample KS statistic by merging sorted samples.
func exactKS(a, b []int) float64 {
	var d float64
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var x int
		switch {
		case j == len(b) || (i < len(a) && a[i] <= b[j]):
			x = a[i]
		default:
			x = b[j]
		}
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// medianBin is the midpoint of the bin of the ceil(n/2)-th smallest value.
func medianBin(q []int) float64 {
	return (float64(q[(len(q)+1)/2-1]) + 0.5) / 1024
}

func metric(t *testing.T, d *analytics.Diff, section, name string) analytics.Metric {
	t.Helper()
	i := slices.IndexFunc(d.Metrics, func(m analytics.Metric) bool { return m.Section == section && m.Name == name })
	if i < 0 {
		t.Fatalf("no metric %s/%s", section, name)
	}
	return d.Metrics[i]
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

func TestCompareVersionWithItself(t *testing.T) {
	dir, _ := buildDemo(t, t.TempDir(), nil)
	d, err := analytics.Compare(context.Background(), dir, dir, analytics.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]int{}
	for _, m := range d.Metrics {
		sections[m.Section]++
		if m.Delta != 0 || m.Drift == nil || *m.Drift != 0 || m.Exceeded {
			t.Errorf("%s/%s: delta %v drift %v exceeded %v against itself", m.Section, m.Name, m.Delta, m.Drift, m.Exceeded)
		}
	}
	for _, s := range []string{"samples", "reasons", "classes", "box_size", "image"} {
		if sections[s] == 0 {
			t.Errorf("no %s metrics", s)
		}
	}
	if len(d.ConfigChanges) != 0 || d.Exceeded != 0 || d.Err() != nil {
		t.Fatalf("config changes %v, exceeded %d, err %v", d.ConfigChanges, d.Exceeded, d.Err())
	}
}

// Two builds of the demo that differ in skip_empty and target height: every
// metric against values computed here from the manifests and the shards.
func TestCompareTwoBuilds(t *testing.T) {
	dirB, mb := buildDemo(t, t.TempDir(), nil)
	dirA, ma := buildDemo(t, t.TempDir(), func(c *config.Config) {
		c.SkipEmpty = true
		c.TargetSize = [2]int{96, 64}
	})
	d, err := analytics.Compare(context.Background(), dirA, dirB, analytics.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d.A.Version != ma.Version || d.B.Version != mb.Version || d.A.Dir != dirA {
		t.Fatalf("sides %+v %+v", d.A, d.B)
	}

	// Config: exactly the two keys changed, old and new values as the
	// recipe writes them.
	var keys []string
	for _, c := range d.ConfigChanges {
		keys = append(keys, c.Key)
		want := map[string][2]string{"skip_empty": {"true", "false"}, "target_size": {"96x64", "96x96"}}[c.Key]
		if c.A == nil || c.B == nil || *c.A != want[0] || *c.B != want[1] {
			t.Errorf("config %s: %v -> %v, want %v", c.Key, c.B, c.A, want)
		}
	}
	if !slices.Equal(keys, []string{"skip_empty", "target_size"}) {
		t.Fatalf("changed keys %v", keys)
	}

	// Samples and reasons: the manifests' counts and share changes.
	ta, tb := ma.Summary.Total, mb.Summary.Total
	if ta.Kept >= tb.Kept {
		t.Fatalf("skip_empty should keep fewer samples: %d vs %d", ta.Kept, tb.Kept)
	}
	shareDrift := func(a, b int64) float64 {
		return math.Abs(float64(a)/float64(ta.Total) - float64(b)/float64(tb.Total))
	}
	for name, v := range map[string][2]int64{
		"kept": {ta.Kept, tb.Kept}, "skipped": {ta.Skipped, tb.Skipped}, "empty": {ta.Empty, tb.Empty},
		"non_empty": {ta.NonEmpty, tb.NonEmpty}, "invalid": {ta.Invalid, tb.Invalid},
		"missing_image": {ta.MissingImage, tb.MissingImage}, "missing_file": {ta.MissingFile, tb.MissingFile},
	} {
		m := metric(t, d, "samples", name)
		if m.A != float64(v[0]) || m.B != float64(v[1]) || m.Delta != float64(v[0]-v[1]) || !near(*m.Drift, shareDrift(v[0], v[1])) {
			t.Errorf("samples/%s: %+v (drift %v), want %v drift %v", name, m, *m.Drift, v, shareDrift(v[0], v[1]))
		}
	}
	for r := range tb.ByReason {
		m := metric(t, d, "reasons", string(r))
		if m.A != float64(ta.ByReason[r]) || m.B != float64(tb.ByReason[r]) || !near(*m.Drift, shareDrift(ta.ByReason[r], tb.ByReason[r])) {
			t.Errorf("reasons/%s: %+v", r, m)
		}
	}

	// Classes and box sizes: from the shards.
	classA, sizesA := shardBoxes(t, dirA, ma)
	classB, sizesB := shardBoxes(t, dirB, mb)
	var boxesA, boxesB int64
	for _, n := range classA {
		boxesA += n
	}
	for _, n := range classB {
		boxesB += n
	}
	if m := metric(t, d, "samples", "boxes"); m.A != float64(boxesA) || m.B != float64(boxesB) {
		t.Errorf("samples/boxes: %+v, shards hold %d and %d", m, boxesA, boxesB)
	}
	for _, c := range mb.Classes {
		m := metric(t, d, "classes", c.Name)
		want := math.Abs(float64(classA[c.Name])/float64(boxesA) - float64(classB[c.Name])/float64(boxesB))
		if m.A != float64(classA[c.Name]) || m.B != float64(classB[c.Name]) || !near(*m.Drift, want) {
			t.Errorf("classes/%s: %+v, want %d %d drift %v", c.Name, m, classA[c.Name], classB[c.Name], want)
		}
	}
	for k, name := range []string{"width", "height", "area"} {
		qa, qb := quantized(sizesA[k]), quantized(sizesB[k])
		m := metric(t, d, "box_size", name)
		if !near(*m.Drift, exactKS(qa, qb)) || m.A != medianBin(qa) || m.B != medianBin(qb) {
			t.Errorf("box_size/%s: A %v B %v KS %v, want %v %v %v", name, m.A, m.B, *m.Drift, medianBin(qa), medianBin(qb), exactKS(qa, qb))
		}
	}
	// A 96x64 letterbox squeezes the 4:3 images less vertically than 96x96:
	// heights (normalized to the target) grow, widths stay.
	if metric(t, d, "box_size", "height").A <= metric(t, d, "box_size", "height").B {
		t.Error("box heights did not grow in the 96x64 target")
	}

	// Image statistics: the manifests'.
	for c, ch := range []string{"r", "g", "b"} {
		m := metric(t, d, "image", "mean_"+ch)
		if m.A != ma.ImageStats.Mean[c] || m.B != mb.ImageStats.Mean[c] || *m.Drift != math.Abs(ma.ImageStats.Mean[c]-mb.ImageStats.Mean[c]) {
			t.Errorf("image/mean_%s: %+v", ch, m)
		}
		if m := metric(t, d, "image", "std_"+ch); m.A != ma.ImageStats.Std[c] || m.B != mb.ImageStats.Std[c] {
			t.Errorf("image/std_%s: %+v", ch, m)
		}
	}

	// No limits: nothing exceeded.
	if d.Exceeded != 0 || d.Err() != nil {
		t.Fatalf("exceeded %d without limits", d.Exceeded)
	}

	// A limit equal to the drift is not exceeded; one just below is.
	keptDrift := shareDrift(ta.Kept, tb.Kept)
	for _, tc := range []struct {
		limit    float64
		exceeded bool
	}{{keptDrift, false}, {math.Nextafter(keptDrift, 0), true}} {
		limit := tc.limit
		d, err := analytics.Compare(context.Background(), dirA, dirB, analytics.Limits{RatioChange: &limit})
		if err != nil {
			t.Fatal(err)
		}
		kept := metric(t, d, "samples", "kept")
		if kept.Exceeded != tc.exceeded || kept.Limit == nil || *kept.Limit != limit {
			t.Errorf("limit %v: kept exceeded %v, want %v", limit, kept.Exceeded, tc.exceeded)
		}
		var drift *analytics.DriftError
		if err := d.Err(); tc.exceeded != errors.As(err, &drift) {
			t.Errorf("limit %v: Err() = %v", limit, err)
		} else if tc.exceeded && !slices.ContainsFunc(drift.Exceeded, func(m analytics.Metric) bool { return m.Name == "kept" }) {
			t.Errorf("drift error does not list kept: %v", err)
		}
		// Other sections have no limit and are never exceeded.
		for _, m := range d.Metrics {
			if m.Section != "samples" && m.Section != "reasons" && (m.Limit != nil || m.Exceeded) {
				t.Errorf("%s/%s has limit %v", m.Section, m.Name, m.Limit)
			}
		}
	}
}

func TestDriftErrorMessage(t *testing.T) {
	drift, limit := 0.125, 0.05
	err := &analytics.DriftError{Exceeded: []analytics.Metric{
		{Section: "reasons", Name: "empty", A: 12, B: 4, Delta: 8, Drift: &drift, Limit: &limit, Exceeded: true},
	}}
	want := "1 drift limit(s) exceeded: reasons/empty drift 0.125 > limit 0.05 (A 12, B 4)"
	if err.Error() != want {
		t.Fatalf("%q, want %q", err.Error(), want)
	}
}

// diff.parquet holds one row per metric and per config change, with the
// same values as the Diff.
func TestDiffWriteParquet(t *testing.T) {
	dirB, _ := buildDemo(t, t.TempDir(), nil)
	dirA, _ := buildDemo(t, t.TempDir(), func(c *config.Config) { c.SkipEmpty = true })
	zero := 0.0
	d, err := analytics.Compare(context.Background(), dirA, dirB, analytics.Limits{RatioChange: &zero})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "diff.parquet")
	if err := d.WriteParquet(path); err != nil {
		t.Fatal(err)
	}
	rows, _ := parquetRows(t, path)
	if len(rows) != len(d.Metrics)+len(d.ConfigChanges) {
		t.Fatalf("%d rows for %d metrics and %d config changes", len(rows), len(d.Metrics), len(d.ConfigChanges))
	}
	for i, m := range d.Metrics {
		row := rows[i]
		if row["version_a"] != d.A.Version || row["version_b"] != d.B.Version || row["section"] != m.Section || row["name"] != m.Name ||
			asFloat(t, row["a"], 64) != m.A || asFloat(t, row["b"], 64) != m.B || asFloat(t, row["delta"], 64) != m.Delta ||
			row["value_a"] != nil || row["value_b"] != nil {
			t.Errorf("row %d = %v, metric %+v", i, row, m)
		}
		if (m.Limit == nil) != (row["limit"] == nil) || (m.Drift == nil) != (row["drift"] == nil) {
			t.Errorf("row %d: limit %v drift %v, metric %v %v", i, row["limit"], row["drift"], m.Limit, m.Drift)
		}
		wantExceeded := int64(0)
		if m.Exceeded {
			wantExceeded = 1
		}
		if asInt(t, row["exceeded"]) != wantExceeded {
			t.Errorf("row %d: exceeded %v, want %d", i, row["exceeded"], wantExceeded)
		}
	}
	row := rows[len(d.Metrics)]
	if row["section"] != "config" || row["name"] != "skip_empty" || row["value_a"] != "true" || row["value_b"] != "false" || row["a"] != nil || row["drift"] != nil {
		t.Errorf("config row %v", row)
	}
	if d.Exceeded == 0 {
		t.Error("a zero ratio limit should be exceeded by skip_empty")
	}
}

// Thresholds are part of the compared configuration even though they are
// not in the version recipe.
func TestCompareReportsThresholdChanges(t *testing.T) {
	dirB, _ := buildDemo(t, t.TempDir(), nil)
	dirA, _ := buildDemo(t, t.TempDir(), func(c *config.Config) {
		r := 0.5
		c.Thresholds.Invalid = validate.Limit{MaxRatio: &r, Action: validate.ActionWarn}
	})
	d, err := analytics.Compare(context.Background(), dirA, dirB, analytics.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.ConfigChanges {
		a, b := "(absent)", "(absent)"
		if c.A != nil {
			a = *c.A
		}
		if c.B != nil {
			b = *c.B
		}
		got = append(got, c.Key+": "+b+" -> "+a)
	}
	want := []string{`thresholds.invalid.action: (absent) -> "warn"`, `thresholds.invalid.max_ratio: (absent) -> 0.5`}
	if !slices.Equal(got, want) {
		t.Fatalf("config changes %q, want %q", got, want)
	}
}
