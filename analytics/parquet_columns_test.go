package analytics

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"warehouse-etl/warehouse"
)

// The writer of parquet.go and parquet_columns.go replaces
// pqarrow.FileWriter (whose package imports arrow/flight and gRPC) and must
// write the same bytes. These tests hold it to that with pqarrow itself,
// which tests may import: the test binary is not the CLI.

// shapesSchema has every way the exported types may nest, beyond what the
// exports use today: lists of lists, structs in lists and lists in
// structs, nullable structs in nullable structs, every leaf type nullable
// and not.
var shapesSchema = arrow.NewSchema([]arrow.Field{
	int64Field("i", false),
	int64Field("oi", true),
	float32Field("f"),
	{Name: "of", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	float64Field("d", false),
	float64Field("od", true),
	stringField("s", false),
	stringField("os", true),
	listField("li", arrow.PrimitiveTypes.Int64),
	listField("lf", arrow.PrimitiveTypes.Float32),
	listField("ll", arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float64)),
	listField("ls", arrow.StructOf(stringField("a", false), float32Field("b"), listField("c", arrow.BinaryTypes.String))),
	structField("st", false, int64Field("a", false), stringField("b", true), listField("c", arrow.BinaryTypes.String)),
	structField("ost", true, float64Field("a", false), listField("l", arrow.PrimitiveTypes.Int64),
		structField("b", true, int64Field("x", false), stringField("y", true))),
}, nil)

// randomRows appends random values, nulls and lists to builders.
type randomRows struct {
	r       *rand.Rand
	nulls   float64 // chance that a nullable value is null
	maxList int     // lists hold 0..maxList elements
	unique  bool    // strings mostly distinct and long (dictionary fallback), else a few short ones
}

func (g *randomRows) appendValue(b array.Builder, f arrow.Field) {
	if f.Nullable && g.r.Float64() < g.nulls {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.Int64Builder:
		b.Append(g.r.Int64N(1000) - 100)
	case *array.Float32Builder:
		b.Append(float32(g.float()))
	case *array.Float64Builder:
		b.Append(g.float())
	case *array.StringBuilder:
		b.Append(g.string())
	case *array.ListBuilder:
		b.Append(true)
		elem := f.Type.(*arrow.ListType).ElemField()
		for range g.r.IntN(g.maxList + 1) {
			g.appendValue(b.ValueBuilder(), elem)
		}
	case *array.StructBuilder:
		b.Append(true)
		for i, c := range f.Type.(*arrow.StructType).Fields() {
			g.appendValue(b.FieldBuilder(i), c)
		}
	default:
		panic(fmt.Sprintf("no random %T", b))
	}
}

func (g *randomRows) float() float64 {
	switch g.r.IntN(50) {
	case 0:
		return math.NaN()
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return math.Inf(1)
	}
	return g.r.NormFloat64() * 100
}

func (g *randomRows) string() string {
	switch {
	case g.r.IntN(20) == 0:
		return ""
	case g.unique:
		return fmt.Sprintf("%016x/%016x/%08x", g.r.Uint64(), g.r.Uint64(), g.r.Uint32())
	}
	return []string{"run_0", "run_1", "invalid_bbox", "polyp", "ünïcode"}[g.r.IntN(5)]
}

func (g *randomRows) appendRow(rb *array.RecordBuilder) {
	for i, f := range rb.Schema().Fields() {
		g.appendValue(rb.Field(i), f)
	}
}

