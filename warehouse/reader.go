package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"warehouse-etl/internal/lockfile"
	"warehouse-etl/shard"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
)

// OpenOptions configure Open. The zero value is what training wants: the
// recorded thresholds are enforced and nothing is logged.
type OpenOptions struct {
	// Logger receives one line per shard load (open, mmap, first touch)
	// and the warnings of thresholds with action warn. nil discards.
	Logger *slog.Logger
	// Thresholds, when not nil, replace the thresholds recorded in the
	// manifest: a training job may demand stricter limits than the build
	// enforced.
	Thresholds *validate.Thresholds
	// IgnoreThresholds opens the warehouse even when its summary exceeds
	// a limit with action fail; those findings are logged as warnings.
	IgnoreThresholds bool
	// VerifyChecksums re-hashes each shard (sha256) when it is first
	// mapped and refuses it on a mismatch. It costs one sequential read of
	// every shard, which also warms the page cache; without it a flipped
	// data byte in a shard without per-sample checksums is only found by
	// Verify with Full.
	VerifyChecksums bool
	// SkipSampleChecksums hands samples out without checking them against
	// their shard's per-sample CRC-32C. By default Sample and the batch
	// paths check each sample the first time this Reader hands it out and
	// refuse one whose bytes changed since the build; this is for
	// benchmarks that measure the reads alone.
	SkipSampleChecksums bool
	// RecheckSamples checks a sample's CRC-32C every time it is handed
	// out, not only the first time. By default a sample that passed is
	// remembered (one bit per sample) and later reads of it, which come
	// from the same immutable file and usually the same page-cache pages,
	// skip the CRC: every epoch after the first runs at unchecked speed.
	// Checking every read gives 0.7x the unchecked read speed where reads
	// are CPU-bound (docs/format/shard.md, "Checking samples when
	// reading"; README, "Training read speed").
	RecheckSamples bool
}

// Reader is an open warehouse version: the manifest, checked, and its
// shards, mapped on first use. It is safe for concurrent use by multiple
// goroutines, except Close, which must come after every other call has
// returned and after the last use of any view a Sample handed out.
type Reader struct {
	dir      string
	manifest *Manifest
	layout   shard.Layout
	starts   []int // first sample of each shard, then the total
	shards   []lazyShard
	log      *slog.Logger
	checksum bool // OpenOptions.VerifyChecksums
	// verifySamples checks each sample handed out against its shard's
	// CRC-32C (not OpenOptions.SkipSampleChecksums), on its first read or,
	// with recheckSamples, on every read.
	verifySamples  bool
	recheckSamples bool
	verified       atomic.Int64 // CRC-32C checks that passed
	opened         time.Time
	loads          loadRecorder
	samples        atomic.Int64   // samples handed out by Sample, ReadSampleInto and ReadRunInto
	cold           atomic.Int64   // of ReadRunInto's, those read (in part) from disk, or not known to be cached
	advice         adviceMemory   // read-ahead: counts when the last batch iterator started (readahead.go)
	pool           batchPool      // batch buffers kept from one Batches iterator to the next
	readersLock    *lockfile.Lock // shared lock that keeps gc away, nil when it could not be taken
	pin            *pinnedDir     // the version directory, held until Close (nil in FuzzOpen)
	files          versionFiles   // where shards are opened
}

// lazyShard maps its file on first use. The fast path is one atomic load;
// the mutex serialises the first open, whose outcome (reader or error) is
// kept for good. The file stays open beside the mapping: batches read images
// from it with pread (ReadRunInto), Sample views come from the mapping.
type lazyShard struct {
	entry  *Shard
	path   string
	mu     sync.Mutex
	reader atomic.Pointer[shard.Reader]
	file   shardFile // set with reader, closed by Close
	err    error
	// verified has one bit per sample of the shard, set when the sample
	// passed its CRC-32C check; allocated before reader is stored.
	verified []atomic.Uint64
}

// isVerified reports whether sample local passed its check already.
func (s *lazyShard) isVerified(local int) bool {
	return s.verified[local/64].Load()&(1<<(local%64)) != 0
}

// allVerified reports whether samples [local, local+n) all passed.
func (s *lazyShard) allVerified(local, n int) bool {
	for i := local; i < local+n; i++ {
		if !s.isVerified(i) {
			return false
		}
	}
	return true
}

// markVerified records that sample local passed its check, and reports
// whether this call was the first to: two batch workers may check the same
// sample at once (a padded batch, overlapping runs), and it counts once.
func (s *lazyShard) markVerified(local int) (first bool) {
	bit := uint64(1) << (local % 64)
	return s.verified[local/64].Or(bit)&bit == 0
}

