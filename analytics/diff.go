package analytics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"warehouse-etl/analytics/records"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Sections of a Diff, in report order.
const (
	SectionSamples = "samples"  // manifest summary counts; drift: change of the share of input samples
	SectionReasons = "reasons"  // samples carrying each reason code; drift: change of the share of input samples
	SectionClasses = "classes"  // boxes per class name; drift: change of the share of all boxes
	SectionBoxSize = "box_size" // median box width, height, area (normalized); drift: KS distance
	SectionImage   = "image"    // per-channel mean/std of the stored image values; drift: absolute change
)

// Limits are drift limits; a nil limit is not checked. A metric exceeds its
// limit when its drift is greater than the limit.
type Limits struct {
	// TotalChange limits the relative change of input samples,
	// |A-B| / max(B, 1).
	TotalChange *float64 `json:"total_change"`
	// RatioChange limits the change of the kept, skipped, empty, invalid
	// and missing shares and of every reason's share of input samples.
	RatioChange *float64 `json:"ratio_change"`
	// ClassShareChange limits the change of each class's share of boxes.
	ClassShareChange *float64 `json:"class_share_change"`
	// BoxSizeKS limits the KS distance of the box width, height and area
	// distributions.
	BoxSizeKS *float64 `json:"box_size_ks"`
	// ImageStatChange limits the absolute change of each channel's mean and
	// std of the stored image values.
	ImageStatChange *float64 `json:"image_stat_change"`
}

// DefaultLimits are the limits a scheduled comparison of consecutive
// builds of the same dataset uses unless told otherwise: shares may move
// by 5 points, box sizes by a KS distance of 0.1, image statistics by
// 0.05; the sample count may change freely (datasets grow).
func DefaultLimits() Limits {
	f := func(v float64) *float64 { return &v }
	return Limits{RatioChange: f(0.05), ClassShareChange: f(0.05), BoxSizeKS: f(0.1), ImageStatChange: f(0.05)}
}

// VersionInfo identifies one side of a Diff.
type VersionInfo struct {
	Dir          string       `json:"dir"`
	Version      string       `json:"version"`
	CreatedAtMs  int64        `json:"created_at_ms"`
	InputSamples int64        `json:"input_samples"`
	Samples      int64        `json:"samples"`
	Boxes        int64        `json:"boxes"`
	BoxWidth     Distribution `json:"box_width"`
	BoxHeight    Distribution `json:"box_height"`
	BoxArea      Distribution `json:"box_area"`
}

// Metric is one compared quantity. A and B are the values of each side
// (counts, medians, statistics), Delta is A-B, Drift the section's drift
// measure (nil when it is undefined, e.g. box sizes of two versions
// without boxes) and Limit the limit applied to it (nil: none).
type Metric struct {
	Section  string   `json:"section"`
	Name     string   `json:"name"`
	A        float64  `json:"a"`
	B        float64  `json:"b"`
	Delta    float64  `json:"delta"`
	Drift    *float64 `json:"drift"`
	Limit    *float64 `json:"limit"`
	Exceeded bool     `json:"exceeded"`
}

// String describes an exceeded metric: "reasons/empty drift 0.12 > limit
// 0.05 (A 12, B 4)"; other metrics without the comparison.
func (m Metric) String() string {
	if !m.Exceeded {
		return fmt.Sprintf("%s/%s (A %.6g, B %.6g)", m.Section, m.Name, m.A, m.B)
	}
	return fmt.Sprintf("%s/%s drift %.4g > limit %.4g (A %.6g, B %.6g)", m.Section, m.Name, *m.Drift, *m.Limit, m.A, m.B)
}

// ConfigChange is a version recipe key or threshold whose value differs;
// a nil side does not have the key.
type ConfigChange struct {
	Key string  `json:"key"`
	A   *string `json:"a"`
	B   *string `json:"b"`
}

