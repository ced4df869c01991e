// Package viewer shows a published warehouse version to a person: an
// overview of its verdicts (thresholds, runs, reasons, phase timings), a
// grid of its samples filterable by run, reason, class and kept/rejected,
// one page per sample with its boxes, letterbox geometry, reasons, meta and
// extras, and, against a second version, the drift report of `diff` with
// the samples that appeared, disappeared or changed reasons.
//
// The same pages are served live (Handler, for `warehouse-etl serve`) or
// written once as static files (WriteReport, for `warehouse-etl report`).
//
// It only reads. Pages come from the manifest, build_report.json and a
// compact index of samples.jsonl (built by one streaming pass, about 30
// bytes per input sample; the records themselves are read back one line at
// a time), and images from the shards through warehouse.Reader and from
// the dataset root through an os.Root, so no request parameter can name a
// file: every parameter is a number or one of the values the manifest and
// the index list. While open it holds the version's readers lock, so gc
// leaves the version alone.
package viewer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"warehouse-etl/analytics"
	"warehouse-etl/analytics/records"
	"warehouse-etl/internal/lockfile"
	"warehouse-etl/warehouse"
)

// Options configure Open.
type Options struct {
	// DatasetRoot is where rejected samples' source images are read from.
	// Empty: the manifest's dataset_root when it is an absolute path that
	// exists; otherwise rejected samples are shown without their image.
	DatasetRoot string
	// Against is a second version (directory or output root with latest)
	// to compare with: the diff page. Empty: no diff page.
	Against string
	// Limits are the diff's drift limits; zero value: analytics.DefaultLimits.
	Limits *analytics.Limits
	// Logger receives what the viewer has to say (nil discards).
	Logger *slog.Logger
}

// Viewer is one open warehouse version. It is safe for concurrent use.
type Viewer struct {
	dir      string
	m        *warehouse.Manifest
	report   *records.BuildReport // nil when build_report.json is unreadable
	r        *warehouse.Reader
	version  *os.Root // the version directory
	samples  *os.File
	lock     *lockfile.Lock // nil when the root is not ours to lock
	lockB    *lockfile.Lock // the --against version's
	data     *os.Root       // the dataset root; nil when unknown
	dataPath string
	log      *slog.Logger

	against string // resolved version directory, "" without --against
	limits  analytics.Limits

	indexOnce sync.Once
	index     *sampleIndex
	indexErr  error

	// The dataset's source, opened again for rejected samples' labels and
	// frames (source.go); srcCtx ends with Close.
	sourceRoot string // the dataset root as the source opens it (a file for some kinds)
	srcCtx     context.Context
	srcCancel  context.CancelFunc
	srcOnce    sync.Once
	src        *datasetSource

	diffOnce sync.Once
	diff     *diffPage
	diffErr  error
}

// Open opens the version at path (a version directory or an output root
// with a latest pointer) for viewing and takes its readers lock.
func Open(path string, opts Options) (*Viewer, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := warehouse.ResolveDir(path)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	v := &Viewer{dir: dir, log: log, limits: analytics.DefaultLimits()}
	v.srcCtx, v.srcCancel = context.WithCancel(context.Background())
	if opts.Limits != nil {
		v.limits = *opts.Limits
	}
	ok := false
	defer func() {
		if !ok {
			v.Close()
		}
	}()
	// The lock first: from here on gc leaves the version alone (Open
	// takes it too, for its reader; this one covers the whole serve).
	if v.lock, err = warehouse.LockForReading(dir); err != nil {
		return nil, err
	}
	// A viewer is not training: a version over its thresholds is shown
	// (its overview says so).
	if v.r, err = warehouse.Open(dir, warehouse.OpenOptions{IgnoreThresholds: true, Logger: log}); err != nil {
		return nil, err
	}
	v.m = v.r.Manifest()
	// Side files are opened through the version directory's root: a link
	// out of it is refused, whatever the manifest says.
	if v.version, err = os.OpenRoot(dir); err != nil {
		return nil, err
	}
	if v.samples, err = v.version.Open(v.m.Files.Samples); err != nil {
		return nil, err
	}
	if raw, err := readSmall(v.version, v.m.Files.BuildReport, records.MaxReportBytes); err != nil {
		log.Warn("build report unreadable: the overview shows no phase timings", "err", err)
	} else if v.report, err = records.DecodeBuildReport(raw); err != nil {
		log.Warn("build report unreadable: the overview shows no phase timings", "err", err)
	}
	if err := v.openDataset(opts.DatasetRoot); err != nil {
		return nil, err
	}
	if opts.Against != "" {
		if v.against, err = warehouse.ResolveDir(opts.Against); err != nil {
			return nil, fmt.Errorf("--against: %w", err)
		}
		// gc keeps the baseline too while the drift page may read it.
		if v.lockB, err = warehouse.LockForReading(v.against); err != nil {
			return nil, fmt.Errorf("--against: %w", err)
		}
	}
	ok = true
	return v, nil
}

// openDataset opens the root rejected samples' images are read from.
func (v *Viewer) openDataset(explicit string) error {
	p := explicit
	if p == "" {
		root := filepath.FromSlash(v.m.DatasetRoot)
		if !filepath.IsAbs(root) {
			v.log.Info("dataset root is relative in the manifest: rejected samples are shown without their image unless --dataset-root names it", "dataset_root", v.m.DatasetRoot)
			return nil
		}
		p = root
	}
	source := p
	st, err := os.Stat(p)
	if err == nil && !st.IsDir() {
		// A COCO or YOLO root may be a file (data.yaml); its directory holds the images.
		p = filepath.Dir(p)
	}
	root, err := os.OpenRoot(p)
	if err != nil {
		if explicit != "" {
			return fmt.Errorf("--dataset-root: %w", err)
		}
		v.log.Info("dataset root not readable: rejected samples are shown without their image", "err", err)
		return nil
	}
	v.data, v.dataPath, v.sourceRoot = root, p, source
	return nil
}

// Dir is the version directory shown.
func (v *Viewer) Dir() string { return v.dir }

// Manifest is the version's manifest.
func (v *Viewer) Manifest() *warehouse.Manifest { return v.m }

// Close releases the reader, the files and the readers lock.
func (v *Viewer) Close() error {
	var errs []error
	// The background pass stops, then its source is closed.
	v.srcCancel()
	v.srcOnce.Do(func() {})
	if v.src != nil && v.src.src != nil {
		closeSource(v.src.src)
	}
	if v.r != nil {
		errs = append(errs, v.r.Close())
	}
	for _, l := range []*lockfile.Lock{v.lock, v.lockB} {
		if l != nil {
			l.Release()
		}
	}
	for _, c := range []io.Closer{v.samples, v.version, v.data} {
		if c != nil && !isNilFile(c) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

func isNilFile(c io.Closer) bool {
	switch f := c.(type) {
	case *os.File:
		return f == nil
	case *os.Root:
		return f == nil
	}
	return false
}

// sampleIndex returns the index of samples.jsonl, building it on first use.
func (v *Viewer) sampleIndex() (*sampleIndex, error) {
	v.indexOnce.Do(func() {
		v.index, v.indexErr = buildIndex(v.samples, v.m)
		if v.indexErr == nil {
			v.log.Info("samples indexed", "samples", len(v.index.offsets)-1)
		}
	})
	return v.index, v.indexErr
}

// readSmall reads a file of root of at most limit bytes.
func readSmall(root *os.Root, p string, limit int64) ([]byte, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", p, limit)
	}
	return b, nil
}
