// Package analytics exports a warehouse version's summaries to Parquet for
// DuckDB, Polars and friends, and compares two versions for drift.
//
// # Export
//
// Export writes three files into a version directory (docs/format/parquet.md
// is the column-by-column contract):
//
//	samples.parquet  one row per input sample, kept or not (samples.jsonl
//	                 joined with the boxes and meta records of the shards)
//	runs.parquet     one row per run or episode and one total row (the
//	                 manifest's summary)
//	build.parquet    one row per build: phases, throughput, host (the build
//	                 report)
//
// The manifest, samples.jsonl and the shards are the source of truth; the
// Parquet files are derived and can be rewritten at any time. Each file is
// written to a temporary name beside its final one, fsynced and renamed, so
// a reader sees the old file or the new one, never half of one.
//
// Rows are streamed: samples.jsonl is read line by line (decoded in one
// goroutine, joined and encoded in another), shards are memory mapped one
// at a time, and every batch of batchRows rows becomes one Parquet row group
// as soon as it is full, so memory does not grow with the dataset.
//
// Only int64, float32, float64, string, list and struct columns are written:
// every engine reads them (Polars, for one, cannot read FLOAT16, and some
// readers mishandle unsigned or narrow integers). Flags are int64 0/1 for
// the same reason, which also lets SUM and AVG count them.
//
// samples.parquet and runs.parquet are a pure function of the version's
// files (byte-identical on every export); build.parquet carries timings.
//
// # Diff
//
// Compare reads two versions' manifests and shards (not the Parquet files,
// so it works on any version) and reports sample counts, reason counts,
// per-class box counts, box size distributions, image statistics and
// changed config keys, each with the measure a drift limit applies to.
package analytics

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks input files that are malformed or disagree with each
// other (samples.jsonl against the manifest or the shards, a build report of
// another version). The message names the file and what is wrong.
var ErrCorrupt = errors.New("analytics: input corrupt")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