// Open opens the warehouse version at path: a version directory, or an
// output root whose "latest" pointer names one. It checks, before mapping
// anything, the manifest (format version, schema, consistency, paths), the
// validation thresholds against the recorded summary, that every shard
// entry agrees with the manifest's layout, and that every shard file is
// present, a regular file inside the version directory, and exactly the
// size the manifest records. Shards are mapped lazily, on the first Sample
// that needs them, and their headers checked against the manifest then.
//
// Errors name the file at fault. A summary that exceeds a limit with
// action fail gives a *validate.ThresholdError unless opts.IgnoreThresholds.
func Open(path string, opts OpenOptions) (*Reader, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	dir, err := ResolveDir(path)
	if err != nil {
		return nil, err
	}
	// The shared readers lock keeps gc away from this version until Close.
	lock, err := LockForReading(dir)
	if err != nil {
		return nil, err
	}
	if lock == nil {
		log.Warn("no readers lock (the output root is not writable and has no lock file): gc cannot see this reader", "dir", dir)
	}
	opened := false
	defer func() {
		if !opened {
			lock.Release()
		}
	}()
	// Everything is read through the pinned directory: the version this
	// Reader opened, whatever takes its name later (pinnedDir).
	pin, err := pinVersion(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !opened {
			pin.close()
		}
	}()
	m, err := readManifestIn(dir, pin.open)
	if err != nil {
		return nil, err
	}
	r, err := newReader(dir, m, opts, log, dirFiles{pin: pin})
	if err != nil {
		return nil, err
	}
	r.opened, r.readersLock, r.pin = start, lock, pin
	opened = true
	checked, _ := r.SampleChecksums()
	log.Info("warehouse opened", "dir", dir, "version", m.Version, "samples", m.Samples, "shards", len(m.Shards),
		"dtype", m.DefaultDType, "shards_with_sample_checksums", checked, "verify_samples", r.verifySamples,
		"recheck_samples", r.recheckSamples, "seconds", time.Since(start).Seconds())
	return r, nil
}

// versionFiles are the shard files of one version as a Reader reads them:
// dirFiles, the version directory, for Open; bytes in memory for FuzzOpen
// (fuzz_test.go), so that the fuzz target runs Open's checks, the shard
// header checks and every sample read on hostile bytes through this same
// code without a file system in each execution.
type versionFiles interface {
	// stat checks that e's file exists, is a regular file and has the
	// size e records (checkShardInfo). path names it in errors.
	stat(path string, e *Shard) error
	// checkSHA256 compares the sha256 of e's file with e's.
	checkSHA256(path string, e *Shard) error
	// open opens e's file for reading and validates it as a shard.
	open(path string, e *Shard) (shardFile, *shard.Reader, error)
}

// shardFile is an open shard file: batches read images from it with
// ReadAt (ReadRunInto).
type shardFile interface {
	io.ReaderAt
	io.Closer
}

// dirFiles reads shards from the version directory pinned at Open: every
// file is opened relative to it (os.Root: no path or symlink leaves it),
// so a Reader never reads a shard of a version that replaced its own.
type dirFiles struct{ pin *pinnedDir }

func (d dirFiles) stat(path string, e *Shard) error { return StatShard(d.pin.root, path, e) }

// StatShard checks the file of shard entry e in the version directory
// root (an os.Root, which refuses a path or symlink that leaves it): it
// exists, is a regular file and has the recorded size. path names it in
// errors.
func StatShard(root *os.Root, path string, e *Shard) error {
	fi, err := root.Stat(e.RelativePath)
	return checkShardInfo(path, e, fi, err)
}

func (d dirFiles) checkSHA256(path string, e *Shard) error {
	f, err := d.pin.open(e.RelativePath)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkSHA256(f, path, e.ChecksumSHA256)
}

