// Package yolo reads Ultralytics YOLO detection datasets: a data.yaml that
// names the class table and the folders (or list files) of each split, and
// one text label file per image. testdata/yolo at the repository root is a
// small example with every kind of defect this package reports.
//
//	<root>/data.yaml          path, train, val, test, names (nc, kpt_shape)
//	<path>/images/train/a.jpg any image whose extension Ultralytics reads
//	<path>/labels/train/a.txt "class cx cy w h" per line, fractions of the image
//
// # data.yaml
//
// New takes the folder holding data.yaml or the YAML file itself. Keys, as
// Ultralytics' check_det_dataset reads them:
//
//	path        the dataset root; absent, null or "": the YAML's folder; a
//	            relative path is relative to the YAML's folder (Ultralytics
//	            tries the working directory and then its datasets folder)
//	train, val, test
//	            a directory, a list file, or a list of them, relative to
//	            path. "val" falls back to "validation" as in Ultralytics. An
//	            entry starting with "../" that does not exist is tried
//	            without it (the legacy rule for YOLOv5 layouts, and what
//	            Roboflow exports need). Every entry must lie inside the
//	            dataset root.
//	names       a list, or a map of index to name whose keys (integers, or
//	            strings of integers) are exactly 0..n-1: a gap is an error,
//	            as in Ultralytics' check_class_names
//	nc          the class count; must equal the length of names; alone it
//	            means names class_0 .. class_<nc-1>
//	kpt_shape   [K, D] of a pose dataset: label lines carry K*D keypoint
//	            values after the box, which are checked as numbers and
//	            otherwise not used
//
// Other keys are ignored. New fails with an error naming the file when the
// YAML does not parse (or holds more than one document, or more than
// MaxDataYAMLBytes), a key it reads appears twice, the split is absent, an
// entry does not exist or leaves the dataset root, or the class table makes
// no sense. Aliases are read where they stand and never expanded.
//
// # Images
//
// One source (Sample.Source, SourceIndex, one entry of Entries) per entry of
// the split, in YAML order. A directory gives every file below it, at any
// depth, whose extension (any case) is in Ultralytics' IMG_FORMATS, skipping
// names that start with "." as Python's glob does; symbolic links to files
// are followed, to directories not. A list file gives one image per line:
// "./x" relative to the list file's folder (as Ultralytics), an absolute
// path as it is, anything else relative to the dataset root (Ultralytics
// uses the working directory); lines are trimmed, blank lines and entries
// without an image extension are skipped (counted as skipped_entries). The
// images of a source are in natural order of their path relative to the
// dataset root; Sample.Frame is the position. A split without any image is
// an error of Scan, as in Ultralytics.
//
// # Labels
//
// An image's label is found by Ultralytics' img2label_paths rule (see
// labelPath) and parsed as the parser's parse method describes: boxes,
// polygons (converted to their bounding box as Ultralytics does), pose
// lines; exact duplicate lines are dropped as Ultralytics drops them, with
// a warning in the log and the count in Entries. A box is
// (cx - w/2) * W, (cy - h/2) * H, (cx + w/2) * W, (cy + h/2) * H in the pixels
// of the image's header (EXIF orientation applied), then checked and
// clamped by validate.CheckPx: up to validate.BoundsTolerancePx outside the
// image is clamped, more is bbox_out_of_bounds. When the image size is not
// known, boxes are checked with validate.CheckNorm instead (no tolerance).
// Every image is one sample; its reasons:
//
//	path_escape         a list file entry outside the dataset root (image_path is "")
//	missing_file        a listed image that does not exist or is not a regular
//	                    file, or a symbolic link that leads nowhere
//	decode_error        the image header does not decode, or the file is larger
//	                    than Options.MaxImageBytes
//	duplicate_image     the image was already a sample of this split (a list
//	                    naming it twice, or overlapping directories)
//	empty               no label file, or a label file without any line
//	bad_schema          a malformed line, or a label file larger than
//	                    Options.MaxLabelBytes
//	unknown_class       a class id that is negative or not below len(names)
//	invalid_bbox        w or h not > 0, a value not finite, a flat polygon
//	bbox_out_of_bounds  a box outside the image beyond the tolerance
//
// A label or image that the operating system refuses to read (permissions,
// I/O errors) is not a sample reason: Scan fails with an error naming it.
package yolo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "yolo"

// Default size limits of Options.
const (
	// DefaultMaxLabelBytes: a label line is about 40 bytes, a polygon a few
	// hundred; 4 MiB is tens of thousands of objects.
	DefaultMaxLabelBytes int64 = 4 << 20
	DefaultMaxImageBytes       = sources.DefaultMaxImageBytes
)

