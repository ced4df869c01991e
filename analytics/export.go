package analytics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"warehouse-etl/warehouse"
)

// ExportOptions configure Export.
type ExportOptions struct {
	Logger *slog.Logger // nil discards
	// BeforePublish says the export runs inside a build, before the version
	// is published: the build report has no publish or total time yet, so
	// build.parquet leaves those phases out.
	BeforePublish bool
}

// ExportResult describes the files Export wrote.
type ExportResult struct {
	Files      warehouse.ParquetFiles // names inside the version directory
	SampleRows int64
	RunRows    int64
}

// Export writes samples.parquet, runs.parquet and build.parquet into the
// version directory dir, whose manifest is m (already read and checked by
// the caller, or not yet written when a build calls it). All three are
// written and fsynced under temporary names first and renamed into place
// only when all succeeded, so bad input replaces nothing and a reader never
// sees a half-written file.
func Export(ctx context.Context, dir string, m *warehouse.Manifest, opts ExportOptions) (*ExportResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		return nil, errors.New("analytics: no manifest")
	}
	start := time.Now()
	report, err := readBuildReport(dir, m)
	if err != nil {
		return nil, err
	}
	samples, err := writeSamples(ctx, dir, m)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", warehouse.SamplesParquetName, err)
	}
	defer samples.abort()
	runs, err := writeRuns(dir, m)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", warehouse.RunsParquetName, err)
	}
	defer runs.abort()
	build, err := writeBuild(dir, m, report, opts.BeforePublish)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", warehouse.BuildParquetName, err)
	}
	defer build.abort()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, f := range []*parquetFile{samples, runs, build} {
		if err := f.publish(); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	res := &ExportResult{
		Files: warehouse.ParquetFiles{
			Samples: warehouse.SamplesParquetName, Runs: warehouse.RunsParquetName, Build: warehouse.BuildParquetName,
		},
		SampleRows: samples.rows,
		RunRows:    runs.rows,
	}
	log.Info("parquet exported", "dir", dir, "sample_rows", res.SampleRows, "run_rows", res.RunRows,
		"seconds", time.Since(start).Seconds())
	return res, nil
}