func (d dirFiles) open(path string, e *Shard) (shardFile, *shard.Reader, error) {
	f, err := d.pin.open(e.RelativePath)
	if err != nil {
		return nil, nil, err
	}
	sr, err := shard.OpenFile(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, sr, nil
}

// newReader is Open after the manifest is read: it checks the thresholds,
// the layout the manifest implies and every shard entry against it, and
// that files has every shard at its recorded size. Shards are opened
// through files on first use.
func newReader(dir string, m *Manifest, opts OpenOptions, log *slog.Logger, files versionFiles) (*Reader, error) {
	if err := checkThresholds(dir, m, opts, log); err != nil {
		return nil, err
	}
	layout, err := checkedLayout(m)
	if err != nil {
		return nil, ManifestError(dir, err)
	}
	r := &Reader{dir: dir, manifest: m, layout: layout, log: log, checksum: opts.VerifyChecksums, files: files,
		verifySamples: !opts.SkipSampleChecksums, recheckSamples: opts.RecheckSamples, opened: time.Now()}
	r.shards = make([]lazyShard, len(m.Shards))
	r.starts = make([]int, len(m.Shards)+1)
	for k := range m.Shards {
		e := &m.Shards[k]
		r.shards[k] = lazyShard{entry: e, path: filepath.Join(dir, filepath.FromSlash(e.RelativePath))}
		if err := files.stat(r.shards[k].path, e); err != nil {
			return nil, err
		}
		r.starts[k] = int(e.FirstSample)
	}
	r.starts[len(m.Shards)] = int(m.Samples)
	return r, nil
}

// checkThresholds evaluates the recorded (or overriding) thresholds on the
// recorded summary.
func checkThresholds(dir string, m *Manifest, opts OpenOptions, log *slog.Logger) error {
	th := m.Thresholds
	if opts.Thresholds != nil {
		th = *opts.Thresholds
	}
	failed, warned := th.Check(m.Summary.Total)
	for _, f := range warned {
		log.Warn("validation threshold exceeded (warn)", "dir", dir, "finding", f.String())
	}
	if len(failed) > 0 && !opts.IgnoreThresholds {
		return &validate.ThresholdError{Dir: dir, Findings: failed}
	}
	for _, f := range failed {
		log.Warn("validation threshold exceeded (fail), ignored on request", "dir", dir, "finding", f.String())
	}
	return nil
}

// ManifestLayout is the per-sample layout every shard of m must have, from
// the manifest alone: what Open, verify and the Zarr export read shards
// with. CheckShardEntries checks the shard entries against it.
func ManifestLayout(m *Manifest) (shard.Layout, error) {
	dtype, err := shard.ParseDType(m.DefaultDType)
	if err != nil {
		return shard.Layout{}, fmt.Errorf("default_dtype: %v", err)
	}
	l := shard.Layout{DType: dtype, Width: m.Transform.TargetWidth, Height: m.Transform.TargetHeight,
		Channels: m.Transform.Channels, MaxBoxes: m.Transform.MaxBoxes}
	if shard.Version(m.DefaultShardVersion) >= shard.Version5 {
		compactLayout(&l, m) // compact.go
	}
	// ParseManifest checked that the extras are packed in order with
	// positive dimensions; bound their size before multiplying further.
	for i, e := range m.Extras {
		n := 1
		for _, d := range e.Shape {
			n *= min(d, shard.ExtraF32Limit+1)
			if n > shard.ExtraF32Limit {
				return shard.Layout{}, fmt.Errorf("extras[%d] (%s): shape %v exceeds %d values", i, e.Name, e.Shape, shard.ExtraF32Limit)
			}
		}
		l.ExtraF32 += n
	}
	if err := l.Validate(); err != nil {
		return shard.Layout{}, fmt.Errorf("transform and extras: %v", err)
	}
	return l, nil
}

// checkedLayout is ManifestLayout with every shard entry checked against it.
func checkedLayout(m *Manifest) (shard.Layout, error) {
	l, err := ManifestLayout(m)
	if err != nil {
		return l, err
	}
	return l, CheckShardEntries(m, l)
}

// CheckShardEntries checks that every shard entry of m agrees with the
// layout l (ManifestLayout's), including the file size the layout implies
// for its sample count: with a checksum section, or without one for
// shards written before it existed.
func CheckShardEntries(m *Manifest, l shard.Layout) error {
	for i, e := range m.Shards {
		switch {
		case e.Width != l.Width || e.Height != l.Height || e.Channels != l.Channels || e.MaxBoxes != l.MaxBoxes:
			return fmt.Errorf("shards[%d] (%s): %dx%dx%d max_boxes %d, transform says %dx%dx%d max_boxes %d",
				i, e.ID, e.Channels, e.Height, e.Width, e.MaxBoxes, l.Channels, l.Height, l.Width, l.MaxBoxes)
		case shard.Version(e.ShardVersion) < shard.MinSupportedVersion || shard.Version(e.ShardVersion) > shard.MaxSupportedVersion:
			return fmt.Errorf("shards[%d] (%s): shard_version %d, this build reads %d..%d",
				i, e.ID, e.ShardVersion, shard.MinSupportedVersion, shard.MaxSupportedVersion)
		case l.Compact || shard.Version(e.ShardVersion) >= shard.Version5:
			if problem := compactEntryProblem(&e, l); problem != "" { // compact.go
				return fmt.Errorf("shards[%d] (%s): %s", i, e.ID, problem)
			}
			continue
		case int64(int(e.Samples)) != e.Samples || e.Bytes != l.FileSize(int(e.Samples)) && e.Bytes != l.FileSizeWithoutChecksums(int(e.Samples)):
			return fmt.Errorf("shards[%d] (%s): bytes %d, but %d samples of this layout take %d (%d without per-sample checksums)",
				i, e.ID, e.Bytes, e.Samples, l.FileSize(int(e.Samples)), l.FileSizeWithoutChecksums(int(e.Samples)))
		}
		if problem := shardVersionProblem(&e, l); problem != "" {
			return fmt.Errorf("shards[%d] (%s): %s", i, e.ID, problem)
		}
	}
	return nil
}

// ManifestError names the manifest of dir in an ErrManifest error.
func ManifestError(dir string, err error) error {
	return fmt.Errorf("%s: %w: %v", filepath.Join(dir, ManifestName), ErrManifest, err)
}

// checkShardInfo checks the result of a stat of a shard file: that it
// exists inside the version directory (an os.Root refuses paths and
// symlinks that leave it), is a regular file and has the size its entry
// records. path is the name used in errors.
func checkShardInfo(path string, e *Shard, fi fs.FileInfo, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: missing: the manifest lists shard %s", path, e.ID)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file", path)
	case fi.Size() != e.Bytes:
		return fmt.Errorf("%s: %d bytes, the manifest says %d", path, fi.Size(), e.Bytes)
	}
	return nil
}