// DataYAML is the file New looks for in a folder.
const DataYAML = "data.yaml"

// splitNames are the values of Options.Split.
var splitNames = []string{"train", "val", "test"}

// imageFormats are Ultralytics' IMG_FORMATS, the union over its recent
// releases (pfm was dropped, avif, heif, jp2 and jpeg2000 added). A file
// with one of them that this module cannot decode is decode_error rather
// than silently left out.
var imageFormats = map[string]bool{
	"avif": true, "bmp": true, "dng": true, "heic": true, "heif": true, "jp2": true, "jpeg": true,
	"jpeg2000": true, "jpg": true, "mpo": true, "pfm": true, "png": true, "tif": true, "tiff": true, "webp": true,
}

// isImageName reports whether a file name has an image extension, compared
// without case.
func isImageName(name string) bool {
	i := strings.LastIndexByte(name, '.')
	return i >= 0 && imageFormats[strings.ToLower(name[i+1:])]
}

// Options tune a Source. Zero values mean the defaults.
type Options struct {
	// Split is the split to read: "train" (default when ""), "val" or
	// "test".
	Split string
	// MaxImageBytes is the largest image file read; a larger one is
	// decode_error in Scan and an error in ReadImage. Default
	// DefaultMaxImageBytes.
	MaxImageBytes int64
	// MaxLabelBytes is the largest label file read; a larger one is
	// bad_schema, checked before reading. Default DefaultMaxLabelBytes.
	MaxLabelBytes int64
	// Logger receives warnings (duplicate label lines dropped, list
	// entries skipped, legacy keys and paths used); nil discards.
	Logger *slog.Logger
}

// splitEntry is one directory or list file of the split.
type splitEntry struct {
	name string // relative to the dataset root, slash-separated ("." for the root)
	abs  string // the path on disk
	list bool   // a list file rather than a directory
}

// Source scans one split of a YOLO dataset. New reads data.yaml once; every
// Scan and Fingerprint lists the split's directories and list files again.
type Source struct {
	yamlPath string // data.yaml as found from New's root
	root     string // the dataset root (data.yaml's path)
	split    string // the YAML key read: train, val, validation or test
	entries  []splitEntry
	classes  []sources.ClassKey
	kptK     int
	kptD     int
	opts     Options
	log      *slog.Logger
	scanned  []warehouse.SourceEntry // the entries of the last Scan
}

var (
	_ sources.Source      = (*Source)(nil)
	_ sources.ClassLister = (*Source)(nil)
)

