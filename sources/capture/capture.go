// Package capture reads capture runs: the labelled-image layout of the
// original capture tool. testdata/capture at the repository root is a small
// example with every kind of defect this package reports.
//
//	<root>/
//	  run_<id>/                 a run: any folder with a labels/ folder
//	    run_manifest.json       optional, fingerprinted, not parsed
//	    images/frame_00000.png  any format sources.ImageSize reads (PNG, JPEG, GIF, BMP, TIFF, WebP)
//	    labels/frame_00000.json one sample each
//	    overlays/               ignored
//
// Runs are the sub-folders of the root that contain a labels/ folder, in
// natural order (run_2 before run_10). Folders without labels/, folders
// whose name starts with "." or "_", and symbolic links are not runs; the
// root itself never is. Samples of a run are its labels/*.json files
// (whose name does not start with "."), ordered by frame_id,
// then by natural file name; labels without a usable frame_id follow, and
// files that are not JSON objects come last. The file counter in a name
// and frame_id need not agree.
//
// Every label file becomes exactly one sample. What is wrong with it is
// collected in Sample.Reasons, all of it rather than the first problem:
//
//	missing_image       image_present is false, or image is absent or ""
//	path_escape         image is absolute or leaves the run folder after
//	                    cleaning ("../x.png"); symbolic links inside the run
//	                    are followed and not checked; or the label file
//	                    itself is a symbolic link (or not a regular file),
//	                    which is not followed
//	missing_file        the image does not exist or is not a regular file
//	decode_error        the image header cannot be read (unknown format,
//	                    corrupt or truncated header, zero size) or the file
//	                    is larger than Options.MaxImageBytes
//	bad_schema          not JSON, not an object, a field of the wrong type,
//	                    no frame_id, no label list, a malformed entry, a
//	                    file larger than Options.MaxLabelBytes
//	invalid_bbox        a box that is non-finite, has x0 >= x1 or y0 >= y1,
//	                    or has neither bbox_px nor bbox_norm
//	bbox_out_of_bounds  a pixel box outside the image by more than
//	                    validate.BoundsTolerancePx, or bbox_norm outside [0,1]
//	empty               the label list is empty
//	duplicate_frame     an earlier label of the same run has this frame_id
//
// bbox_px is used when present (not null); bbox_norm only otherwise, and is
// multiplied by the image size. A present but failing bbox_px does not fall
// back to bbox_norm. Boxes are resolved and clamped only when the image
// size is known; Sample.ValidBoxes counts the boxes that passed every check
// that could be made either way.
//
// A label or image that the operating system refuses to read (permissions,
// I/O errors) is not a sample reason: Scan fails with an error naming it.
package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "capture"

// defaultLabelKeys are the list keys of the original tool and the generic one.
var defaultLabelKeys = []string{"polyp_labels", "labels"}

// Default size limits of Options.
const (
	DefaultMaxLabelBytes int64 = 16 << 20 // a label is a few hundred bytes; anything this big is not a label
	DefaultMaxImageBytes       = sources.DefaultMaxImageBytes
)

// Options tune a Source. Zero values mean the defaults.
type Options struct {
	// LabelKeys name the label list in a label file; the first key present
	// in the file is used. Default ["polyp_labels", "labels"].
	LabelKeys []string
	// MaxLabelBytes is the largest label file read; a larger one is
	// bad_schema, checked before reading. Default DefaultMaxLabelBytes.
	MaxLabelBytes int64
	// MaxImageBytes is the largest image file read; a larger one is
	// decode_error in Scan and an error in ReadImage. Default
	// DefaultMaxImageBytes.
	MaxImageBytes int64
}

// Source scans a dataset root of capture runs. It holds no state between
// calls: every Scan and Fingerprint lists the root again.
type Source struct {
	root    string
	opts    Options
	entries []warehouse.SourceEntry // the runs of the last Scan
}

var _ sources.Source = (*Source)(nil)

// New returns a Source for the dataset at root, which must be a directory.
func New(root string, opts Options) (*Source, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("capture: dataset root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("capture: dataset root %s is not a directory", root)
	}
	if opts.LabelKeys == nil {
		opts.LabelKeys = defaultLabelKeys
	}
	if len(opts.LabelKeys) == 0 || slices.Contains(opts.LabelKeys, "") {
		return nil, errors.New("capture: label keys must be non-empty strings")
	}
	opts.LabelKeys = slices.Clone(opts.LabelKeys)
	if opts.MaxLabelBytes == 0 {
		opts.MaxLabelBytes = DefaultMaxLabelBytes
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	if opts.MaxLabelBytes < 0 || opts.MaxImageBytes < 0 {
		return nil, errors.New("capture: size limits must not be negative")
	}
	return &Source{root: root, opts: opts}, nil
}

// Kind returns "capture".
func (s *Source) Kind() string { return Kind }

// Scan calls fn for every label file of every run (see the package
// documentation for the order and the reasons). Labels of one run are held
// in memory while the run is scanned; images are only opened for their
// header.
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	runs, err := s.runs()
	if err != nil {
		return err
	}
	s.entries = make([]warehouse.SourceEntry, len(runs))
	for i, run := range runs {
		s.entries[i] = warehouse.SourceEntry{Index: i, Name: run}
	}
	var seq int64
	for i, run := range runs {
		labels, err := s.readRun(ctx, run)
		if err != nil {
			return err
		}
		// The image headers of the run, read in GOMAXPROCS goroutines
		// (a stat, an open and a read each); used in label order below.
		probes := make([]probe, len(labels))
		_ = sources.EachIndex(ctx, len(labels), func(j int) error {
			if rel, ok := labels[j].probePath(run); ok {
				pr := &probes[j]
				pr.w, pr.h, pr.reason, pr.detail, pr.err = s.probeImage(rel)
				pr.done = true
			}
			return nil // a probe's error is the sample's (sample), in label order
		})
		seen := map[uint64]bool{}
		for j, l := range labels {
			if err := ctx.Err(); err != nil {
				return err
			}
			smp, err := s.sample(run, l, seen, &probes[j])
			if err != nil {
				return err
			}
			smp.Seq, smp.SourceIndex = seq, int32(i)
			seq++
			if err := fn(smp); err != nil {
				return err
			}
		}
	}
	return nil
}

