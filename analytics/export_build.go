package analytics

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"warehouse-etl/analytics/records"
	"warehouse-etl/warehouse"
)

// readBuildReport reads the version's build report, bounded.
func readBuildReport(dir string, m *warehouse.Manifest) ([]byte, error) {
	name := filepath.Join(dir, filepath.FromSlash(m.Files.BuildReport))
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, records.MaxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return raw, nil
}

// decodeBuildReport decodes the build report raw of the version in dir and
// checks it belongs to manifest m.
func decodeBuildReport(dir string, m *warehouse.Manifest, raw []byte) (*records.BuildReport, error) {
	name := filepath.Join(dir, filepath.FromSlash(m.Files.BuildReport))
	r, err := records.DecodeBuildReport(raw)
	if err != nil {
		return nil, corruptf("%s: %v", name, err)
	}
	if r.Version != m.Version || r.InputSamples != m.InputSamples || r.Samples != m.Samples {
		return nil, corruptf("%s describes version %.16s with %d samples (%d kept), the manifest version %.16s with %d (%d kept)",
			name, r.Version, r.InputSamples, r.Samples, m.Version, m.InputSamples, m.Samples)
	}
	return r, nil
}

// Values of build.parquet's phases.clock.
const (
	ClockWall      = "wall"       // elapsed time of the phase
	ClockWorkerSum = "worker_sum" // summed over workers: CPU-seconds, may exceed the wall time
)

var buildSchema = arrow.NewSchema([]arrow.Field{
	stringField("version", false),
	stringField("code_version", false),
	int64Field("created_at_ms", false),
	int64Field("started_at_ms", false),
	stringField("host", false),
	stringField("goos", false),
	stringField("goarch", false),
	int64Field("workers", false),
	int64Field("input_samples", false),
	int64Field("samples", false),
	int64Field("skipped", false),
	int64Field("shards", false),
	int64Field("bytes_written", false),
	float64Field("samples_per_second", false),
	float64Field("mb_per_second", false),
	int64Field("jpeg_fallbacks", true),
	stringField("source_fingerprint_sha256", false),
	listField("phases", arrow.StructOf(stringField("phase", false), float64Field("seconds", false), stringField("clock", false))),
	int64Field("reused", true), // null in reports written before reuse existed
	int64Field("decoded", true),
	int64Field("reuse_fell_back", true),
	int64Field("reuse_bytes_copied", true),
}, nil)

type phase struct {
	name    string
	seconds float64
	clock   string
}

// reportPhases lists the report's phases in pipeline order. Before publish the
// publish and total times do not exist yet and are left out rather than
// written as zeros.
func reportPhases(r *records.BuildReport, beforePublish bool) []phase {
	p := r.Phases
	out := []phase{
		{"scan", p.Scan, ClockWall},
		{"validate", p.Validate, ClockWall},
		{"read", p.Read, ClockWorkerSum},
		{"decode", p.Decode, ClockWorkerSum},
		{"resize", p.Resize, ClockWorkerSum},
		{"normalize", p.Normalize, ClockWorkerSum},
		{"write", p.Write, ClockWall},
	}
	if !beforePublish {
		out = append(out, phase{"publish", p.Publish, ClockWall}, phase{"total", p.Total, ClockWall})
	}
	return out
}

// writeBuild writes build.parquet: one row for the build.
func writeBuild(dir string, m *warehouse.Manifest, r *records.BuildReport) (_ *parquetFile, err error) {
	out, err := createParquet(dir, warehouse.BuildParquetName, buildSchema)
	if err != nil {
		return nil, err
	}
	defer abortOnError(out, &err)
	rb := out.rb
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	i64 := func(i int) *array.Int64Builder { return rb.Field(i).(*array.Int64Builder) }
	str(0).Append(m.Version)
	str(1).Append(m.CodeVersion)
	i64(2).Append(m.CreatedAtMs)
	i64(3).Append(r.StartedAtMs)
	str(4).Append(r.Host)
	str(5).Append(r.GOOS)
	str(6).Append(r.GOARCH)
	for i, v := range []int64{r.Workers, r.InputSamples, r.Samples, r.Skipped, r.Shards, r.BytesWritten} {
		i64(7 + i).Append(v)
	}
	rb.Field(13).(*array.Float64Builder).Append(r.SamplesPerSecond)
	rb.Field(14).(*array.Float64Builder).Append(r.MBPerSecond)
	if r.JPEGFallbacks != nil {
		i64(15).Append(*r.JPEGFallbacks)
	} else {
		i64(15).AppendNull()
	}
	str(16).Append(m.SourceFingerprint.SHA256)
	phases := rb.Field(17).(*array.ListBuilder)
	ph := phases.ValueBuilder().(*array.StructBuilder)
	phases.Append(true)
	for _, p := range reportPhases(r, false) {
		ph.Append(true)
		ph.FieldBuilder(0).(*array.StringBuilder).Append(p.name)
		ph.FieldBuilder(1).(*array.Float64Builder).Append(p.seconds)
		ph.FieldBuilder(2).(*array.StringBuilder).Append(p.clock)
	}
	for i, v := range reuseColumns(r) {
		if v != nil {
			i64(18 + i).Append(*v)
		} else {
			i64(18 + i).AppendNull()
		}
	}
	if err := out.endRow(); err != nil {
		return nil, err
	}
	return out, out.finish()
}

// reuseColumns are the report's reuse counts (nil without them).
func reuseColumns(r *records.BuildReport) []*int64 {
	u := r.Reuse
	if u == nil {
		return []*int64{nil, nil, nil, nil}
	}
	return []*int64{&u.Reused, &u.Decoded, &u.FellBack, &u.BytesCopied}
}
