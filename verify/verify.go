// Package verify checks a published warehouse version against its
// manifest and reports what it finds as typed findings (as restic's checker
// does): the manifest against its digest, the manifest itself, the
// recorded thresholds, every file files.checksums lists and every shard,
// and with Options.Full every value.
package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"warehouse-etl/internal/progress"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// FindingKind classifies what Run found wrong.
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
	// FindingUnreadable: reading the shard (or the file) failed with an
	// I/O error.
	FindingUnreadable FindingKind = "unreadable"
	// FindingManifestDigest: manifest.json.sha256 disagrees with
	// manifest.json (either may be damaged; File is manifest.json), is
	// malformed or unreadable (File is manifest.json.sha256), or is
	// missing beside a manifest that records file checksums. A mismatch
	// is checked first and stops the verification: nothing in the
	// manifest can be trusted.
	FindingManifestDigest FindingKind = "manifest_digest"
	// FindingFileMissing: a file files.checksums lists does not exist (or
	// is reached through a symlink that leaves the version directory).
	FindingFileMissing FindingKind = "file_missing"
	// FindingFileSize: the file is not the size files.checksums records,
	// or is not a regular file.
	FindingFileSize FindingKind = "file_size"
	// FindingFileChecksum: the file's sha256 differs from the one
	// files.checksums records (quick verification re-hashes every listed
	// file but the Zarr store's chunk files; Full re-hashes those too).
	FindingFileChecksum FindingKind = "file_checksum"
	// FindingSampleChecksum (--full): a sample's bytes disagree with its
	// CRC-32C in the shard's checksum table: names the damaged sample.
	FindingSampleChecksum FindingKind = "sample_checksum"
)