// New reads the data.yaml at root (a folder holding data.yaml, or the YAML
// file) and checks the split's entries and the class table. See the package
// documentation for what is an error here.
func New(root string, opts Options) (*Source, error) {
	if opts.Split == "" {
		opts.Split = "train"
	}
	if !slices.Contains(splitNames, opts.Split) {
		return nil, fmt.Errorf("yolo: split %q: want one of %s", opts.Split, strings.Join(splitNames, ", "))
	}
	if opts.MaxLabelBytes == 0 {
		opts.MaxLabelBytes = DefaultMaxLabelBytes
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	if opts.MaxLabelBytes < 0 || opts.MaxImageBytes < 0 {
		return nil, errors.New("yolo: size limits must not be negative")
	}
	s := &Source{opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if s.yamlPath, err = findDataYAML(root); err != nil {
		return nil, err
	}
	data, tooBig, err := sources.ReadCapped(s.yamlPath, MaxDataYAMLBytes)
	switch {
	case err != nil:
		return nil, fmt.Errorf("yolo: %w", err)
	case tooBig:
		return nil, fmt.Errorf("yolo: %s is larger than %d bytes: not a dataset description", s.yamlPath, MaxDataYAMLBytes)
	}
	d, err := parseDataYAML(data)
	if err != nil {
		return nil, fmt.Errorf("yolo: %s: %w", s.yamlPath, err)
	}

	s.root = filepath.Dir(s.yamlPath)
	if d.path != "" {
		s.root = filepath.Join(s.root, d.path)
		if filepath.IsAbs(d.path) {
			s.root = filepath.Clean(d.path)
		}
	}
	if st, err := os.Stat(s.root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("yolo: %s: dataset root (path) %s is not a readable directory", s.yamlPath, s.root)
	}

	s.split = opts.Split
	written, ok := d.splits[s.split]
	if !ok && s.split == "val" {
		if written, ok = d.splits["validation"]; ok {
			s.split = "validation"
			s.log.Warn("data.yaml has no val split: reading validation", "file", s.yamlPath)
		}
	}
	if !ok {
		return nil, fmt.Errorf("yolo: %s: no %s split (the %q key is absent or empty)", s.yamlPath, opts.Split, opts.Split)
	}
	for _, w := range written {
		e, err := s.resolveEntry(w)
		if err != nil {
			return nil, fmt.Errorf("yolo: %s: %s: %w", s.yamlPath, s.split, err)
		}
		s.entries = append(s.entries, e)
	}

	s.classes = make([]sources.ClassKey, len(d.names))
	for i, n := range d.names {
		s.classes[i] = sources.ClassKey{ID: int64(i), HasID: true, Name: n}
	}
	s.kptK, s.kptD = d.kptK, d.kptD
	return s, nil
}

// findDataYAML returns the YAML file New reads for root.
func findDataYAML(root string) (string, error) {
	st, err := os.Stat(root)
	if err != nil {
		return "", fmt.Errorf("yolo: dataset: %w", err)
	}
	if !st.IsDir() {
		return root, nil
	}
	p := filepath.Join(root, DataYAML)
	st, err = os.Stat(p)
	switch {
	case err == nil && st.Mode().IsRegular():
		return p, nil
	case err != nil && !sources.NotFound(err):
		return "", fmt.Errorf("yolo: %w", err)
	}
	var others []string
	if list, err := os.ReadDir(root); err == nil {
		for _, e := range list {
			if ext := path.Ext(e.Name()); ext == ".yaml" || ext == ".yml" {
				others = append(others, e.Name())
			}
		}
	}
	msg := fmt.Sprintf("yolo: %s holds no %s file", root, DataYAML)
	if len(others) > 0 {
		msg += fmt.Sprintf(" (name the YAML file itself as the root: %s)", strings.Join(others, ", "))
	}
	return "", errors.New(msg)
}

// resolveEntry turns one split entry as written into a directory or list
// file inside the dataset root.
func (s *Source) resolveEntry(written string) (splitEntry, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(s.root, p)
	}
	p := abs(written)
	st, err := os.Stat(p)
	if err != nil && sources.NotFound(err) && strings.HasPrefix(written, "../") {
		if st2, err2 := os.Stat(abs(written[3:])); err2 == nil {
			s.log.Warn("split entry not found, using it without its leading ../ (legacy YOLOv5 rule)",
				"file", s.yamlPath, "entry", written)
			p, st, err = abs(written[3:]), st2, nil
		}
	}
	rel, relErr := filepath.Rel(s.root, p)
	switch {
	case err != nil && sources.NotFound(err):
		return splitEntry{}, fmt.Errorf("%s (%s) does not exist", written, p)
	case err != nil:
		return splitEntry{}, err
	case relErr != nil || !filepath.IsLocal(rel):
		return splitEntry{}, fmt.Errorf("%s (%s) is outside the dataset root %s", written, p, s.root)
	case !st.IsDir() && !st.Mode().IsRegular():
		return splitEntry{}, fmt.Errorf("%s (%s) is neither a directory nor a list file", written, p)
	}
	return splitEntry{name: filepath.ToSlash(rel), abs: p, list: !st.IsDir()}, nil
}

// Kind returns "yolo".
func (s *Source) Kind() string { return Kind }

// Classes returns the names of data.yaml in index order: ID is the index.
func (s *Source) Classes() []sources.ClassKey { return slices.Clone(s.classes) }

// Extras: YOLO datasets carry no per-sample extras.
func (s *Source) Extras() []sources.ExtraSpec { return nil }

// Entries lists the split's directories and list files as the last Scan
// saw them. Attributes: kind (directory or list), images (samples),
// labels (label files found), missing_labels, empty_labels,
// duplicate_lines (label lines dropped as duplicates) and, for a list
// file, skipped_entries (lines that name no image file).
func (s *Source) Entries() []warehouse.SourceEntry { return s.scanned }

// imageRef is one image of a split entry.
type imageRef struct {
	rel    string // relative to the dataset root, slash-separated; "" when escaping
	key    string // the sort key: rel, or the entry as written when escaping
	escape bool
}

// entryStats counts what Entries reports for one split entry.
type entryStats struct {
	images, labels, missingLabels, emptyLabels, duplicateLines, skipped int
}

// Scan calls fn for every image of the split (see the package
// documentation for the order and the reasons).
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	s.scanned = nil
	scanned := make([]warehouse.SourceEntry, 0, len(s.entries))
	seen := map[string]bool{}
	p := newParser(len(s.classes), s.kptK, s.kptD)
	var seq int64
	for i, e := range s.entries {
		var st entryStats
		imgs, err := s.images(ctx, e, &st)
		if err != nil {
			return err
		}
		for frame, img := range imgs {
			if err := ctx.Err(); err != nil {
				return err
			}
			smp, err := s.sample(p, img, seen, &st)
			if err != nil {
				return err
			}
			smp.Seq, smp.Source, smp.SourceIndex, smp.Frame = seq, e.name, int32(i), uint64(frame)
			seq++
			st.images++
			if err := fn(smp); err != nil {
				return err
			}
		}
		scanned = append(scanned, s.entry(i, e, st))
	}
	s.scanned = scanned
	if seq == 0 {
		return fmt.Errorf("yolo: %s: the %s split holds no images (extensions %s)", s.yamlPath, s.split, strings.Join(sortedFormats(), ", "))
	}
	return nil
}