// CheckShardHeader compares an opened shard with its manifest entry and the
// warehouse layout.
func CheckShardHeader(sr *shard.Reader, e *Shard, l shard.Layout) error {
	h := sr.Header()
	switch {
	case uint32(h.Version) != e.ShardVersion:
		return fmt.Errorf("header shard_version %d, manifest says %d", h.Version, e.ShardVersion)
	case int64(sr.Len()) != e.Samples:
		return fmt.Errorf("header says %d samples, manifest says %d", sr.Len(), e.Samples)
	case sr.Layout().DType.String() != e.DType:
		return fmt.Errorf("header dtype %s, manifest says %s", sr.Layout().DType, e.DType)
	case sr.Layout() != l:
		return fmt.Errorf("header layout %+v, manifest implies %+v", sr.Layout(), l)
	case !sr.HasMeta():
		return errors.New("no meta section: manifest format 1 shards carry per-sample records")
	case sr.HasSampleChecksums() != hasSampleChecksums(e, l):
		// Unreachable while the file has the size the manifest records;
		// kept so that the manifest, not the file, decides.
		return fmt.Errorf("header checksum section %v, the manifest's size says %v", sr.HasSampleChecksums(), hasSampleChecksums(e, l))
	}
	return nil
}

// hasSampleChecksums reports whether the shard of entry e has per-sample
// CRCs: from shard_version 2 on its version says; a shard_version 1 shard
// (the legacy rule) has them when its recorded size is that of a shard with
// the checksum section (CheckShardEntries accepted no other sizes).
func hasSampleChecksums(e *Shard, l shard.Layout) bool {
	if v := shard.Version(e.ShardVersion); v != shard.Version1 {
		return v.HasChecksums()
	}
	return e.Bytes == l.FileSize(int(e.Samples))
}

// shardVersionProblem says how entry e's shard_version contradicts its
// dtype or its size, or returns "". From shard_version 2 on the version
// says whether the shard has a checksum section and may be U8; a
// shard_version 1 entry has no such contradiction (docs/format/shard.md,
// Versions).
func shardVersionProblem(e *Shard, l shard.Layout) string {
	v := shard.Version(e.ShardVersion)
	switch {
	case v == shard.Version1:
	case l.DType == shard.U8 && !v.HasU8():
		return fmt.Sprintf("shard_version %d has no dtype U8, shard_version %d adds it", v, shard.Version4)
	case v.HasChecksums() && e.Bytes != l.FileSize(int(e.Samples)):
		return fmt.Sprintf("shard_version %d has per-sample checksums, but bytes %d is the size without them", v, e.Bytes)
	case !v.HasChecksums() && e.Bytes == l.FileSize(int(e.Samples)):
		return fmt.Sprintf("shard_version %d has no per-sample checksums, but bytes %d is the size with them", v, e.Bytes)
	}
	return ""
}

// Dir is the version directory.
func (r *Reader) Dir() string { return r.dir }

// Manifest is the checked manifest. The caller must not modify it.
func (r *Reader) Manifest() *Manifest { return r.manifest }

// NormalizeTable maps each channel's 8-bit pixel value to the value the
// build's normalization gives (the manifest's transform.mean and std, or
// v/255 without them) in float32: for a U8 warehouse, what an F32 build of
// the same config stores, bit for bit. See Batch.NormalizeImages.
func (r *Reader) NormalizeTable() *[3][256]float32 {
	var mean, std [3]float64
	if t := r.manifest.Transform; len(t.Mean) == 3 && len(t.Std) == 3 {
		copy(mean[:], t.Mean)
		copy(std[:], t.Std)
	}
	return transforms.NormalizeTable(mean, std)
}

// Layout is the per-sample layout of every shard.
func (r *Reader) Layout() shard.Layout { return r.layout }

// SampleChecksums counts the shards that carry per-sample CRC-32Cs, out of
// all shards, from the manifest: every shard a current build writes does,
// none of a warehouse built before they existed (its samples are read
// unchecked). Whether they are checked on read is VerifiesSamples.
func (r *Reader) SampleChecksums() (checked, shards int) {
	for k := range r.shards {
		if hasSampleChecksums(r.shards[k].entry, r.layout) {
			checked++
		}
	}
	return checked, len(r.shards)
}