// Diff compares version A (the candidate) against B (the baseline).
type Diff struct {
	A             VersionInfo    `json:"a"`
	B             VersionInfo    `json:"b"`
	Limits        Limits         `json:"limits"`
	Metrics       []Metric       `json:"metrics"`
	ConfigChanges []ConfigChange `json:"config_changes"`
	Exceeded      int            `json:"exceeded"` // metrics past their limit
}

// ExceededMetrics lists the metrics past their limit, in report order.
func (d *Diff) ExceededMetrics() []Metric {
	var out []Metric
	for _, m := range d.Metrics {
		if m.Exceeded {
			out = append(out, m)
		}
	}
	return out
}

// DriftError says a comparison found metrics past their limits; the CLI
// maps it to its own exit code.
type DriftError struct {
	Exceeded []Metric
}

func (e *DriftError) Error() string {
	parts := make([]string, len(e.Exceeded))
	for i, m := range e.Exceeded {
		parts[i] = m.String()
	}
	return fmt.Sprintf("%d drift limit(s) exceeded: %s", len(e.Exceeded), strings.Join(parts, "; "))
}

// Err returns a *DriftError when a metric exceeded its limit, else nil.
func (d *Diff) Err() error {
	if ex := d.ExceededMetrics(); len(ex) > 0 {
		return &DriftError{Exceeded: ex}
	}
	return nil
}

// Compare compares the version directories dirA and dirB: their manifests
// (summary counts, reasons, image statistics, recipe and thresholds) and
// their shards (boxes per class, box sizes).
func Compare(ctx context.Context, dirA, dirB string, limits Limits) (*Diff, error) {
	type side struct {
		dir   string
		m     *warehouse.Manifest
		boxes *boxStats
	}
	sides := []*side{{dir: dirA}, {dir: dirB}}
	for _, s := range sides {
		m, err := warehouse.ReadManifest(s.dir)
		if err != nil {
			return nil, err
		}
		st, err := readBoxStats(ctx, s.dir, m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.dir, err)
		}
		s.m, s.boxes = m, st
	}
	a, b := sides[0], sides[1]
	d := &Diff{Limits: limits, ConfigChanges: []ConfigChange{}}
	for _, p := range []struct {
		info *VersionInfo
		s    *side
	}{{&d.A, a}, {&d.B, b}} {
		*p.info = VersionInfo{
			Dir: p.s.dir, Version: p.s.m.Version, CreatedAtMs: p.s.m.CreatedAtMs,
			InputSamples: p.s.m.InputSamples, Samples: p.s.m.Samples, Boxes: p.s.boxes.boxes,
			BoxWidth: p.s.boxes.width.distribution(), BoxHeight: p.s.boxes.height.distribution(), BoxArea: p.s.boxes.area.distribution(),
		}
	}
	d.compareSamples(a.m.Summary.Total, b.m.Summary.Total, a.boxes.boxes, b.boxes.boxes)
	d.compareReasons(a.m.Summary.Total, b.m.Summary.Total)
	d.compareClasses(a.m, b.m, a.boxes, b.boxes)
	d.compareBoxSizes(a.boxes, b.boxes)
	d.compareImages(a.m.ImageStats, b.m.ImageStats)
	changes, err := configChanges(a.m, b.m)
	if err != nil {
		return nil, err
	}
	d.ConfigChanges = changes
	for _, m := range d.Metrics {
		if m.Exceeded {
			d.Exceeded++
		}
	}
	return d, nil
}

// add appends a metric and checks it against limit.
func (d *Diff) add(section, name string, a, b float64, drift *float64, limit *float64) {
	m := Metric{Section: section, Name: name, A: a, B: b, Delta: a - b, Drift: drift, Limit: limit}
	m.Exceeded = drift != nil && limit != nil && *drift > *limit
	d.Metrics = append(d.Metrics, m)
}

func share(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}

func shareChange(a, totalA, b, totalB int64) *float64 {
	v := math.Abs(share(a, totalA) - share(b, totalB))
	return &v
}