// Finding is one problem Run found. Shard is the shard's path relative
// to the version directory, for findings about a shard; File is the path,
// relative to the version directory, of any other file a finding is about
// (manifest_digest, file_*, unreadable); both are "" for thresholds and
// for kind manifest, whose detail names manifest.json. Sample is the
// global sample index, or -1 when the finding is not about one sample.
type Finding struct {
	Kind   FindingKind `json:"kind"`
	Shard  string      `json:"shard,omitempty"`
	File   string      `json:"file,omitempty"`
	Sample int         `json:"sample"`
	Detail string      `json:"detail"`
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Shard != "" {
		b.WriteString(" " + f.Shard)
	}
	if f.File != "" {
		b.WriteString(" " + f.File)
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

// Options configure Run and Check.
type Options struct {
	// Full re-hashes every shard and every file of the Zarr store and
	// reads every value: finite images, boxes, masks and extras; masks,
	// boxes and class indices consistent. Without it Run checks the
	// manifest against its digest, the manifest itself, the thresholds,
	// every other file's size and sha256 (files.checksums; the Zarr store's
	// chunk files by size only) and every shard's presence, size and
	// header, reading a few bytes per shard.
	Full bool
	// Workers is how many shards and files are checked at once; 0 means
	// GOMAXPROCS.
	Workers int
	// Logger receives one line per shard checked. nil discards.
	Logger *slog.Logger
	// Progress receives the bytes Run reads in whole (every file it
	// hashes; with Full, every shard too): their sum once the manifest is
	// read, then each file's and shard's bytes as it is checked. nil
	// reports nothing.
	Progress progress.Counter
}

// maxSampleFindings bounds the per-sample findings of one kind reported for
// one shard; the rest are counted in one more finding.
const maxSampleFindings = 10

// Result is what Run found.
type Result struct {
	// Findings are the problems, in the order the checks run: manifest
	// digest, manifest, thresholds, files.checksums entries (sorted by
	// path), shards in manifest order. Any finding means: do not train on
	// this version.
	Findings []Finding
	// Notes say what could not be checked and why, without being a
	// problem: a version published before manifests recorded the
	// checksums of their other files.
	Notes []string
}

// NoteUncovered is the note for a version whose manifest records no
// checksums of its other files (built before they were recorded).
const NoteUncovered = "side files not covered: this version's manifest predates files.checksums and manifest.json.sha256; " +
	"only the manifest's consistency and the shards were checked (rebuild with WAREHOUSE_CLEAR=1 to cover every file)"

// Check checks the warehouse version at path (a version directory or a
// root with a "latest" pointer) and returns everything it found wrong, in
// the order of Result.Findings, or nil. The error is for what
// prevents checking at all: path is not a warehouse, or ctx ended.
func Check(ctx context.Context, path string, opts Options) ([]Finding, error) {
	r, err := Run(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return r.Findings, nil
}

// Run is Check with the notes on what could not be checked.
func Run(ctx context.Context, path string, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := warehouse.ResolveDir(path)
	if err != nil {
		return nil, err
	}
	// Everything is read through the pinned directory, as a Reader reads:
	// a forced rebuild or gc running meanwhile leaves it whole until Run
	// returns, and nothing of the version that takes its name is read.
	pin, err := warehouse.PinVersion(dir)
	if err != nil {
		return nil, err
	}
	defer pin.Close()
	res := &Result{}
	stop := func(f Finding) (*Result, error) {
		res.Findings = append(res.Findings, f)
		return res, nil
	}
	raw, err := pin.ReadManifestBytes()
	if err != nil {
		return stop(Finding{Kind: FindingManifest, Sample: -1, Detail: err.Error()})
	}
	// The digest first: a manifest that disagrees with it is damaged, and
	// nothing it says (shard sizes, checksums) can be trusted.
	sealed, p := pin.CheckManifestDigest(raw)
	if p != nil {
		return stop(Finding{Kind: FindingManifestDigest, File: p.File, Sample: -1, Detail: p.Error()})
	}
	m, err := warehouse.ParseManifest(raw)
	if err != nil {
		return stop(Finding{Kind: FindingManifest, Sample: -1, Detail: fmt.Sprintf("%s: %v", filepath.Join(dir, warehouse.ManifestName), err)})
	}
	if p := warehouse.MissingDigest(dir, m, sealed); p != nil {
		// The manifest itself is consistent: go on and check the rest.
		res.Findings = append(res.Findings, Finding{Kind: FindingManifestDigest, File: p.File, Sample: -1, Detail: p.Error()})
	}
	if m.Files.Checksums == nil {
		res.Notes = append(res.Notes, NoteUncovered)
	}
	layout, err := warehouse.ManifestLayout(m)
	if err == nil {
		err = warehouse.CheckShardEntries(m, layout)
	}
	if err != nil {
		return stop(Finding{Kind: FindingManifest, Sample: -1, Detail: warehouse.ManifestError(dir, err).Error()})
	}
	failed, _ := m.Thresholds.Check(m.Summary.Total)
	for _, f := range failed {
		res.Findings = append(res.Findings, Finding{Kind: FindingThreshold, Sample: -1, Detail: f.String()})
	}
	root := pin.Root()

	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	files := slices.Sorted(maps.Keys(m.Files.Checksums))
	perFile := make([]*Finding, len(files))
	perShard := make([][]Finding, len(m.Shards))
	hashed := func(name string) bool { return opts.Full || !warehouse.IsBulkFile(name) }
	var total int64
	for _, name := range files {
		if hashed(name) {
			total += m.Files.Checksums[name].Bytes
		}
	}
	if opts.Full {
		for _, sh := range m.Shards {
			total += sh.Bytes
		}
	}
	progress.Add(opts.Progress, total, 0)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for k, name := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			perFile[k] = verifyFile(gctx, root, dir, name, m.Files.Checksums[name], hashed(name))
			if hashed(name) {
				progress.Add(opts.Progress, 0, m.Files.Checksums[name].Bytes)
			}
			return gctx.Err()
		})
	}
	for k := range m.Shards {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			v := shardVerifier{dir: dir, root: root, m: m, entry: &m.Shards[k], layout: layout, full: opts.Full, ctx: gctx}
			perShard[k] = v.run()
			if opts.Full {
				progress.Add(opts.Progress, 0, v.entry.Bytes)
			}
			log.Info("shard verified", "shard", v.entry.ID, "findings", len(perShard[k]), "full", opts.Full)
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, f := range perFile {
		if f != nil {
			res.Findings = append(res.Findings, *f)
		}
	}
	for _, fs := range perShard {
		res.Findings = append(res.Findings, fs...)
	}
	log.Info("files verified", "files", len(files), "shards", len(m.Shards), "findings", len(res.Findings), "full", opts.Full)
	return res, nil
}

// verifyFile checks one files.checksums entry: present inside the version
// directory, a regular file of the recorded size, and, when hash is set,
// of the recorded sha256. It returns the finding, or nil.
func verifyFile(ctx context.Context, root *os.Root, dir, name string, want warehouse.FileChecksum, hash bool) *Finding {
	path := filepath.Join(dir, filepath.FromSlash(name))
	finding := func(kind FindingKind, format string, args ...any) *Finding {
		return &Finding{Kind: kind, File: name, Sample: -1, Detail: fmt.Sprintf(format, args...)}
	}
	fi, err := root.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return finding(FindingFileMissing, "%s: missing: the manifest lists it in files.checksums", path)
	case err != nil:
		return finding(FindingFileMissing, "%s: %v", path, err)
	case !fi.Mode().IsRegular():
		return finding(FindingFileSize, "%s: not a regular file", path)
	case fi.Size() != want.Bytes:
		return finding(FindingFileSize, "%s: %d bytes, the manifest says %d", path, fi.Size(), want.Bytes)
	case !hash:
		return nil
	}
	f, err := root.Open(name)
	if err != nil {
		return finding(FindingUnreadable, "%s: %v", path, err)
	}
	defer f.Close()
	got, err := warehouse.ReaderSHA256(ctx, f)
	switch {
	case err != nil && ctx.Err() == nil:
		return finding(FindingUnreadable, "%s: read: %v", path, err)
	case err != nil:
		return nil // cancelled: the caller returns ctx's error
	case got.Bytes != want.Bytes:
		return finding(FindingFileSize, "%s: read %d bytes, the manifest says %d", path, got.Bytes, want.Bytes)
	case got.SHA256 != want.SHA256:
		return finding(FindingFileChecksum, "%s: sha256 %s, the manifest says %s", path, got.SHA256, want.SHA256)
	}
	return nil
}

