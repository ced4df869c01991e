package warehouse

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
)

// FindingKind classifies what Verify found wrong.
type FindingKind string

const (
	// FindingManifest: manifest.json is unreadable, of an unknown format
	// version, malformed, inconsistent, or has a path that leaves the
	// version directory. Nothing else is checked after it.
	FindingManifest FindingKind = "manifest"
	// FindingThreshold: the recorded summary exceeds a recorded limit with
	// action fail (Open would refuse the warehouse).
	FindingThreshold FindingKind = "threshold"
	// FindingShardMissing: a shard the manifest lists does not exist (or
	// is reached through a symlink that leaves the version directory).
	FindingShardMissing FindingKind = "shard_missing"
	// FindingShardSize: the shard file is not the size the manifest
	// records, or is not a regular file.
	FindingShardSize FindingKind = "shard_size"
	// FindingShardCorrupt: the shard's structure is invalid (docs/format/
	// shard.md, Validation): bad magic, version, dtype tag, offsets, ...
	FindingShardCorrupt FindingKind = "shard_corrupt"
	// FindingShardMismatch: a valid shard whose header disagrees with its
	// manifest entry (sample count, layout, dtype).
	FindingShardMismatch FindingKind = "shard_mismatch"
	// FindingChecksum: the shard's sha256 differs from the manifest's
	// (Full only).
	FindingChecksum FindingKind = "checksum"
	// FindingNonFinite: an image, box, mask or extra value is NaN or
	// infinite (Full only).
	FindingNonFinite FindingKind = "nonfinite"
	// FindingContent: masks, boxes and class indices disagree (mask not
	// 0/1 with ones first, box_count, boxes outside [0,1], padding not
	// zero, a class index outside the class table, a source index outside
	// the sources table) (Full only).
	FindingContent FindingKind = "content"
	// FindingUnreadable: reading the shard failed with an I/O error.
	FindingUnreadable FindingKind = "unreadable"
)

// Finding is one problem Verify found. Shard is the shard's path relative
// to the version directory ("" for the manifest and thresholds); Sample is
// the global sample index, or -1 when the finding is not about one sample.
type Finding struct {
	Kind   FindingKind `json:"kind"`
	Shard  string      `json:"shard,omitempty"`
	Sample int         `json:"sample"`
	Detail string      `json:"detail"`
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Shard != "" {
		b.WriteString(" " + f.Shard)
	}
	if f.Sample >= 0 {
		fmt.Fprintf(&b, " sample %d", f.Sample)
	}
	b.WriteString(": " + f.Detail)
	return b.String()
}

// FindingsError reports a warehouse that failed verification; commands
// that refuse such a warehouse (verify, export) return it.
type FindingsError struct {
	Dir      string
	Findings []Finding
}

func (e *FindingsError) Error() string {
	if len(e.Findings) == 0 {
		return e.Dir + ": verification failed"
	}
	return fmt.Sprintf("%s: %d verification finding(s), the first: %s", e.Dir, len(e.Findings), e.Findings[0])
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Full re-hashes every shard and reads every value: finite images,
	// boxes, masks and extras; masks, boxes and class indices consistent.
	// Without it Verify checks the manifest, the thresholds and every
	// shard's presence, size and header, reading a few bytes per shard.
	Full bool
	// Workers is how many shards are checked at once; 0 means GOMAXPROCS.
	Workers int
	// Logger receives one line per shard checked. nil discards.
	Logger *slog.Logger
}

// maxSampleFindings bounds the per-sample findings of one kind reported for
// one shard; the rest are counted in one more finding.
const maxSampleFindings = 10

