package analytics

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/internal/fsfault"
)

// batchRows is both the Arrow batch size (rows held decoded in memory) and
// the Parquet row group size: each batch is encoded, compressed and written
// as one row group as soon as it is full, so memory holds one batch and one
// column chunk at a time. Engines parallelise and prune per row group;
// 65536 rows keeps groups large enough for that.
const batchRows = 1 << 16

// uniqueColumns hold a different value in (nearly) every row: a
// dictionary would cost time and memory for nothing.
var uniqueColumns = []string{"seq", "frame", "unix_time_ns", "sim_time", "label_path", "image_path", "index", "shard_index"}

// writerProperties are the same for every file we write: zstd, dictionary
// encoding (run, reason, class and shard names repeat) except for the
// unique columns, statistics for pruning.
func writerProperties() *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(batchRows),
		parquet.WithVersion(parquet.V2_LATEST),
	}
	for _, c := range uniqueColumns {
		opts = append(opts, parquet.WithDictionaryFor(c, false))
	}
	return parquet.NewWriterProperties(opts...)
}

// parquetFile streams rows into one Parquet file under a temporary name
// and renames it into place on publish. Fill the builders of rb, call
// endRow after each row, then finish and publish; abort (always safe to
// defer) removes the temporary file unless publish succeeded.
//
// Each batch of rb becomes one row group, written column by column through
// arrow-go's parquet/file writer (parquet_columns.go), not through
// parquet/pqarrow: pqarrow imports arrow/flight, and with it gRPC,
// protobuf and an HTTP/2 stack, which made up a quarter of the binary.
// The bytes are those pqarrow.FileWriter.Write writes for the same
// batches with pqarrow.DefaultWriterProps (parquet_columns_test.go
// compares the two).
type parquetFile struct {
	final, tmp string
	f          *os.File
	buf        *bufio.Writer // between fw and f; it has no Close, so fw cannot close f before we fsync it
	fw         *file.Writer
	columns    []*leafColumn // the Parquet leaf columns of rb's schema, in file order
	levels     levelBuffers  // scratch for one column chunk
	rb         *array.RecordBuilder
	batch      int   // rows in rb
	rows       int64 // rows written, this batch included
	done       bool
}

// createParquet starts dir/name. The temporary file is dot-prefixed, so
// readers of the version directory ignore it, and lives in dir, so the
// final rename does not cross filesystems.
func createParquet(dir, name string, schema *arrow.Schema) (*parquetFile, error) {
	f, err := createTemp(dir, "."+name+".tmp-")
	if err != nil {
		return nil, err
	}
	buf := bufio.NewWriterSize(fsfault.File{File: f}, 1<<20)
	props := writerProperties()
	root, columns, err := parquetSchema(schema, props)
	var fw *file.Writer
	if err == nil {
		// An empty, not nil, key-value list: what pqarrow passes for an
		// Arrow schema without metadata (nil writes another footer).
		meta := make(metadata.KeyValueMetadata, 0)
		fw, err = file.NewParquetWriterWithError(buf, root, file.WithWriterProps(props), file.WithWriteMetadata(meta))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	rb.Reserve(batchRows)
	return &parquetFile{final: filepath.Join(dir, name), tmp: f.Name(), f: f, buf: buf, fw: fw, columns: columns, rb: rb}, nil
}

// endRow finishes the row whose columns were just appended.
func (p *parquetFile) endRow() error {
	p.batch++
	p.rows++
	if p.batch < batchRows {
		return nil
	}
	return p.flush()
}

func (p *parquetFile) flush() error {
	if p.batch == 0 {
		return nil
	}
	rec := p.rb.NewRecordBatch()
	defer rec.Release()
	p.batch = 0
	if err := p.writeRowGroup(rec); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(p.final), err)
	}
	return nil
}

// writeRowGroup writes rec as one row group, one leaf column at a time.
func (p *parquetFile) writeRowGroup(rec arrow.RecordBatch) error {
	rgw, err := p.fw.AppendRowGroupChecked()
	if err != nil {
		return err
	}
	for _, c := range p.columns {
		cw, err := rgw.NextColumn()
		if err != nil {
			return err
		}
		if err := c.write(cw, rec.Column(c.top), &p.levels); err != nil {
			return fmt.Errorf("column %s: %w", cw.Descr().Path(), err)
		}
	}
	return rgw.Close()
}

// finish writes the footer and fsyncs the file under its temporary name.
func (p *parquetFile) finish() error {
	name := filepath.Base(p.final)
	if err := p.flush(); err != nil {
		return err
	}
	if err := p.fw.Close(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := p.buf.Flush(); err != nil {
		return err
	}
	if err := fsfault.SyncFile(p.f); err != nil {
		return fmt.Errorf("fsync %s: %w", p.tmp, err)
	}
	return p.f.Close()
}

// publish renames a finished file over its final name and fsyncs the
// directory so the rename survives a crash.
func (p *parquetFile) publish() error {
	if err := fsfault.RenameFile(p.tmp, p.final); err != nil {
		return err
	}
	p.done = true
	return syncPath(filepath.Dir(p.final))
}

// abort releases the builders and, unless publish succeeded, removes the
// temporary file; the final file is untouched.
func (p *parquetFile) abort() {
	p.rb.Release()
	if p.done {
		return
	}
	p.fw.Close() // errors change nothing: the file is removed
	p.f.Close()
	os.Remove(p.tmp)
}

// abortOnError aborts out when *err is set: the deferred cleanup of a
// write function that hands a finished file to its caller on success.
func abortOnError(out *parquetFile, err *error) {
	if *err != nil {
		out.abort()
	}
}

func syncPath(path string) error { return atomicfile.Sync(path) }

// createTemp creates a new file prefix<random> in dir with mode 0666 as
// the umask allows (0644 under the usual 022), like every other file of a
// version; os.CreateTemp's 0600 would hide the exports from a training job
// of another user, and a fixed chmod would ignore a stricter umask.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, prefix+hex.EncodeToString(b[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("%s: no unused temporary file name %s*", dir, prefix)
}

// Field constructors: every column is one of the types of the package doc.
func int64Field(name string, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: nullable}
}

func float64Field(name string, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: nullable}
}

func float32Field(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float32}
}

func stringField(name string, nullable bool) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: nullable}
}

// listField is a list that is never null (an empty list says "none") of
// non-null elements.
func listField(name string, elem arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.ListOfNonNullable(elem)}
}

func structField(name string, nullable bool, fields ...arrow.Field) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.StructOf(fields...), Nullable: nullable}
}

// appendNullableString appends s, or null when s is empty.
func appendNullableString(b *array.StringBuilder, s string) {
	if s == "" {
		b.AppendNull()
		return
	}
	b.Append(s)
}

// appendNullableInt64 appends v when valid, else null.
func appendNullableInt64(b *array.Int64Builder, v int64, valid bool) {
	if !valid {
		b.AppendNull()
		return
	}
	b.Append(v)
}

// flag is the int64 0/1 encoding of a boolean column.
func flag(v bool) int64 {
	if v {
		return 1
	}
	return 0
}
