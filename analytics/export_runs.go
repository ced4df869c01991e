package analytics

import (
	"cmp"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Values of runs.parquet's kind column.
const (
	KindRun   = "run"
	KindTotal = "total"
)

var runsSchema = arrow.NewSchema([]arrow.Field{
	stringField("kind", false),
	stringField("version", false),
	stringField("code_version", false),
	int64Field("created_at_ms", false),
	stringField("run", true),
	int64Field("run_index", true),
	listField("attributes", arrow.StructOf(stringField("name", false), stringField("value", false))),
	int64Field("total", false),
	int64Field("non_empty", false),
	int64Field("empty", false),
	int64Field("missing_image", false),
	int64Field("missing_file", false),
	int64Field("invalid", false),
	int64Field("kept", false),
	int64Field("skipped", false),
	listField("by_reason", arrow.StructOf(stringField("reason", false), int64Field("samples", false))),
}, nil)

// writeRuns writes runs.parquet: the manifest's summary, one row per run or
// episode in source index order, then the total row.
func writeRuns(dir string, m *warehouse.Manifest) (_ *parquetFile, err error) {
	out, err := createParquet(dir, warehouse.RunsParquetName, runsSchema)
	if err != nil {
		return nil, err
	}
	defer abortOnError(out, &err)
	rb := out.rb
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	i64 := func(i int) *array.Int64Builder { return rb.Field(i).(*array.Int64Builder) }
	attrs := rb.Field(6).(*array.ListBuilder)
	attr := attrs.ValueBuilder().(*array.StructBuilder)
	byReason := rb.Field(15).(*array.ListBuilder)
	reason := byReason.ValueBuilder().(*array.StructBuilder)

	attributes := map[int]map[string]string{}
	for _, s := range m.Sources {
		attributes[s.Index] = s.Attributes
	}
	row := func(kind, run string, runIndex int, c validate.Counts) error {
		str(0).Append(kind)
		str(1).Append(m.Version)
		str(2).Append(m.CodeVersion)
		i64(3).Append(m.CreatedAtMs)
		appendNullableString(str(4), run)
		appendNullableInt64(i64(5), int64(runIndex), kind == KindRun)
		attrs.Append(true)
		if kind == KindRun {
			a := attributes[runIndex]
			for _, name := range sortedKeys(a) {
				attr.Append(true)
				attr.FieldBuilder(0).(*array.StringBuilder).Append(name)
				attr.FieldBuilder(1).(*array.StringBuilder).Append(a[name])
			}
		}
		for i, n := range []int64{c.Total, c.NonEmpty, c.Empty, c.MissingImage, c.MissingFile, c.Invalid, c.Kept, c.Skipped} {
			i64(7 + i).Append(n)
		}
		byReason.Append(true)
		for _, r := range reasonOrder(c.ByReason) {
			reason.Append(true)
			reason.FieldBuilder(0).(*array.StringBuilder).Append(string(r))
			reason.FieldBuilder(1).(*array.Int64Builder).Append(c.ByReason[r])
		}
		return out.endRow()
	}
	for _, r := range m.Summary.Runs {
		if err := row(KindRun, r.Name, r.Index, r.Counts); err != nil {
			return nil, err
		}
	}
	if err := row(KindTotal, "", 0, m.Summary.Total); err != nil {
		return nil, err
	}
	return out, out.finish()
}

// reasonOrder lists the reasons of a by_reason map in validate's stable
// order, unknown codes last by name: the order reports use.
func reasonOrder(byReason map[validate.Reason]int64) []validate.Reason {
	rs := make([]validate.Reason, 0, len(byReason))
	for r := range byReason {
		rs = append(rs, r)
	}
	return validate.Normalize(rs)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}