func relativeChange(a, b int64) *float64 {
	v := math.Abs(float64(a-b)) / float64(max(b, 1))
	return &v
}

func (d *Diff) compareSamples(a, b validate.Counts, boxesA, boxesB int64) {
	d.add(SectionSamples, "total", float64(a.Total), float64(b.Total), relativeChange(a.Total, b.Total), d.Limits.TotalChange)
	for _, c := range []struct {
		name string
		a, b int64
	}{
		{"kept", a.Kept, b.Kept},
		{"skipped", a.Skipped, b.Skipped},
		{"non_empty", a.NonEmpty, b.NonEmpty},
		{"empty", a.Empty, b.Empty},
		{"invalid", a.Invalid, b.Invalid},
		{"missing_image", a.MissingImage, b.MissingImage},
		{"missing_file", a.MissingFile, b.MissingFile},
	} {
		d.add(SectionSamples, c.name, float64(c.a), float64(c.b), shareChange(c.a, a.Total, c.b, b.Total), d.Limits.RatioChange)
	}
	d.add(SectionSamples, "boxes", float64(boxesA), float64(boxesB), relativeChange(boxesA, boxesB), nil)
}

func (d *Diff) compareReasons(a, b validate.Counts) {
	union := map[validate.Reason]int64{}
	for r := range a.ByReason {
		union[r] = 0
	}
	for r := range b.ByReason {
		union[r] = 0
	}
	for _, r := range reasonOrder(union) {
		na, nb := a.ByReason[r], b.ByReason[r]
		d.add(SectionReasons, string(r), float64(na), float64(nb), shareChange(na, a.Total, nb, b.Total), d.Limits.RatioChange)
	}
}