// Verify checks the warehouse version at path (a version directory or a
// root with a "latest" pointer) and returns everything it found wrong, in
// manifest order, or nil. The error is for what prevents checking at all:
// path is not a warehouse, or ctx ended.
func Verify(ctx context.Context, path string, opts VerifyOptions) ([]Finding, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := ResolveDir(path)
	if err != nil {
		return nil, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return []Finding{{Kind: FindingManifest, Sample: -1, Detail: err.Error()}}, nil
	}
	layout, err := manifestLayout(m)
	if err != nil {
		return []Finding{{Kind: FindingManifest, Sample: -1, Detail: manifestError(dir, err).Error()}}, nil
	}
	var findings []Finding
	for _, f := range m.Thresholds.Evaluate(m.Summary.Total) {
		if f.Action != validate.ActionWarn {
			findings = append(findings, Finding{Kind: FindingThreshold, Sample: -1, Detail: f.String()})
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()

	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	perShard := make([][]Finding, len(m.Shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for k := range m.Shards {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			v := shardVerifier{dir: dir, root: root, m: m, entry: &m.Shards[k], layout: layout, full: opts.Full, ctx: gctx}
			perShard[k] = v.run()
			log.Info("shard verified", "shard", v.entry.ID, "findings", len(perShard[k]), "full", opts.Full)
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, fs := range perShard {
		findings = append(findings, fs...)
	}
	return findings, nil
}

// shardVerifier checks one shard.
type shardVerifier struct {
	dir      string
	root     *os.Root
	m        *Manifest
	entry    *Shard
	layout   shard.Layout
	full     bool
	ctx      context.Context
	findings []Finding
}

func (v *shardVerifier) add(kind FindingKind, sample int, format string, args ...any) {
	v.findings = append(v.findings, Finding{Kind: kind, Shard: v.entry.RelativePath, Sample: sample, Detail: fmt.Sprintf(format, args...)})
}

func (v *shardVerifier) run() []Finding {
	path := filepath.Join(v.dir, filepath.FromSlash(v.entry.RelativePath))
	if err := statShard(v.root, path, v.entry); err != nil {
		kind := FindingShardSize
		if _, statErr := v.root.Stat(v.entry.RelativePath); statErr != nil {
			kind = FindingShardMissing
		}
		v.add(kind, -1, "%v", err)
		return v.findings
	}
	if v.full {
		v.checksum()
	}
	sr, err := shard.Open(path)
	if err != nil {
		kind := FindingShardCorrupt
		if !errors.Is(err, shard.ErrCorrupt) {
			kind = FindingUnreadable
		}
		v.add(kind, -1, "%v", err)
		return v.findings
	}
	defer sr.Close()
	if err := checkShardHeader(sr, v.entry, v.layout); err != nil {
		v.add(FindingShardMismatch, -1, "%s: %v", path, err)
		return v.findings
	}
	if v.full {
		v.content(sr)
	}
	return v.findings
}

// checksum re-hashes the whole file. It reads through the version
// directory's root, like the stat before it.
func (v *shardVerifier) checksum() {
	f, err := v.root.Open(v.entry.RelativePath)
	if err != nil {
		v.add(FindingUnreadable, -1, "%v", err)
		return
	}
	defer f.Close()
	got, err := readerSHA256(v.ctx, f)
	switch {
	case err != nil && v.ctx.Err() == nil:
		v.add(FindingUnreadable, -1, "read: %v", err)
	case err == nil && got != v.entry.ChecksumSHA256:
		v.add(FindingChecksum, -1, "sha256 %s, the manifest says %s", got, v.entry.ChecksumSHA256)
	}
}

// readerSHA256 is the hex sha256 of everything r yields, stopping early
// when ctx ends.
func readerSHA256(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, r}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops a long read when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// content reads every value of the shard.
func (v *shardVerifier) content(sr *shard.Reader) {
	if err := sr.Check(); err != nil {
		v.add(FindingContent, -1, "%v", err)
	}
	first := int(v.entry.FirstSample)
	classes, sources := len(v.m.Classes), len(v.m.Sources)
	var nonFinite, badClass int
	for i := range sr.Len() {
		if i%64 == 0 && v.ctx.Err() != nil {
			return
		}
		if where := firstNonFinite(sr, i); where != "" {
			if nonFinite < maxSampleFindings {
				v.add(FindingNonFinite, first+i, "%s", where)
			}
			nonFinite++
		}
		problem := ""
		for j, c := range sr.ClassIndex(i) {
			if int(c) >= classes {
				problem = fmt.Sprintf("class_index[%d] is %d, the class table has %d classes", j, c, classes)
				break
			}
		}
		if meta := sr.Meta(i); problem == "" && sources > 0 && int(meta.SourceIndex) >= sources {
			problem = fmt.Sprintf("source_index %d, the sources table has %d entries", meta.SourceIndex, sources)
		}
		if problem != "" {
			if badClass < maxSampleFindings {
				v.add(FindingContent, first+i, "%s", problem)
			}
			badClass++
		}
	}
	if nonFinite > maxSampleFindings {
		v.add(FindingNonFinite, -1, "%d more samples with non-finite values", nonFinite-maxSampleFindings)
	}
	if badClass > maxSampleFindings {
		v.add(FindingContent, -1, "%d more samples with out-of-range class or source indices", badClass-maxSampleFindings)
	}
}

// firstNonFinite describes the first NaN or infinity in sample i's image,
// boxes, mask or extras, or returns "".
func firstNonFinite(sr *shard.Reader, i int) string {
	d := sr.Layout().DType
	for _, sec := range []struct {
		name string
		raw  []byte
		d    shard.DType
	}{
		{"image", sr.Image(i), d}, // U8: every value is a pixel, nonFiniteAt finds none
		{"boxes", sr.BoxesRaw(i), d.BoxDType()},
		{"mask", sr.MaskRaw(i), d.BoxDType()},
	} {
		if at := nonFiniteAt(sec.raw, sec.d); at >= 0 {
			return fmt.Sprintf("%s element %d is not finite", sec.name, at)
		}
	}
	for at, x := range sr.Extras(i) {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprintf("extras element %d is %v", at, x)
		}
	}
	return ""
}

// nonFiniteAt returns the index of the first element of raw (little-endian
// dtype d) whose exponent bits are all ones (NaN or infinity), or -1. It
// looks at bits only, so it is exact and fast for both dtypes.
func nonFiniteAt(raw []byte, d shard.DType) int {
	switch d {
	case shard.F16:
		for k := 0; k+1 < len(raw); k += 2 {
			if binary.LittleEndian.Uint16(raw[k:])&0x7C00 == 0x7C00 {
				return k / 2
			}
		}
	case shard.F32:
		for k := 0; k+3 < len(raw); k += 4 {
			if binary.LittleEndian.Uint32(raw[k:])&0x7F800000 == 0x7F800000 {
				return k / 4
			}
		}
	}
	return -1
}
