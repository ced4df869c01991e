package analytics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/warehouse"
)

// ExportOptions configure Export.
type ExportOptions struct {
	Logger *slog.Logger // nil discards
	// SkipBuild leaves build.parquet out and build_report.json unread: a
	// build exports before its report is final and then writes
	// build.parquet from the report it holds (ExportBuildReport).
	SkipBuild bool
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
// sees a half-written file. When m records the files' sha256
// (files.checksums: every version built since), they are replaced only by
// identical bytes; an export that would change them fails with ErrSealed.
func Export(ctx context.Context, dir string, m *warehouse.Manifest, opts ExportOptions) (*ExportResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		return nil, errors.New("analytics: no manifest")
	}
	start := time.Now()
	var report *records.BuildReport
	if !opts.SkipBuild {
		raw, err := readBuildReport(dir, m)
		if err != nil {
			return nil, err
		}
		if report, err = decodeBuildReport(dir, m, raw); err != nil {
			return nil, err
		}
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
	files := []*parquetFile{samples, runs}
	if report != nil {
		build, err := writeBuild(dir, m, report)
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", warehouse.BuildParquetName, err)
		}
		defer build.abort()
		files = append(files, build)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sums := m.Files.Checksums; sums != nil {
		// The version's manifest records the sha256 of its exports: a
		// different file would make verify refuse the version, so only
		// identical files replace them.
		for _, f := range files {
			if err := f.matches(ctx, sums); err != nil {
				return nil, fmt.Errorf("export: %w", err)
			}
		}
	}
	for _, f := range files {
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

// ExportBuild rewrites build.parquet alone from the version's build report,
// with every phase the report has. The file is replaced atomically, as
// Export does.
func ExportBuild(ctx context.Context, dir string, m *warehouse.Manifest) error {
	if m == nil {
		return errors.New("analytics: no manifest")
	}
	raw, err := readBuildReport(dir, m)
	if err != nil {
		return err
	}
	return ExportBuildReport(ctx, dir, m, raw)
}

// ExportBuildReport writes build.parquet from report, the bytes of the
// version's build_report.json as the caller holds them: a build calls it
// with its final report, written once, before the manifest records the
// file's sha256.
func ExportBuildReport(ctx context.Context, dir string, m *warehouse.Manifest, report []byte) error {
	if m == nil {
		return errors.New("analytics: no manifest")
	}
	r, err := decodeBuildReport(dir, m, report)
	if err != nil {
		return err
	}
	build, err := writeBuild(dir, m, r)
	if err != nil {
		return fmt.Errorf("export %s: %w", warehouse.BuildParquetName, err)
	}
	defer build.abort()
	if err := ctx.Err(); err != nil {
		return err
	}
	if sums := m.Files.Checksums; sums != nil {
		if err := build.matches(ctx, sums); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return build.publish()
}

// ErrSealed marks an export that would replace a file the version's
// manifest records (files.checksums) with different bytes.
var ErrSealed = errors.New("the version's manifest records the sha256 of this file")

// matches checks the finished temporary file against the entry sums holds
// for its name, if any.
func (p *parquetFile) matches(ctx context.Context, sums map[string]warehouse.FileChecksum) error {
	name := filepath.Base(p.final)
	want, ok := sums[name]
	if !ok {
		return nil
	}
	got, err := warehouse.FileSHA256(ctx, p.tmp)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s: %w and the export would change it (%d bytes, sha256 %s; recorded %d bytes, sha256 %s): "+
			"the export code changed since the version was built, or a file it is derived from is damaged (run verify); "+
			"nothing was replaced; rebuild the version with WAREHOUSE_CLEAR=1 to refresh its exports",
			p.final, ErrSealed, got.Bytes, got.SHA256, want.Bytes, want.SHA256)
	}
	return nil
}
