package analytics_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"warehouse-etl/analytics/records"
	"warehouse-etl/config"
	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// buildDemo builds the shipped demo dataset (its planted defects included)
// into outRoot with a small target size and small shards, changed by
// mutate, and returns the version directory and its manifest as read back.
func buildDemo(t *testing.T, outRoot string, mutate func(*config.Config)) (string, *warehouse.Manifest) {
	t.Helper()
	root, err := filepath.Abs("../testdata/capture")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Source.Root = root
	cfg.TargetSize = [2]int{96, 96}
	cfg.ShardTargetMB = 0.25 // about four samples per shard: several shards
	cfg.Thresholds = validate.Thresholds{}
	cfg.OutputRoot = outRoot
	cfg.Workers = 2
	if mutate != nil {
		mutate(&cfg)
	}
	res, err := pipeline.Build(context.Background(), pipeline.Options{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	m, err := warehouse.ReadManifest(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return res.Dir, m
}

// readSamplesJSONL decodes samples.jsonl with the pipeline's own type.
func readSamplesJSONL(t *testing.T, dir string) []records.SampleLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, warehouse.SamplesName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []records.SampleLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r records.SampleLine
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// parquetRows reads a Parquet file with arrow-go's reader and returns its
// rows as JSON objects (numbers kept as json.Number) and its schema as
// printed by the parquet package.
func parquetRows(t *testing.T, path string) (rows []map[string]any, schemaText string) {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	var sb strings.Builder
	schema.PrintSchema(rdr.MetaData().Schema.Root(), &sb, 2)
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 1 << 12}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1<<12)
	defer tr.Release()
	var buf bytes.Buffer
	for tr.Next() {
		if err := array.RecordToJSON(tr.RecordBatch(), &buf); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	for dec.More() {
		var row map[string]any
		if err := dec.Decode(&row); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	return rows, sb.String()
}

// copyDir copies a version directory so a test can damage the copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// hiddenFiles lists names starting with "." in dir: temporary files a
// failed export must not leave behind.
func hiddenFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