// writeOurs writes rows random rows of sc with createParquet.
func writeOurs(t *testing.T, dir string, sc *arrow.Schema, rows int, g randomRows) []byte {
	t.Helper()
	p, err := createParquet(dir, "ours.parquet", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.abort()
	for range rows {
		g.appendRow(p.rb)
		if err := p.endRow(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.finish(); err != nil {
		t.Fatal(err)
	}
	if err := p.publish(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "ours.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writePqarrow writes the same rows as writeOurs (same seed) with
// pqarrow.FileWriter, a record of batchRows rows at a time, as the exports
// did before.
func writePqarrow(t *testing.T, sc *arrow.Schema, rows int, g randomRows) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(sc, &buf, writerProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer rb.Release()
	write := func() {
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if err := fw.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	for row := range rows {
		g.appendRow(rb)
		if (row+1)%batchRows == 0 {
			write()
		}
	}
	if rows%batchRows != 0 {
		write()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParquetWriterMatchesPqarrow(t *testing.T) {
	schemas := []struct {
		name string
		sc   *arrow.Schema
	}{
		{"samples", samplesSchema}, {"runs", runsSchema}, {"build", buildSchema}, {"diff", diffSchema}, {"shapes", shapesSchema},
	}
	cases := []struct {
		name string
		rows int
		g    randomRows
	}{
		{"empty", 0, randomRows{}},
		{"one row", 1, randomRows{nulls: 0.5, maxList: 3}},
		{"no nulls", 3000, randomRows{maxList: 4}},
		{"some nulls", 3000, randomRows{nulls: 0.3, maxList: 4}},
		{"all null, empty lists", 3000, randomRows{nulls: 1}},
		{"long lists", 2000, randomRows{nulls: 0.1, maxList: 40}},
		{"two row groups", batchRows + 500, randomRows{nulls: 0.2, maxList: 3}},
		// Three row groups of several pages each, dictionaries that
		// outgrow their page limit and fall back to plain.
		{"unique strings", batchRows + 77, randomRows{nulls: 0.2, maxList: 3, unique: true}},
	}
	if testing.Short() {
		cases = cases[:len(cases)-2]
	}
	for _, s := range schemas {
		for k, c := range cases {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				seed := uint64(k)
				c.g.r = rand.New(rand.NewPCG(seed, 17))
				ours := writeOurs(t, t.TempDir(), s.sc, c.rows, c.g)
				c.g.r = rand.New(rand.NewPCG(seed, 17))
				want := writePqarrow(t, s.sc, c.rows, c.g)
				if err := sameParquet(ours, want); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// sameParquet reports how ours differs from want, pqarrow's bytes. The one
// difference it lets pass is the order of a column chunk's page encoding
// stats in the footer: arrow-go writes them from a map
// (metadata.ColumnChunkMetaDataBuilder.Finish), so a column whose
// dictionary fell back to plain mid-chunk lists its two data page
// encodings in either order, from pqarrow as from us. Everything before
// the footer must still be the same bytes, and the footers the same
// length, the same bytes up to order and the same metadata.
func sameParquet(ours, want []byte) error {
	if bytes.Equal(ours, want) {
		return nil
	}
	if len(ours) != len(want) || len(ours) < 12 {
		return fmt.Errorf("%d bytes, pqarrow's %d", len(ours), len(want))
	}
	footer := 8 + int(binary.LittleEndian.Uint32(ours[len(ours)-8:]))
	if footer > len(ours) {
		return fmt.Errorf("footer of %d bytes in %d", footer, len(ours))
	}
	body := len(ours) - footer
	if i := firstDiff(ours[:body], want[:body]); i < body {
		return fmt.Errorf("%d bytes, pqarrow's the same length: first difference at %d, before the footer at %d", len(ours), i, body)
	}
	a, b := slices.Clone(ours[body:]), slices.Clone(want[body:])
	slices.Sort(a)
	slices.Sort(b)
	if !bytes.Equal(a, b) {
		return fmt.Errorf("footers differ (at %d, footer at %d)", firstDiff(ours, want), body)
	}
	ma, err := describeMetadata(ours)
	if err != nil {
		return err
	}
	mb, err := describeMetadata(want)
	if err != nil {
		return err
	}
	if ma != mb {
		return fmt.Errorf("footer metadata differs:\n%s\npqarrow's:\n%s", ma, mb)
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// describeMetadata prints a file's footer, page encoding stats sorted.
func describeMetadata(data []byte) (string, error) {
	r, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	defer r.Close()
	md := r.MetaData()
	var sb strings.Builder
	fmt.Fprintf(&sb, "rows %d, created by %s, key-values %v\n", md.NumRows, md.GetCreatedBy(), md.KeyValueMetadata())
	schema.PrintSchema(md.Schema.Root(), &sb, 2)
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		fmt.Fprintf(&sb, "row group %d: %d rows, %d bytes, %d compressed, ordinal %d\n", i, rg.NumRows(), rg.TotalByteSize(), rg.TotalCompressedSize(), rg.Ordinal())
		for j := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(j)
			if err != nil {
				return "", err
			}
			stats := cc.EncodingStats()
			slices.SortFunc(stats, func(x, y metadata.PageEncodingStats) int {
				return cmp.Or(cmp.Compare(x.PageType, y.PageType), cmp.Compare(x.Encoding, y.Encoding))
			})
			fmt.Fprintf(&sb, "  %s: %d values, %d/%d bytes, offsets %d %d %d, encodings %v, stats %v",
				cc.PathInSchema(), cc.NumValues(), cc.TotalCompressedSize(), cc.TotalUncompressedSize(),
				cc.DataPageOffset(), cc.DictionaryPageOffset(), cc.FileOffset(), cc.Encodings(), stats)
			if st, err := cc.Statistics(); err != nil {
				return "", err
			} else if st != nil {
				fmt.Fprintf(&sb, ", nulls %d, min %x, max %x", st.NullCount(), st.EncodeMin(), st.EncodeMax())
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String(), nil
}

// An export of a synthetic version is what pqarrow writes for the rows it
// holds: each file read back with pqarrow and written again with
// pqarrow.FileWriter, a row group per record, gives the same bytes.
func TestExportMatchesPqarrowRewrite(t *testing.T) {
	n := 2*batchRows + 1000
	if testing.Short() {
		n = 5000
	}
	dir := t.TempDir()
	m := synthWarehouse(t, dir, n, 20_000)
	if _, err := Export(context.Background(), dir, m, ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{warehouse.SamplesParquetName, warehouse.RunsParquetName, warehouse.BuildParquetName} {
		path := filepath.Join(dir, name)
		ours, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameParquet(ours, pqarrowRewrite(t, path)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func pqarrowRewrite(t *testing.T, path string) []byte {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: batchRows}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	fw, err := pqarrow.NewFileWriter(sc, &buf, writerProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for i := range rdr.NumRowGroups() {
		rr, err := fr.GetRecordReader(context.Background(), nil, []int{i})
		if err != nil {
			t.Fatal(err)
		}
		for rr.Next() {
			if err := fw.Write(rr.RecordBatch()); err != nil {
				t.Fatal(err)
			}
		}
		if err := rr.Err(); err != nil {
			t.Fatal(err)
		}
		rr.Release()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Types outside the package doc's list are refused when the file is
// created, and leave no temporary file.
func TestParquetRefusesOtherTypes(t *testing.T) {
	for _, f := range []arrow.Field{
		{Name: "u", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "h", Type: arrow.FixedWidthTypes.Float16},
		{Name: "ls", Type: arrow.BinaryTypes.LargeString},
		{Name: "ll", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)},
		{Name: "e", Type: arrow.StructOf()},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"7"})},
		{Name: "ol", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "lo", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "los", Type: arrow.ListOf(arrow.StructOf(int64Field("a", false)))},
		{Name: "lso", Type: arrow.ListOfNonNullable(arrow.StructOf(int64Field("a", true)))},
		{Name: "slo", Type: arrow.StructOf(listField("l", arrow.ListOf(arrow.BinaryTypes.String)))},
	} {
		dir := t.TempDir()
		if p, err := createParquet(dir, "x.parquet", arrow.NewSchema([]arrow.Field{f}, nil)); err == nil {
			p.abort()
			t.Errorf("%s %s: no error", f.Name, f.Type)
		}
		if left := dirEntries(t, dir); len(left) > 0 {
			t.Errorf("%s: left %v", f.Name, left)
		}
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// The package, and so the CLI, does not link parquet/pqarrow, whose import
// of arrow/flight brings gRPC, protobuf and an HTTP/2 stack.
func TestNoFlightDependency(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gocmd, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasSuffix(pkg, "/parquet/pqarrow") || strings.Contains(pkg, "/arrow/flight") ||
			strings.HasPrefix(pkg, "google.golang.org/grpc") || strings.HasPrefix(pkg, "google.golang.org/protobuf") {
			t.Errorf("analytics depends on %s", pkg)
		}
	}
}