// shardVerifier checks one shard.
type shardVerifier struct {
	dir      string
	root     *os.Root
	m        *warehouse.Manifest
	entry    *warehouse.Shard
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
	if err := warehouse.StatShard(v.root, path, v.entry); err != nil {
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
	sr, err := v.openShard(path)
	if err != nil {
		kind := FindingShardCorrupt
		if !errors.Is(err, shard.ErrCorrupt) {
			kind = FindingUnreadable
		}
		v.add(kind, -1, "%v", err)
		return v.findings
	}
	defer sr.Close()
	if err := warehouse.CheckShardHeader(sr, v.entry, v.layout); err != nil {
		v.add(FindingShardMismatch, -1, "%s: %v", path, err)
		return v.findings
	}
	if v.full {
		v.content(sr)
	}
	return v.findings
}

// openShard maps the shard through the version directory's root (the
// pinned directory, not whatever holds its name now); errors name path.
func (v *shardVerifier) openShard(path string) (*shard.Reader, error) {
	f, err := v.root.Open(v.entry.RelativePath)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		pe.Path = path
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A descriptor of its own under the shard's full name: shard.OpenFile
	// names its errors after the file, and the mapping outlives both.
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	named := os.NewFile(uintptr(fd), path)
	defer named.Close()
	return shard.OpenFile(named)
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
	got, err := warehouse.ReaderSHA256(v.ctx, f)
	switch {
	case err != nil && v.ctx.Err() == nil:
		v.add(FindingUnreadable, -1, "read: %v", err)
	case err == nil && got.SHA256 != v.entry.ChecksumSHA256:
		v.add(FindingChecksum, -1, "sha256 %s, the manifest says %s", got.SHA256, v.entry.ChecksumSHA256)
	}
}

// content reads every value of the shard.
func (v *shardVerifier) content(sr *shard.Reader) {
	if err := sr.Check(); err != nil {
		v.add(FindingContent, -1, "%v", err)
	}
	first := int(v.entry.FirstSample)
	classes, sources := len(v.m.Classes), len(v.m.Sources)
	var nonFinite, badClass, badCRC int
	for i := range sr.Len() {
		if i%64 == 0 && v.ctx.Err() != nil {
			return
		}
		if err := sr.VerifySample(i, nil); err != nil {
			if badCRC < maxSampleFindings {
				v.add(FindingSampleChecksum, first+i, "%v", err)
			}
			badCRC++
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
	if badCRC > maxSampleFindings {
		v.add(FindingSampleChecksum, -1, "%d more samples whose bytes disagree with their CRC-32C", badCRC-maxSampleFindings)
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