// ShardsWithSampleChecksums is Reader.SampleChecksums from a manifest
// alone (no shard is opened): how many of m's shards have per-sample
// CRC-32Cs, judged by their recorded sizes. It fails where Open would
// refuse the manifest's layout or shard sizes.
func ShardsWithSampleChecksums(m *Manifest) (int, error) {
	l, err := checkedLayout(m)
	if err != nil {
		return 0, err
	}
	checked := 0
	for k := range m.Shards {
		if hasSampleChecksums(&m.Shards[k], l) {
			checked++
		}
	}
	return checked, nil
}

// VerifiesSamples reports whether samples are checked against their CRC-32C
// as they are handed out (not OpenOptions.SkipSampleChecksums), and whether
// on every read (OpenOptions.RecheckSamples) or on the first.
func (r *Reader) VerifiesSamples() (verify, everyRead bool) {
	return r.verifySamples, r.verifySamples && r.recheckSamples
}

// SamplesVerified counts the CRC-32C checks that passed since Open: with
// the default first-read checks, the distinct samples checked so far.
func (r *Reader) SamplesVerified() int64 { return r.verified.Load() }

// Len is the number of samples.
func (r *Reader) Len() int { return r.starts[len(r.starts)-1] }

// ShardStarts returns the first sample index of each shard, in order. The
// caller must not modify it.
func (r *Reader) ShardStarts() []int { return r.starts[:len(r.starts)-1] }

// locate returns the shard holding sample i and i's index inside it.
func (r *Reader) locate(i int) (k, local int, err error) {
	if i < 0 || i >= r.Len() {
		return 0, 0, fmt.Errorf("%s: sample %d out of range [0, %d)", r.dir, i, r.Len())
	}
	k = sort.SearchInts(r.starts, i+1) - 1
	return k, i - r.starts[k], nil
}

// Sample returns sample i (0 <= i < Len), mapping its shard if this is
// the shard's first use, and checks it against its CRC-32C (see
// OpenOptions.SkipSampleChecksums and RecheckSamples): a sample whose bytes
// changed since they were written is an error naming the shard file and the
// sample. The views it hands out stay valid until Close.
func (r *Reader) Sample(i int) (Sample, error) {
	k, local, err := r.locate(i)
	if err != nil {
		return Sample{}, err
	}
	sr, err := r.shard(k, local, true)
	if err != nil {
		return Sample{}, err
	}
	if err := r.verifySample(k, sr, local); err != nil {
		return Sample{}, err
	}
	r.samples.Add(1)
	return Sample{Index: i, Shard: r.shards[k].entry.ID, ShardIndex: local, r: sr}, nil
}