// compareClasses matches classes by name (indices may differ between
// versions): A's class table order, then classes only B has, then boxes of
// unknown class.
func (d *Diff) compareClasses(ma, mb *warehouse.Manifest, a, b *boxStats) {
	var names []string
	for _, m := range []*warehouse.Manifest{ma, mb} {
		for _, c := range m.Classes {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	if a.perClass[unknownClass]+b.perClass[unknownClass] > 0 {
		names = append(names, unknownClass)
	}
	for _, name := range names {
		na, nb := a.perClass[name], b.perClass[name]
		d.add(SectionClasses, name, float64(na), float64(nb), shareChange(na, a.boxes, nb, b.boxes), d.Limits.ClassShareChange)
	}
}

func (d *Diff) compareBoxSizes(a, b *boxStats) {
	for _, h := range []struct {
		name string
		a, b *histogram
	}{{"width", &a.width, &b.width}, {"height", &a.height, &b.height}, {"area", &a.area, &b.area}} {
		var drift *float64
		if ks, ok := ksDistance(h.a, h.b); ok {
			drift = &ks
		}
		d.add(SectionBoxSize, h.name, h.a.quantile(0.5), h.b.quantile(0.5), drift, d.Limits.BoxSizeKS)
	}
}

func (d *Diff) compareImages(a, b warehouse.ImageStats) {
	channels := [3]string{"r", "g", "b"}
	known := a.Values > 0 && b.Values > 0
	for _, stat := range []struct {
		name string
		a, b [3]float64
	}{{"mean", a.Mean, b.Mean}, {"std", a.Std, b.Std}} {
		for c := range 3 {
			var drift *float64
			if known {
				v := math.Abs(stat.a[c] - stat.b[c])
				drift = &v
			}
			d.add(SectionImage, stat.name+"_"+channels[c], stat.a[c], stat.b[c], drift, d.Limits.ImageStatChange)
		}
	}
}

// configChanges compares the version recipes (every key that changes the
// bytes) and the thresholds (which do not, but decide what a build
// accepts), keys sorted.
func configChanges(a, b *warehouse.Manifest) ([]ConfigChange, error) {
	var flat [2]map[string]string
	for i, m := range []*warehouse.Manifest{a, b} {
		recipe, err := records.ParseRecipe(m.VersionRecipe)
		if err != nil {
			return nil, corruptf("version %.16s: version_recipe: %v", m.Version, err)
		}
		thresholds, err := flattenJSON("thresholds", m.Thresholds)
		if err != nil {
			return nil, err
		}
		for k, v := range thresholds {
			recipe[k] = v
		}
		flat[i] = recipe
	}
	keys := map[string]bool{}
	for _, f := range flat {
		for k := range f {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	out := []ConfigChange{}
	for _, k := range sorted {
		va, inA := flat[0][k]
		vb, inB := flat[1][k]
		if inA == inB && va == vb {
			continue
		}
		c := ConfigChange{Key: k}
		if inA {
			c.A = &va
		}
		if inB {
			c.B = &vb
		}
		out = append(out, c)
	}
	return out, nil
}

// flattenJSON turns v's JSON object into "prefix.key.sub" -> value, values
// as their JSON text.
func flattenJSON(prefix string, v any) (map[string]string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(key string, v any)
	walk = func(key string, v any) {
		if obj, ok := v.(map[string]any); ok {
			for k, sub := range obj {
				walk(key+"."+k, sub)
			}
			return
		}
		text, _ := json.Marshal(v) // re-encoding a decoded value cannot fail
		out[key] = string(text)
	}
	walk(prefix, tree)
	return out, nil
}

// SectionConfig is the section of config changes in diff.parquet.
const SectionConfig = "config"

var diffSchema = arrow.NewSchema([]arrow.Field{
	stringField("version_a", false),
	stringField("version_b", false),
	stringField("section", false),
	stringField("name", false),
	float64Field("a", true),
	float64Field("b", true),
	float64Field("delta", true),
	float64Field("drift", true),
	float64Field("limit", true),
	int64Field("exceeded", false),
	stringField("value_a", true),
	stringField("value_b", true),
}, nil)

// WriteParquet writes the diff to path (diff.parquet, docs/format/parquet.md):
// one row per metric, then one per config change. The file is replaced
// atomically.
func (d *Diff) WriteParquet(path string) (err error) {
	out, err := createParquet(filepath.Dir(path), filepath.Base(path), diffSchema)
	if err != nil {
		return err
	}
	defer out.abort()
	rb := out.rb
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	f64 := func(i int) *array.Float64Builder { return rb.Field(i).(*array.Float64Builder) }
	optF64 := func(i int, v *float64) {
		if v == nil {
			f64(i).AppendNull()
			return
		}
		f64(i).Append(*v)
	}
	optStr := func(i int, v *string) {
		if v == nil {
			str(i).AppendNull()
			return
		}
		str(i).Append(*v)
	}
	for _, m := range d.Metrics {
		str(0).Append(d.A.Version)
		str(1).Append(d.B.Version)
		str(2).Append(m.Section)
		str(3).Append(m.Name)
		f64(4).Append(m.A)
		f64(5).Append(m.B)
		f64(6).Append(m.Delta)
		optF64(7, m.Drift)
		optF64(8, m.Limit)
		rb.Field(9).(*array.Int64Builder).Append(flag(m.Exceeded))
		str(10).AppendNull()
		str(11).AppendNull()
		if err := out.endRow(); err != nil {
			return err
		}
	}
	for _, c := range d.ConfigChanges {
		str(0).Append(d.A.Version)
		str(1).Append(d.B.Version)
		str(2).Append(SectionConfig)
		str(3).Append(c.Key)
		for i := 4; i <= 8; i++ {
			f64(i).AppendNull()
		}
		rb.Field(9).(*array.Int64Builder).Append(0)
		optStr(10, c.A)
		optStr(11, c.B)
		if err := out.endRow(); err != nil {
			return err
		}
	}
	if err := out.finish(); err != nil {
		return err
	}
	return out.publish()
}
