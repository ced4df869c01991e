package analytics

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// This file turns the Arrow batches of parquetFile into Parquet column
// chunks: the Parquet schema of an Arrow schema, and the definition and
// repetition levels and values of each leaf column. Only the column types
// of the package doc are mapped (int64, float32, float64, string, struct,
// each nullable or not, and lists that are not, of elements that are not);
// anything else is an error when a file is created, never a silently
// different file.
//
// The schema is the one pqarrow.ToParquet makes with default properties:
// signed 64-bit INT64, FLOAT, DOUBLE, BYTE_ARRAY (String), three-level
// LIST groups with a "list" group and an "element" field, plain groups for
// structs, no field ids. Each leaf column of a row group is one
// WriteBatch of its values (nulls left out) and levels on parquet/file's
// column writer, which pqarrow drives too; where pqarrow calls
// WriteBatchSpaced (nullable values) or WriteBatchArrow (strings) instead,
// the pages and statistics come out the same for these shapes.
// parquet_columns_test.go holds the two writers to the same bytes.

// leafColumn is one Parquet leaf column of an Arrow schema.
type leafColumn struct {
	top   int        // index of its top-level Arrow column
	steps []leafStep // from the top-level field down to the primitive field
}

// leafStep is one Arrow field on the path to a leaf column.
type leafStep struct {
	nullable bool
	child    int   // a struct's field on the path
	rep      int16 // a list's elements' repetition level
}

// parquetSchema returns the Parquet schema of sc and its leaf columns in
// file order.
func parquetSchema(sc *arrow.Schema, props *parquet.WriterProperties) (*schema.GroupNode, []*leafColumn, error) {
	if sc.Metadata().Len() > 0 {
		return nil, nil, errors.New("schema metadata is not written")
	}
	var b schemaBuilder
	nodes := make(schema.FieldList, sc.NumFields())
	for i, f := range sc.Fields() {
		b.top = i
		n, err := b.node(f.Name, f, nil, 0)
		if err != nil {
			return nil, nil, err
		}
		nodes[i] = n
	}
	root, err := schema.NewGroupNode(props.RootName(), props.RootRepetition(), nodes, -1)
	if err != nil {
		return nil, nil, err
	}
	return root, b.columns, nil
}

type schemaBuilder struct {
	top     int
	columns []*leafColumn
}

// node returns the Parquet node of field f, named name, below the steps
// from the top-level field, under rep repeated ancestors, and adds its
// leaf columns.
//
// Lists are never null and hold nothing nullable (listField's lists): an
// empty list says "none". This is also where pqarrow, the reference for
// the bytes, goes wrong: it writes the values below a nullable list, or
// nullable values in a list, with WriteBatchSpaced, whose statistics count
// null and empty lists as null slots and can lose or invent min and max.
func (b *schemaBuilder) node(name string, f arrow.Field, steps []leafStep, rep int16) (schema.Node, error) {
	if f.Metadata.Len() > 0 {
		return nil, fmt.Errorf("column %q: field metadata is not written", name)
	}
	if f.Nullable && rep > 0 {
		return nil, fmt.Errorf("column %q: nullable field in a list", name)
	}
	repetition := parquet.Repetitions.Required
	if f.Nullable {
		repetition = parquet.Repetitions.Optional
	}
	step := leafStep{nullable: f.Nullable}
	switch t := f.Type.(type) {
	case *arrow.StructType:
		if t.NumFields() == 0 {
			return nil, fmt.Errorf("column %q: struct without fields", name)
		}
		children := make(schema.FieldList, t.NumFields())
		for i, c := range t.Fields() {
			step.child = i
			n, err := b.node(c.Name, c, append(slices.Clip(steps), step), rep)
			if err != nil {
				return nil, err
			}
			children[i] = n
		}
		return schema.NewGroupNode(name, repetition, children, -1)
	case *arrow.ListType:
		if f.Nullable {
			return nil, fmt.Errorf("column %q: nullable list", name)
		}
		step.rep = rep + 1
		elem, err := b.node("element", t.ElemField(), append(slices.Clip(steps), step), rep+1)
		if err != nil {
			return nil, err
		}
		return schema.ListOfWithName(name, elem, repetition, -1)
	}
	var (
		typ     parquet.Type
		logical schema.LogicalType = schema.NoLogicalType{}
	)
	switch f.Type.ID() {
	case arrow.INT64:
		typ, logical = parquet.Types.Int64, schema.NewIntLogicalType(64, true)
	case arrow.FLOAT32:
		typ = parquet.Types.Float
	case arrow.FLOAT64:
		typ = parquet.Types.Double
	case arrow.STRING:
		typ, logical = parquet.Types.ByteArray, schema.StringLogicalType{}
	default:
		return nil, fmt.Errorf("column %q: type %s is not exported", name, f.Type)
	}
	b.columns = append(b.columns, &leafColumn{top: b.top, steps: append(slices.Clip(steps), step)})
	return schema.NewPrimitiveNodeLogical(name, repetition, logical, typ, -1, -1)
}