// runs lists the run folders of the root in natural order.
func (s *Source) runs() ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("capture: list runs: %w", err)
	}
	var runs []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		st, err := os.Lstat(filepath.Join(s.root, name, "labels"))
		switch {
		case err == nil && st.IsDir():
			runs = append(runs, name)
		case err == nil || sources.NotFound(err):
		default:
			return nil, fmt.Errorf("capture: run %s: %w", name, err)
		}
	}
	slices.SortFunc(runs, sources.NaturalCompare)
	return runs, nil
}

// labelFile is one parsed label with the name that orders ties.
type labelFile struct {
	name string
	label
}

// readRun reads and orders the label files of one run.
func (s *Source) readRun(ctx context.Context, run string) ([]labelFile, error) {
	dir := filepath.Join(s.root, run, "labels")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("capture: run %s: %w", run, err)
	}
	var out []labelFile
	var regular []int // the indices in out of the labels to read
	for _, e := range entries {
		name := e.Name()
		if !isLabelName(name) || e.IsDir() {
			continue
		}
		if !e.Type().IsRegular() {
			// A symbolic link (or a device, a FIFO) is not followed: a
			// path_escape sample, counted, not a file that silently is
			// no sample.
			out = append(out, labelFile{name: name, label: label{rank: rankUnparseable, imagePresent: true, notRegular: true}})
			continue
		}
		regular = append(regular, len(out))
		out = append(out, labelFile{name: name})
	}
	// Read and parse the labels in GOMAXPROCS goroutines; the first error
	// in name order is the one reported.
	err = sources.EachIndex(ctx, len(regular), func(j int) error {
		lf := &out[regular[j]]
		data, tooBig, err := sources.ReadCapped(filepath.Join(dir, lf.name), s.opts.MaxLabelBytes)
		if err != nil {
			return fmt.Errorf("capture: label %s/labels/%s: %w", run, lf.name, err)
		}
		lf.label = label{rank: rankUnparseable, badSchema: true, imagePresent: true,
			schemaDetail: fmt.Sprintf("the label file is larger than %d bytes", s.opts.MaxLabelBytes)}
		if !tooBig {
			lf.label = parseLabel(data, s.opts.LabelKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b labelFile) int {
		if a.rank != b.rank {
			return int(a.rank) - int(b.rank)
		}
		if a.rank == rankFramed && a.frame != b.frame {
			if a.frame < b.frame {
				return -1
			}
			return 1
		}
		return sources.NaturalCompare(a.name, b.name)
	})
	return out, nil
}

// probe is what probeImage found of a label's image.
type probe struct {
	w, h   int
	reason validate.Reason
	detail string
	err    error
	done   bool
}

// probePath is the image whose header sample reads for l (its switch's
// last case: a regular, parsed label that names a present image inside
// the run), relative to the dataset root.
func (l *labelFile) probePath(run string) (string, bool) {
	img, local := l.localImage()
	if l.notRegular || l.rank == rankUnparseable || l.imageWrongType || !l.imagePresent || !l.imageNamed || !local {
		return "", false
	}
	return path.Join(run, img), true
}

// sample turns one label into a Sample. seen holds the frame ids met so
// far in the run; pr is its image's header when read ahead (probePath).
func (s *Source) sample(run string, l labelFile, seen map[uint64]bool, pr *probe) (*sources.Sample, error) {
	smp := &sources.Sample{
		Source:     run,
		Frame:      l.frame,
		UnixTimeNs: l.unixTimeNs,
		SimTime:    l.simTime,
		LabelPath:  path.Join(run, "labels", l.name),
	}
	var reasons []validate.Reason
	if l.badSchema {
		reasons = append(reasons, validate.ReasonBadSchema)
		smp.Explain(validate.ReasonBadSchema, l.schemaDetail)
	}
	if l.rank == rankFramed {
		if seen[l.frame] {
			reasons = append(reasons, validate.ReasonDuplicateFrame)
			smp.Explain(validate.ReasonDuplicateFrame, fmt.Sprintf("frame_id %d again", l.frame))
		}
		seen[l.frame] = true
	}

	sized := false
	img, local := l.localImage()
	if local {
		smp.ImagePath = path.Join(run, img)
	}
	switch {
	case l.notRegular:
		reasons = append(reasons, validate.ReasonPathEscape)
	case l.rank == rankUnparseable || l.imageWrongType:
		// bad_schema already says it; whether the label names an image
		// is unknown (it may, just not as a string).
	case !l.imagePresent:
		// With image_present false, whatever the label names is not used.
		reasons = append(reasons, validate.ReasonMissingImage)
		smp.Explain(validate.ReasonMissingImage, "image_present is false")
	case !l.imageNamed:
		reasons = append(reasons, validate.ReasonMissingImage)
		smp.Explain(validate.ReasonMissingImage, "the label has no image field")
	case !local:
		reasons = append(reasons, validate.ReasonPathEscape)
		smp.Explain(validate.ReasonPathEscape, fmt.Sprintf("image %q leaves %s/", l.image, run))
	default:
		if !pr.done {
			pr.w, pr.h, pr.reason, pr.detail, pr.err = s.probeImage(smp.ImagePath)
		}
		w, h, r, detail, err := pr.w, pr.h, pr.reason, pr.detail, pr.err
		if err != nil {
			return nil, err
		}
		if r != "" {
			reasons = append(reasons, r)
			smp.Explain(r, detail)
		} else {
			smp.Width, smp.Height, sized = w, h, true
		}
	}

	for _, b := range l.boxes {
		px, r := b.check(smp.Width, smp.Height, sized)
		if r != "" {
			reasons = append(reasons, r)
			smp.Explain(r, b.explain(r, smp.Width, smp.Height))
			continue
		}
		smp.ValidBoxes++
		if sized {
			smp.Boxes = append(smp.Boxes, sources.Box{X0: px[0], Y0: px[1], X1: px[2], Y1: px[3], Class: b.class})
		}
	}
	if l.hasList && l.entries == 0 {
		reasons = append(reasons, validate.ReasonEmpty)
		smp.Explain(validate.ReasonEmpty, "the label list is []")
	}
	smp.Reasons = validate.Normalize(reasons)
	return smp, nil
}

// check resolves a box to source pixels and checks it against an image of
// w x h (sized: the size is known; otherwise only what the label alone
// shows is checked).
func (b labelBox) check(w, h int, sized bool) (px [4]float64, r validate.Reason) {
	switch {
	case b.px != nil && sized:
		return validate.CheckPx(*b.px, w, h)
	case b.px != nil:
		return px, validate.CheckOrder(*b.px)
	case b.norm != nil && sized:
		return validate.NormToPx(*b.norm, w, h)
	case b.norm != nil:
		return px, validate.CheckNorm(*b.norm)
	}
	return px, validate.ReasonInvalidBBox
}

// explain says why check gave b reason r.
func (b labelBox) explain(r validate.Reason, w, h int) string {
	switch {
	case b.px != nil:
		return validate.ExplainBox("bbox_px", *b.px, r, w, h)
	case b.norm != nil && validate.CheckNorm(*b.norm) != "":
		return validate.ExplainBox("bbox_norm", *b.norm, r, 0, 0) // wrong before the image counts
	case b.norm != nil:
		return validate.ExplainBox("bbox_norm", *b.norm, r, w, h)
	}
	return "an entry with neither bbox_px nor bbox_norm"
}

// probeImage checks the image at rel (relative to the root) and reads its
// size from the header. Problems of the file are reasons; errors of the
// file system are errors.
func (s *Source) probeImage(rel string) (w, h int, r validate.Reason, detail string, err error) {
	w, h, r, detail, err = sources.ProbeImage(s.root, rel, s.opts.MaxImageBytes)
	if err != nil {
		return 0, 0, "", "", fmt.Errorf("capture: %w", err)
	}
	return w, h, r, detail, nil
}

// ReadImage returns the bytes of the sample's image, refusing files larger
// than Options.MaxImageBytes. Errors name the file.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	return sources.ReadImageFile(s, "capture", smp)
}

// ImageFile is the file holding smp's encoded image and the largest size
// ReadImage reads (sources.ImageFiler).
func (s *Source) ImageFile(smp *sources.Sample) (string, int64, error) {
	if smp.ImagePath == "" || !filepath.IsLocal(filepath.FromSlash(smp.ImagePath)) {
		return "", 0, fmt.Errorf("capture: sample %s has no readable image path %q", smp.LabelPath, smp.ImagePath)
	}
	return filepath.Join(s.root, filepath.FromSlash(smp.ImagePath)), s.opts.MaxImageBytes, nil
}

// Entries lists the runs of the last Scan, labels or not.
func (s *Source) Entries() []warehouse.SourceEntry { return s.entries }

// Extras: capture runs carry no per-sample extras.
func (s *Source) Extras() []sources.ExtraSpec { return nil }

// isLabelName reports whether a file in labels/ is a label: *.json, not
// hidden (editors and macOS leave ".name.json" files behind).
func isLabelName(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}