// shard returns shard k, mapping it on first use; local is the sample that
// asked. With touch (Sample's views read the mapping) local's image pages
// are faulted in to measure the first-touch time; the batch path (pread)
// and read-ahead never read the mapped images, so faulting them in would
// only read them twice, and their loads record no first touch.
func (r *Reader) shard(k, local int, touch bool) (*shard.Reader, error) {
	s := &r.shards[k]
	if sr := s.reader.Load(); sr != nil {
		return sr, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sr := s.reader.Load(); sr != nil {
		return sr, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	load := ShardLoad{ID: s.entry.ID, Bytes: s.entry.Bytes}
	if r.checksum {
		t0 := time.Now()
		if err := r.files.checkSHA256(s.path, s.entry); err != nil {
			s.err = err
			return nil, err
		}
		load.Checksum = time.Since(t0)
	}
	t0 := time.Now()
	f, sr, err := r.files.open(s.path, s.entry)
	if err != nil {
		s.err = err
		return nil, err
	}
	if err := CheckShardHeader(sr, s.entry, r.layout); err != nil {
		sr.Close()
		f.Close()
		s.err = fmt.Errorf("%s: %w", s.path, err)
		return nil, s.err
	}
	s.file = f
	s.verified = make([]atomic.Uint64, (sr.Len()+63)/64)
	t1 := time.Now()
	load.Open = t1.Sub(t0)
	if touch {
		touchPages(sr.Image(local))
		load.FirstTouch = time.Since(t1)
	}
	r.loads.add(load)
	r.log.Info("shard loaded", "shard", s.entry.ID, "bytes", load.Bytes, "checksum_ms", float64(load.Checksum)/1e6,
		"open_mmap_ms", float64(load.Open)/1e6, "first_touch_ms", float64(load.FirstTouch)/1e6)
	s.reader.Store(sr)
	return sr, nil
}

// checkSHA256 compares the sha256 of f, the file at path, with want.
func checkSHA256(f *os.File, path, want string) error {
	got, err := ReaderSHA256(context.Background(), f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got.SHA256 != want {
		return fmt.Errorf("%s: sha256 %s, the manifest says %s", path, got.SHA256, want)
	}
	return nil
}

// needsCheck reports whether any of samples [local, local+n) of shard k
// is to be checked against its CRC-32C on this read.
func (r *Reader) needsCheck(k int, sr *shard.Reader, local, n int) bool {
	return r.verifySamples && sr.HasSampleChecksums() && (r.recheckSamples || !r.shards[k].allVerified(local, n))
}

// verifySample checks sample local of shard k, as stored in the shard,
// against its CRC-32C (Sample's views; batches check their copies in
// readPieces and readCompactRun): nil when it matches, when it passed
// before and the Reader does not recheck, when the shard has no checksum
// section, or when the Reader skips the checks. The error names the shard
// file, the warehouse sample and the sample in the shard (checked).
func (r *Reader) verifySample(k int, sr *shard.Reader, local int) error {
	if !r.needsCheck(k, sr, local, 1) {
		return nil
	}
	return r.checked(k, local, sr.VerifySample(local, nil))
}

// checked records the outcome of the check of sample local of shard k:
// err, the check's error, named by shard file, warehouse sample and sample
// in the shard; nil counted in SamplesVerified.
func (r *Reader) checked(k, local int, err error) error {
	if err != nil {
		return fmt.Errorf("%s: warehouse sample %d: %w", r.shards[k].path, r.starts[k]+local, err)
	}
	// SamplesVerified counts distinct samples when each is checked once,
	// every check with RecheckSamples.
	if r.shards[k].markVerified(local) || r.recheckSamples {
		r.verified.Add(1)
	}
	return nil
}

// touchSink keeps touchPages' reads from being optimised away.
var touchSink atomic.Uint32

// touchPages reads one byte per page of b, faulting the pages in.
func touchPages(b []byte) {
	page := os.Getpagesize()
	var acc byte
	for off := 0; off < len(b); off += page {
		acc += b[off]
	}
	touchSink.Add(uint32(acc))
}

// verifyChunk bounds the region bytes ReadRunInto reads with one pread
// when it checks the samples of a compact shard (readCompactRun): each
// chunk's samples are checked and restored right after its pread, while
// the bytes are still in the CPU cache.
const verifyChunk = 512 << 10

// readPiece is what ReadRunInto reads with one pread when it reads a run
// in pieces (readPieces): small enough to stay in the CPU's second-level
// cache between the pread and the copy out of it.
const readPiece = 128 << 10

// pieceScratch holds readPieces' readPiece-byte buffers.
var pieceScratch = sync.Pool{New: func() any { b := make([]byte, readPiece); return &b }}

// streamBatch: a batch with this many image bytes or more has its images
// written with stores that bypass the caches (readPieces, shard.Copy and
// shard.CopyCRC32C), where there are such stores (shard.StoresPastCaches):
// more than a core's second-level cache holds, so its first rows would be
// evicted to memory before anyone read them anyway, and a store that skips
// the caches does not first read the line it writes (a third less memory
// traffic). Elsewhere its unchecked runs are one pread each (through the
// buffer with regular stores they ran 0.90x as fast on amd64).
const streamBatch = 1 << 20

// ReadRunInto reads the n consecutive samples first..first+n-1 into rows
// row..row+n-1 of b: per shard they cover, their images with pread (no
// mapping is touched, so no page faults and no page-table growth however
// much is read) and one copy of their boxes, masks, records and extras
// from the mapping. This is the batch fill path; a shuffled batch is a run
// of length 1 per sample.
//
// Each sample is checked against its CRC-32C as read into b, on its first
// read (see OpenOptions.SkipSampleChecksums and RecheckSamples). A run
// that holds a sample to check, or whose batch is streamBatch bytes of
// images or more, is read in preads of readPiece bytes into a small buffer
// and copied from there into b, the CRC folded into the copy
// (readPieces): the check costs no second pass over the images, and a
// large batch is written past the caches. Other runs are read with one
// pread straight into b.
func (r *Reader) ReadRunInto(first, n int, b *Batch, row int) error {
	if first < 0 || n < 0 || first > r.Len()-n {
		return fmt.Errorf("%s: samples [%d, %d) out of range [0, %d)", r.dir, first, first+n, r.Len())
	}
	stream := len(b.Images) >= streamBatch && shard.StoresPastCaches()
	for n > 0 {
		k, local, err := r.locate(first)
		if err != nil {
			return err
		}
		sr, err := r.shard(k, local, false)
		if err != nil {
			return err
		}
		m := min(n, sr.Len()-local)
		if sr.IsCompact() { // compact.go
			if err := r.readCompactRun(k, sr, local, m, b, row, stream); err != nil {
				return err
			}
		} else {
			img := int(r.layout.ImageBytes())
			off, length := sr.ImageSpan(local, m)
			dst := b.Images[row*img : row*img+length]
			if check := r.needsCheck(k, sr, local, m); check || stream {
				err = r.readPieces(k, sr, local, m, dst, off, stream, check)
			} else if err = r.readAt(k, dst, off, m); err != nil {
				err = fmt.Errorf("%s: read samples %d..%d: %w (the file changed after it was opened?)", r.shards[k].path, local, local+m-1, err)
			}
			if err != nil {
				return err
			}
		}
		sr.CopyRows(local, b.rows(row, m))
		r.samples.Add(int64(m))
		first, row, n = first+m, row+m, n-m
	}
	return nil
}

// readPieces reads the images of samples [local, local+c) of shard k, at
// off in its file, into dst: preads of up to readPiece bytes into a buffer
// that stays in the CPU's cache, each copied into dst (stores past the
// caches with stream: shard.Copy) and, with check, each sample checked
// against its CRC-32C where it is still to be, the CRC folded into the
// copy (shard.CopyCRC32C), so that the image bytes come from memory once,
// as in an unchecked read. A piece may hold the end of one image and the
// start of the next.
//
// Those preads only take what the page cache holds (readCached). From the
// first piece it did not all hold, the rest of the run is read with one
// pread straight into dst (checked in a second pass), its samples counted
// cold: a piece at a time, a cold run would wait on the disk once per
// piece, the kernel reading ahead only from the second on.
func (r *Reader) readPieces(k int, sr *shard.Reader, local, c int, dst []byte, off int64, stream, check bool) error {
	img := len(dst) / c
	bufp := pieceScratch.Get().(*[]byte)
	defer pieceScratch.Put(bufp)
	var crc uint32
	q, direct := 0, false // the sample being copied; whether the rest is in dst
	for p := 0; p < len(dst); {
		var buf []byte
		if !direct {
			buf = (*bufp)[:min(readPiece, len(dst)-p)]
			n, cold, err := r.readCachedPart(k, buf, off+int64(p))
			if err == nil && cold {
				copy(dst[p:], buf[:n])
				_, err = r.shards[k].file.ReadAt(dst[p+n:], off+int64(p+n))
				r.cold.Add(int64(c - q))
				direct = true
			}
			if err != nil {
				return fmt.Errorf("%s: read samples %d..%d: %w (the file changed after it was opened?)", r.shards[k].path, local+q, local+c-1, err)
			}
			if direct && !check {
				return nil
			}
		}
		if direct {
			buf = dst[p:]
		}
		for len(buf) > 0 {
			end := (q + 1) * img
			m := min(len(buf), end-p)
			switch {
			case !check:
				shard.Copy(dst[p:p+m], buf[:m], stream)
			case direct:
				crc = shard.UpdateCRC32C(crc, dst[p:p+m])
			default:
				crc = shard.CopyCRC32C(crc, dst[p:p+m], buf[:m], stream)
			}
			buf, p = buf[m:], p+m
			if p == end {
				if check && r.needsCheck(k, sr, local+q, 1) {
					if err := r.checked(k, local+q, sr.CheckImageCRC(local+q, crc)); err != nil {
						return err
					}
				}
				q, crc = q+1, 0
			}
		}
	}
	return nil
}

// readCached is shard.ReadCached (a variable for the tests).
var readCached = shard.ReadCached

// readAt reads dst from offset off of shard k's file, the bytes of c
// samples: first what the page cache holds (readCachedPart), then, where
// that was not all, the rest with ReadAt, counting the c samples as cold:
// the cue for the batch iterator's read-ahead advice (readahead.go).
func (r *Reader) readAt(k int, dst []byte, off int64, c int) error {
	n, cold, err := r.readCachedPart(k, dst, off)
	if err != nil || !cold {
		return err
	}
	r.cold.Add(int64(c))
	_, err = r.shards[k].file.ReadAt(dst[n:], off+int64(n))
	return err
}

// readCachedPart reads into dst what the page cache holds of shard k's
// file from off on (readCached), n bytes, and reports whether that was
// not all of dst (cold). Where the kernel cannot say (not Linux, kernels
// before 4.14, file systems without RWF_NOWAIT: NFS, some FUSE) it is
// cold: without that answer the read-ahead advice is given for every
// batch, as on a cold cache. A shard held in memory (FuzzOpen) is read
// whole and never cold.
func (r *Reader) readCachedPart(k int, dst []byte, off int64) (n int, cold bool, err error) {
	f := r.shards[k].file
	osf, ok := f.(*os.File)
	if !ok {
		_, err = f.ReadAt(dst, off)
		return len(dst), false, err
	}
	n, _ = readCached(osf, dst, off)
	return n, n < len(dst), nil
}

// ReadSampleInto copies sample i into one row of a batch: the raw image,
// boxes and mask bytes exactly as stored, the class indices (-1 for padding
// slots), the box count, the metadata record and the extras.
func (r *Reader) ReadSampleInto(i int, dst SampleSlot) error {
	s, err := r.Sample(i)
	if err != nil {
		return err
	}
	img := s.Image()
	populate(img)
	copy(dst.Image, img)
	copy(dst.Boxes, s.BoxesRaw())
	copy(dst.Mask, s.MaskRaw())
	n := copy(dst.ClassIndex, s.ClassIndex())
	for j := n; j < len(dst.ClassIndex); j++ {
		dst.ClassIndex[j] = -1
	}
	*dst.BoxCount = int32(n)
	*dst.Meta = s.Meta()
	copy(dst.Extras, s.Extras())
	return nil
}

// Stats summarises the shard loads and samples read since Open.
func (r *Reader) Stats() LoadStats {
	opened, bytes, p50, p99, maxLoad := summarizeLoads(r.loads.snapshot())
	return LoadStats{
		ShardsOpened: opened, ShardsTotal: len(r.shards), BytesMapped: bytes,
		SamplesRead: r.samples.Load(), ColdSamples: r.cold.Load(), Elapsed: time.Since(r.opened),
		LoadP50: p50, LoadP99: p99, LoadMax: maxLoad,
	}
}

// ShardLoads lists every shard load so far, in the order they happened.
func (r *Reader) ShardLoads() []ShardLoad { return r.loads.snapshot() }

// Close unmaps every mapped shard and releases the batch buffers. No Sample
// view or Batch may be used afterwards.
func (r *Reader) Close() error {
	r.pool.drain()
	var errs []error
	for k := range r.shards {
		s := &r.shards[k]
		s.mu.Lock()
		if sr := s.reader.Swap(nil); sr != nil {
			if err := sr.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: unmap: %w", s.path, err))
			}
			if err := s.file.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: close: %w", s.path, err))
			}
			s.file = nil
		}
		s.err = fmt.Errorf("%s: warehouse reader closed", s.path)
		s.mu.Unlock()
	}
	r.readersLock.Release() // nil-safe
	r.readersLock = nil
	r.pin.close() // nil-safe
	r.pin = nil
	return errors.Join(errs...)
}

// Sample is one sample of an open warehouse. Image, ImageF16, ImageF32,
// BoxesRaw, MaskRaw and Extras are views into the mapped shard (zero-copy
// on little-endian hosts): read-only, valid until the Reader is closed.
// Boxes, Mask, ClassIndex and Meta are small decoded copies.
type Sample struct {
	Index      int    // global sample index
	Shard      string // id of the shard holding it
	ShardIndex int    // position inside that shard
	r          *shard.Reader
}

// DType is the element type of the image (and of boxes and mask, except for
// U8, whose boxes and mask are F32: DType().BoxDType()).
func (s Sample) DType() shard.DType { return s.r.Layout().DType }

// Image is the raw little-endian CHW image tensor in the shard's dtype (of
// a compact_images version: a restored copy, not a view).
func (s Sample) Image() []byte { return s.r.Image(s.ShardIndex) }

// ImageF16 is the image as binary16 bit patterns; it panics on an F32
// warehouse (check DType).
func (s Sample) ImageF16() []uint16 { return s.r.ImageF16(s.ShardIndex) }

// ImageF32 is the image as float32; it panics on an F16 or U8 warehouse
// (check DType).
func (s Sample) ImageF32() []float32 { return s.r.ImageF32(s.ShardIndex) }

// ImageU8 is the image of a U8 warehouse: the resampled pixels before
// normalization (Reader.NormalizeTable maps them to the configured values).
// It panics on an F16 or F32 warehouse (check DType).
func (s Sample) ImageU8() []byte {
	if d := s.DType(); d != shard.U8 {
		panic("warehouse: ImageU8 on a " + d.String() + " warehouse")
	}
	return s.r.Image(s.ShardIndex)
}

// BoxesRaw is the raw [max_boxes][4] box rows, padding included.
func (s Sample) BoxesRaw() []byte { return s.r.BoxesRaw(s.ShardIndex) }

// MaskRaw is the raw [max_boxes] mask.
func (s Sample) MaskRaw() []byte { return s.r.MaskRaw(s.ShardIndex) }

// BoxCount is the number of real boxes.
func (s Sample) BoxCount() int { return s.r.BoxCount(s.ShardIndex) }

// Boxes are the real boxes, x0, y0, x1, y1 normalized to [0, 1].
func (s Sample) Boxes() [][4]float32 { return s.r.Boxes(s.ShardIndex) }

// Mask is the full [max_boxes] mask: 1 for real boxes, then 0.
func (s Sample) Mask() []float32 { return s.r.Mask(s.ShardIndex) }

// ClassIndex is the class of each real box, indexing Manifest().Classes.
func (s Sample) ClassIndex() []int32 { return s.r.ClassIndex(s.ShardIndex) }

// Meta is the per-sample record: source, frame, times and letterbox
// geometry.
func (s Sample) Meta() shard.Meta { return s.r.Meta(s.ShardIndex) }

// Extras are the sample's f32 extras, laid out as Manifest().Extras says.
func (s Sample) Extras() []float32 { return s.r.Extras(s.ShardIndex) }