// levelBuffers hold one column chunk: its levels and values. They are
// reused from column to column, so memory holds one chunk at a time.
type levelBuffers struct {
	def, rep []int16
	i64      []int64
	f32      []float32
	f64      []float64
	str      []parquet.ByteArray // into the batch's buffers, not copies
}

func (lb *levelBuffers) reset() {
	clear(lb.str) // let the previous batch's buffers go
	lb.def, lb.rep = lb.def[:0], lb.rep[:0]
	lb.i64, lb.f32, lb.f64, lb.str = lb.i64[:0], lb.f32[:0], lb.f64[:0], lb.str[:0]
}

func (lb *levelBuffers) level(def, rep int16) {
	lb.def = append(lb.def, def)
	lb.rep = append(lb.rep, rep)
}

// write writes the leaf column of arr, its top-level column of a batch, to
// cw as one WriteBatch.
func (c *leafColumn) write(cw file.ColumnChunkWriter, arr arrow.Array, lb *levelBuffers) error {
	lb.reset()
	for i := range arr.Len() {
		c.visit(lb, arr, 0, i, 0, 0)
	}
	// Levels are written only where the column has them, as in pqarrow.
	def, rep := lb.def, lb.rep
	if cw.Descr().MaxDefinitionLevel() == 0 {
		def = nil
	}
	if cw.Descr().MaxRepetitionLevel() == 0 {
		rep = nil
	}
	var err error
	switch w := cw.(type) {
	case *file.Int64ColumnChunkWriter:
		_, err = w.WriteBatch(lb.i64, def, rep)
	case *file.Float32ColumnChunkWriter:
		_, err = w.WriteBatch(lb.f32, def, rep)
	case *file.Float64ColumnChunkWriter:
		_, err = w.WriteBatch(lb.f64, def, rep)
	case *file.ByteArrayColumnChunkWriter:
		_, err = w.WriteBatch(lb.str, def, rep)
	default:
		err = fmt.Errorf("unexpected column writer %T", cw)
	}
	return err
}

// visit adds the levels and values of element i of arr, the array of
// c.steps[depth], given the definition level reached above it and the
// repetition level of its first value (Dremel's record shredding).
func (c *leafColumn) visit(lb *levelBuffers, arr arrow.Array, depth, i int, def, rep int16) {
	s := c.steps[depth]
	if s.nullable {
		if arr.IsNull(i) {
			lb.level(def, rep)
			return
		}
		def++
	}
	switch a := arr.(type) {
	case *array.Struct:
		c.visit(lb, a.Field(s.child), depth+1, i, def, rep)
	case *array.List:
		start, end := a.ValueOffsets(i)
		if start == end {
			lb.level(def, rep)
			return
		}
		for j := start; j < end; j++ {
			c.visit(lb, a.ListValues(), depth+1, int(j), def+1, rep)
			rep = s.rep
		}
	case *array.Int64:
		lb.i64 = append(lb.i64, a.Value(i))
		lb.level(def, rep)
	case *array.Float32:
		lb.f32 = append(lb.f32, a.Value(i))
		lb.level(def, rep)
	case *array.Float64:
		lb.f64 = append(lb.f64, a.Value(i))
		lb.level(def, rep)
	case *array.String:
		lb.str = append(lb.str, stringBytes(a, i))
		lb.level(def, rep)
	default:
		// parquetSchema admits no other type, and the batches are built
		// from the same schema.
		panic(fmt.Sprintf("analytics: %T in a Parquet column", arr))
	}
}

// stringBytes is element i of a without a copy; an empty string is an
// empty, not nil, slice, as pqarrow passes it.
func stringBytes(a *array.String, i int) []byte {
	offsets := a.ValueOffsets()
	buf := a.Data().Buffers()[2]
	if buf == nil {
		return []byte{}
	}
	return buf.Bytes()[offsets[i]:offsets[i+1]:offsets[i+1]]
}