// entry describes one split entry for Entries.
func (s *Source) entry(i int, e splitEntry, st entryStats) warehouse.SourceEntry {
	kind := "directory"
	if e.list {
		kind = "list"
	}
	a := map[string]string{
		"split":           s.split,
		"kind":            kind,
		"images":          strconv.Itoa(st.images),
		"labels":          strconv.Itoa(st.labels),
		"missing_labels":  strconv.Itoa(st.missingLabels),
		"empty_labels":    strconv.Itoa(st.emptyLabels),
		"duplicate_lines": strconv.Itoa(st.duplicateLines),
	}
	if e.list {
		a["skipped_entries"] = strconv.Itoa(st.skipped)
	}
	return warehouse.SourceEntry{Index: i, Name: e.name, Attributes: a}
}

// sample checks one image and its label.
func (s *Source) sample(p *parser, img imageRef, seen map[string]bool, st *entryStats) (*sources.Sample, error) {
	smp := &sources.Sample{}
	if img.escape {
		smp.Reject(validate.ReasonPathEscape, fmt.Sprintf("the image list names %q, outside the dataset root", img.rel))
		return smp, nil
	}
	var reasons []validate.Reason
	smp.ImagePath = img.rel
	if seen[img.rel] {
		reasons = append(reasons, validate.ReasonDuplicateImage)
		smp.Explain(validate.ReasonDuplicateImage, img.rel+" is listed a second time")
	}
	seen[img.rel] = true
	w, h, r, detail, err := s.probeImage(img.rel)
	if err != nil {
		return nil, err
	}
	sized := r == ""
	if sized {
		smp.Width, smp.Height = w, h
	} else {
		reasons = append(reasons, r)
		smp.Explain(r, detail)
	}

	labelRel := labelPath(img.rel)
	data, found, tooBig, err := s.readLabel(labelRel)
	switch {
	case err != nil:
		return nil, err
	case !found:
		st.missingLabels++
		reasons = append(reasons, validate.ReasonEmpty)
		smp.Explain(validate.ReasonEmpty, "no label file "+labelRel)
	case tooBig:
		st.labels++
		smp.LabelPath = labelRel
		reasons = append(reasons, validate.ReasonBadSchema)
		smp.Explain(validate.ReasonBadSchema, fmt.Sprintf("the label file is larger than %d bytes", s.opts.MaxLabelBytes))
	default:
		st.labels++
		smp.LabelPath = labelRel
		l := p.parse(string(data))
		if l.lines == 0 {
			st.emptyLabels++
			reasons = append(reasons, validate.ReasonEmpty)
			smp.Explain(validate.ReasonEmpty, fmt.Sprintf("%d-byte label file without a box line", len(data)))
		}
		if l.duplicates > 0 {
			st.duplicateLines += l.duplicates
			s.log.Warn("duplicate label lines dropped", "label", labelRel, "lines", l.duplicates)
		}
		reasons = append(reasons, l.reasons...)
		for r, d := range l.details {
			smp.Explain(r, d)
		}
		var rs []reasonDetail
		smp.Boxes, smp.ValidBoxes, rs = resolve(l.boxes, s.classes, w, h, sized)
		for _, rd := range rs {
			reasons = append(reasons, rd.reason)
			smp.Explain(rd.reason, rd.detail)
		}
	}
	smp.Reasons = validate.Normalize(reasons)
	return smp, nil
}

// reasonDetail is a reason with its cause in words.
type reasonDetail struct {
	reason validate.Reason
	detail string
}

// resolve checks a label's boxes against a w x h image when sized, and
// without the image (validate.CheckNorm) otherwise. It returns the boxes in
// pixels, clamped (none when not sized), how many boxes passed, and the
// reasons of those that did not. classes are the keys of the class ids,
// which parse has checked.
func resolve(boxes []labelBox, classes []sources.ClassKey, w, h int, sized bool) (px []sources.Box, valid int, reasons []reasonDetail) {
	for _, b := range boxes {
		if !sized {
			w, h = 0, 0
		}
		c, r := checkBounds(b.norm, w, h)
		var detail string
		switch {
		case r == "":
		case w > 0 && h > 0:
			detail = validate.ExplainBox("box in pixels", toPx(b.norm, w, h), r, w, h)
		default:
			detail = validate.ExplainBox("box", b.norm, r, 0, 0)
		}
		if r != "" {
			reasons = append(reasons, reasonDetail{r, detail})
			continue
		}
		valid++
		if sized {
			px = append(px, sources.Box{X0: c[0], Y0: c[1], X1: c[2], Y1: c[3], Class: classes[b.class]})
		}
	}
	return px, valid, reasons
}

// readLabel reads the label file at rel (relative to the root). A file that
// does not exist or is not a regular file is not found; one larger than
// MaxLabelBytes is tooBig, without data.
func (s *Source) readLabel(rel string) (data []byte, found, tooBig bool, err error) {
	abs := filepath.Join(s.root, filepath.FromSlash(rel))
	st, err := os.Stat(abs)
	switch {
	case err != nil && sources.NotFound(err):
		return nil, false, false, nil
	case err != nil:
		return nil, false, false, fmt.Errorf("yolo: label %s: %w", rel, err)
	case !st.Mode().IsRegular():
		return nil, false, false, nil
	}
	data, tooBig, err = sources.ReadCapped(abs, s.opts.MaxLabelBytes)
	switch {
	case err != nil && sources.NotFound(err):
		return nil, false, false, nil // removed since Stat
	case err != nil:
		return nil, false, false, fmt.Errorf("yolo: label %s: %w", rel, err)
	}
	return data, true, tooBig, nil
}

// probeImage checks the image at rel (relative to the root) and reads its
// size from the header. Problems of the file are reasons; errors of the
// file system are errors.
func (s *Source) probeImage(rel string) (w, h int, r validate.Reason, detail string, err error) {
	w, h, r, detail, err = sources.ProbeImage(s.root, rel, s.opts.MaxImageBytes)
	if err != nil {
		return 0, 0, "", "", fmt.Errorf("yolo: %w", err)
	}
	return w, h, r, detail, nil
}

// ReadImage returns the bytes of the sample's image, refusing files larger
// than Options.MaxImageBytes. Errors name the file.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	return sources.ReadImageFile(s, "yolo", smp)
}

// ImageFile is the file holding smp's encoded image and the largest size
// ReadImage reads (sources.ImageFiler).
func (s *Source) ImageFile(smp *sources.Sample) (string, int64, error) {
	if smp.ImagePath == "" || !filepath.IsLocal(filepath.FromSlash(smp.ImagePath)) {
		return "", 0, fmt.Errorf("yolo: sample %d has no readable image path %q", smp.Seq, smp.ImagePath)
	}
	return filepath.Join(s.root, filepath.FromSlash(smp.ImagePath)), s.opts.MaxImageBytes, nil
}

// images lists the images of one split entry in natural order of their
// path relative to the dataset root.
func (s *Source) images(ctx context.Context, e splitEntry, st *entryStats) ([]imageRef, error) {
	var out []imageRef
	var err error
	if e.list {
		out, err = s.listFile(e, st)
	} else {
		out, err = s.walk(ctx, e)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b imageRef) int { return sources.NaturalCompare(a.key, b.key) })
	return out, nil
}

// walk lists the image files below a split directory.
func (s *Source) walk(ctx context.Context, e splitEntry) ([]imageRef, error) {
	var out []imageRef
	// The trailing separator makes WalkDir follow the entry itself when it
	// is a symbolic link to a directory; links below it are not followed.
	top := e.abs + string(filepath.Separator)
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("yolo: %s: %w", s.split, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == top {
			return nil
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isImageName(name) {
			return nil
		}
		if !d.Type().IsRegular() {
			// A symbolic link is followed to a regular file, and kept
			// when it leads nowhere (missing_file, as Ultralytics lists
			// it too); a link to a directory and anything that is not a
			// file are left out.
			if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
				return nil
			}
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		out = append(out, imageRef{rel: rel, key: rel})
		return nil
	})
	return out, err
}
