// Package coco reads a COCO object detection dataset: an instances JSON
// file (the format of instances_train2017.json) and the folder its images
// are relative to. testdata/coco at the repository root is a small example
// with every kind of defect this package reports.
//
//	annotations/instances_demo.json   {"images": [...], "annotations": [...], "categories": [...]}
//	images/000101.jpg                 images[].file_name, relative to the image root
//
// # Reading the file
//
// The file is streamed through encoding/json's Decoder, top-level keys in
// any order (annotations may come before images; they are matched exactly,
// "Images" is some other key). Only what a build uses is kept: per image
// its id, file_name, width and height; per annotation its image_id,
// category_id, bbox and iscrowd (56 bytes with its image id and file
// position, stored in chunks of 65,536 and sorted in place by image id at
// the end: no second array of references; about 128 bytes per image; see
// TestHeldBytesPerAnnotation); the categories; info.description and
// info.version. segmentation, area, the annotation id, licenses and any
// other key are skipped as they are read, never held: values of unknown
// top-level keys token by token down to their second level, each deeper
// value as one read. Nothing is allocated from a count or size written in
// the file, and one entry (or one skipped value) larger than 64 MiB stops
// New instead of growing the decoder's buffer. A million annotations with
// polygons, 343 MB of JSON, are read and scanned in about 5 s on two
// cores with a peak RSS of about 120 MiB (BenchmarkPlanMillion).
//
// New fails, with an error naming the file, when the file is not a COCO
// instances document: not JSON, not an object, images, annotations or
// categories missing or not arrays, one of them or info listed twice,
// data after the object, an entry over the size limit; and when the class
// table is unusable: a category that is not an object, has no integer id
// or no string name, or repeats an id. Everything else is a reason on a
// sample.
//
// # Samples
//
// The whole file is one source entry (SourceIndex 0, Source and LabelPath
// the file's base name). Samples come in this order:
//
//  1. every images entry with a usable id (an integer 0..2^64-1), by id,
//     entries with the same id in file order; Frame is the id;
//  2. images entries without a usable id, in file order (Frame 0);
//  3. one placeholder per image id that annotations name and images does
//     not list, by id (Frame the id, no image): unknown_image, plus what
//     its annotations have (so nothing is lost and the summary counts it);
//  4. one placeholder, Frame 0, when some annotations have no usable
//     image_id (absent, not an integer 0..2^64-1, or the entry is not an
//     object): bad_schema; attributes.annotations_without_image counts them.
//
// ImagePath is file_name cleaned and slash-separated, relative to the
// image root; Width and Height come from the image file's header
// (sources.ImageSize, EXIF orientation applied), as the transform stage
// will decode it.
//
// # Reasons
//
//	bad_schema          an images entry that is not an object, has no
//	                    usable id, has no file_name (absent, null, not a
//	                    string) or a width or height of the wrong type
//	                    (they must be positive integers; absent or null
//	                    they are not checked); an annotation whose
//	                    category_id, bbox or iscrowd has the wrong type
//	                    (bbox: an array of four numbers; iscrowd: 0, 1,
//	                    false or true), or without category_id when it is
//	                    not a crowd annotation; the placeholder of step 4
//	missing_image       file_name is ""
//	path_escape         file_name is absolute or leaves the image root
//	                    ("../x.jpg"); symbolic links inside are followed
//	missing_file        the image does not exist or is not a regular file
//	decode_error        the image header cannot be read, or the file is
//	                    larger than Options.MaxImageBytes
//	image_size_mismatch width or height differs from the image's header
//	duplicate_image     an earlier images entry (in file order) has the
//	                    same id, or the same file_name after cleaning
//	unknown_image       the placeholder of step 3
//	invalid_bbox        a non-crowd annotation without bbox, with width or
//	                    height <= 0, or with a value that is not finite
//	bbox_out_of_bounds  the box [x, y, x+w, y+h] lies outside the image by
//	                    more than validate.BoundsTolerancePx (validate.CheckPx,
//	                    the rule of capture's bbox_px); within it, it is
//	                    clamped
//	unknown_class       a non-crowd annotation's category_id is not in
//	                    categories
//	empty               the image has no annotation other than crowd ones
//	crowd_skipped       warning: iscrowd annotations were not used as boxes
//
// A sample reports every problem it has, not just the first. A box that
// fails a check is not used; the sample's other boxes still are
// (ValidBoxes counts them), though an invalid reason keeps the sample out.
//
// Decisions where COCO says nothing:
//
//   - A later duplicate (same id) gets duplicate_image and its own file
//     checks but no annotations: the id's annotations belong to the first
//     entry. A later entry for an already listed file keeps its own
//     annotations (its id is its own) and gets duplicate_image.
//   - Crowd annotations are not boxes (iscrowd marks a group region, as
//     detectron2 and torchvision treat it): their bbox and category are
//     not checked, an image with nothing but crowd annotations is empty
//     (skip_empty drops it, as filter_empty_annotations would) and every
//     image with one gets crowd_skipped. attributes.crowd_annotations
//     counts them.
//   - Boxes are checked against the header's size when the image can be
//     read; otherwise (missing, escaping, undecodable) only the values are
//     checked, as capture does, and the listed width and height are not
//     used.
//   - Image ids are integers 0..2^64-1 (Frame holds them as they are). A
//     negative, fractional or string id is no id: the entry is a
//     bad_schema sample of step 2, and annotations naming such an id go to
//     the placeholder of step 4.
//   - Category ids are any int64, names any string (a name need not be
//     unique; a repeated name is logged). Classes is the categories list
//     by id. An empty list is allowed (logged): every box is then
//     unknown_class.
//   - The listed width and height are compared with the header's size
//     after EXIF orientation, which is what boxes refer to once decoded.
//   - Annotation ids are not read: a repeated one changes nothing.
//   - Keys inside an entry are matched as encoding/json matches struct
//     fields (case insensitively); a key repeated in an entry: the last
//     one wins.
//
// # Fingerprint
//
// Fingerprint lists the annotations file first, as "//annotations/" plus
// its base name with the SHA-256 of its content (a cleaned relative image
// path never starts with "/", so it cannot collide with one), then every
// image file a scan reads, in scan order, once each, relative to the image
// root: regular files (symbolic links followed) that exist. Fingerprint
// reads the annotations file again and fails if it is not what New read.
//
// A file the operating system refuses to read (permissions, I/O errors) is
// not a sample reason: Scan fails with an error naming it.
package coco

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "coco"

// Options tune a Source. Zero values mean the defaults.
type Options struct {
	// MaxImageBytes is the largest image file read; a larger one is
	// decode_error in Scan and an error in ReadImage. Default
	// sources.DefaultMaxImageBytes.
	MaxImageBytes int64
	// Logger receives warnings about the annotations file; nil discards.
	Logger *slog.Logger
}

// Source is one COCO instances file and its image root. New reads the
// whole file; Scan and Fingerprint read image files only.
type Source struct {
	annotations string // the file as given to New
	base        string // its base name: Sample.Source and LabelPath
	root        string // the image root
	opts        Options
	log         *slog.Logger
	doc         *document
	entries     []warehouse.SourceEntry // of the last Scan
}

var (
	_ sources.Source      = (*Source)(nil)
	_ sources.ClassLister = (*Source)(nil)
)

// New reads the instances file at annotations; imageRoot is the directory
// images[].file_name is relative to. It fails when the file cannot be read
// or is not a COCO instances document (see the package documentation).
func New(annotations, imageRoot string, opts Options) (*Source, error) {
	f, err := os.Open(annotations)
	if err != nil {
		return nil, fmt.Errorf("coco: annotations: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("coco: annotations: %w", err)
	} else if st.IsDir() {
		return nil, fmt.Errorf("coco: annotations %s is a directory, want an instances JSON file", annotations)
	}
	return newSource(f, annotations, imageRoot, opts)
}

// newSource reads the document from r; annotations names it.
func newSource(r io.Reader, annotations, imageRoot string, opts Options) (*Source, error) {
	st, err := os.Stat(imageRoot)
	if err != nil {
		return nil, fmt.Errorf("coco: image root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("coco: image root %s is not a directory", imageRoot)
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = sources.DefaultMaxImageBytes
	}
	if opts.MaxImageBytes < 0 {
		return nil, errors.New("coco: MaxImageBytes must not be negative")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	doc, err := parse(r)
	if err != nil {
		var de *docError
		if errors.As(err, &de) {
			return nil, fmt.Errorf("coco: %s: %w", annotations, err)
		}
		return nil, fmt.Errorf("coco: read %s: %w", annotations, err)
	}
	s := &Source{
		annotations: annotations,
		base:        filepath.Base(annotations),
		root:        imageRoot,
		opts:        opts,
		log:         log,
		doc:         doc,
	}
	s.warn()
	return s, nil
}

// warn logs what is odd about the document but not a reason.
func (s *Source) warn() {
	d := s.doc
	if len(d.cats) == 0 {
		s.log.Warn("coco: categories is empty: every box will be unknown_class", "file", s.annotations)
	}
	names := make(map[string]int64, len(d.cats))
	for _, k := range d.cats {
		if id, dup := names[k.Name]; dup {
			s.log.Warn("coco: two categories share a name", "file", s.annotations, "name", k.Name, "ids", fmt.Sprintf("%d, %d", id, k.ID))
			continue
		}
		names[k.Name] = k.ID
	}
	if d.badAnns > 0 {
		s.log.Warn("coco: annotations without a usable image_id (one bad_schema placeholder sample)", "file", s.annotations, "count", d.badAnns)
	}
	if len(d.unknown) > 0 {
		s.log.Warn("coco: annotations name images that images does not list (unknown_image placeholders)", "file", s.annotations, "ids", len(d.unknown))
	}
}

// Kind returns "coco".
func (s *Source) Kind() string { return Kind }

// Classes returns the categories ordered by id.
func (s *Source) Classes() []sources.ClassKey { return slices.Clone(s.doc.cats) }

// Entries describes the annotations file after a Scan: the counts of its
// arrays and info.description and info.version when present.
func (s *Source) Entries() []warehouse.SourceEntry { return s.entries }

// Extras: COCO images carry no per-sample extras.
func (s *Source) Extras() []sources.ExtraSpec { return nil }

// entry is the source entry of the file.
func (s *Source) entry() warehouse.SourceEntry {
	d := s.doc
	attrs := map[string]string{
		"file":              s.base,
		"images":            strconv.Itoa(len(d.images)),
		"annotations":       strconv.Itoa(d.nAnns),
		"categories":        strconv.Itoa(len(d.cats)),
		"crowd_annotations": strconv.Itoa(d.crowd),
	}
	if len(d.unknown) > 0 {
		attrs["unknown_image_ids"] = strconv.Itoa(len(d.unknown))
	}
	if d.badAnns > 0 {
		attrs["annotations_without_image"] = strconv.Itoa(d.badAnns)
	}
	if d.hasDesc {
		attrs["description"] = d.description
	}
	if d.hasVersion {
		attrs["version"] = d.version
	}
	return warehouse.SourceEntry{Index: 0, Name: s.base, Attributes: attrs}
}

// Scan calls fn for every sample in the order of the package
// documentation. Only image headers are read.
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	s.entries = []warehouse.SourceEntry{s.entry()}
	var seq int64
	emit := func(smp *sources.Sample) error {
		smp.Seq = seq
		seq++
		smp.Source, smp.SourceIndex, smp.LabelPath = s.base, 0, s.base
		return fn(smp)
	}
	d := s.doc
	for i := range d.images {
		if err := ctx.Err(); err != nil {
			return err
		}
		smp, err := s.imageSample(&d.images[i])
		if err != nil {
			return err
		}
		if err := emit(smp); err != nil {
			return err
		}
	}
	for _, id := range d.unknown {
		if err := ctx.Err(); err != nil {
			return err
		}
		smp := &sources.Sample{Frame: id}
		smp.Explain(validate.ReasonUnknownImage, fmt.Sprintf("annotations name image_id %d, which images does not list", id))
		lo, hi := d.group(id)
		reasons := s.annotate(smp, lo, hi, false, []validate.Reason{validate.ReasonUnknownImage})
		smp.Reasons = validate.Normalize(reasons)
		if err := emit(smp); err != nil {
			return err
		}
	}
	if d.badAnns > 0 {
		smp := &sources.Sample{}
		smp.Reject(validate.ReasonBadSchema, fmt.Sprintf("%d annotations without a usable image_id", d.badAnns))
		if err := emit(smp); err != nil {
			return err
		}
	}
	return nil
}

// imageSample turns one images entry into a sample.
func (s *Source) imageSample(im *imageRec) (*sources.Sample, error) {
	smp := &sources.Sample{Frame: im.id}
	var reasons []validate.Reason
	if im.flags&imgBadSchema != 0 {
		reasons = append(reasons, validate.ReasonBadSchema)
		smp.Explain(validate.ReasonBadSchema, fmt.Sprintf("images[%d]: id, file_name, width or height missing or of the wrong type", im.pos))
	}
	switch {
	case im.flags&imgDupID != 0:
		reasons = append(reasons, validate.ReasonDuplicateImage)
		smp.Explain(validate.ReasonDuplicateImage, fmt.Sprintf("images[%d]: id %d is listed a second time", im.pos, im.id))
	case im.flags&imgDupName != 0:
		reasons = append(reasons, validate.ReasonDuplicateImage)
		smp.Explain(validate.ReasonDuplicateImage, fmt.Sprintf("images[%d]: file_name %q is listed a second time", im.pos, im.name))
	}
	sized := false
	switch {
	case im.flags&imgNamed == 0:
		if im.flags&imgBadSchema == 0 {
			reasons = append(reasons, validate.ReasonMissingImage) // file_name is ""
			smp.Explain(validate.ReasonMissingImage, fmt.Sprintf("images[%d]: file_name is empty", im.pos))
		}
	case im.flags&imgLocal == 0:
		reasons = append(reasons, validate.ReasonPathEscape)
		smp.Explain(validate.ReasonPathEscape, fmt.Sprintf("images[%d]: file_name %q leaves the image folder", im.pos, im.name))
	default:
		smp.ImagePath = im.name
		w, h, r, detail, err := s.probeImage(im.name)
		if err != nil {
			return nil, err
		}
		if r != "" {
			reasons = append(reasons, r)
			smp.Explain(r, detail)
			break
		}
		smp.Width, smp.Height, sized = w, h, true
		if (im.declW != 0 && im.declW != int64(w)) || (im.declH != 0 && im.declH != int64(h)) {
			reasons = append(reasons, validate.ReasonImageSizeMismatch)
			smp.Explain(validate.ReasonImageSizeMismatch, fmt.Sprintf("images[%d] says %dx%d, the file's header %dx%d", im.pos, im.declW, im.declH, w, h))
		}
	}
	if im.flags&imgHasID != 0 && im.flags&imgDupID == 0 {
		lo, hi := s.doc.group(im.id)
		reasons = s.annotate(smp, lo, hi, sized, reasons)
	}
	smp.Reasons = validate.Normalize(reasons)
	return smp, nil
}

// annotate checks the annotations of one image and adds its boxes to smp:
// resolved against the image when sized, checked on their own otherwise.
func (s *Source) annotate(smp *sources.Sample, lo, hi int, sized bool, reasons []validate.Reason) []validate.Reason {
	boxes, crowd := 0, false
	for i := lo; i < hi; i++ {
		a := s.doc.anns.at(i)
		if a.flags&annBadSchema != 0 {
			reasons = append(reasons, validate.ReasonBadSchema)
			smp.Explain(validate.ReasonBadSchema, fmt.Sprintf("annotation #%d (of those with an image_id, from 0): a field is missing or of the wrong type", a.idx))
			if a.flags&annCrowd == 0 {
				boxes++
			}
			continue
		}
		if a.flags&annCrowd != 0 {
			crowd = true
			continue
		}
		boxes++
		var px [4]float64
		ci, classR, boxR := s.checkBox(a, sized, smp.Width, smp.Height, &px)
		switch classR {
		case validate.ReasonBadSchema:
			reasons = append(reasons, classR)
			smp.Explain(classR, fmt.Sprintf("annotation #%d (of those with an image_id, from 0): no category_id", a.idx))
		case validate.ReasonUnknownClass:
			reasons = append(reasons, classR)
			smp.Explain(classR, fmt.Sprintf("annotation #%d (of those with an image_id, from 0): category_id %d is not in categories", a.idx, a.cat))
		}
		if boxR != "" {
			reasons = append(reasons, boxR)
			smp.Explain(boxR, fmt.Sprintf("annotation #%d (of those with an image_id, from 0): %s", a.idx, explainBBox(a, boxR, smp.Width, smp.Height)))
		}
		if classR != "" || boxR != "" {
			continue
		}
		smp.ValidBoxes++
		if sized {
			smp.Boxes = append(smp.Boxes, sources.Box{X0: px[0], Y0: px[1], X1: px[2], Y1: px[3], Class: s.doc.cats[ci]})
		}
	}
	if boxes == 0 {
		reasons = append(reasons, validate.ReasonEmpty)
		smp.Explain(validate.ReasonEmpty, "no annotations for this image")
	}
	if crowd {
		reasons = append(reasons, validate.ReasonCrowdSkipped)
		smp.Explain(validate.ReasonCrowdSkipped, "iscrowd annotations are not used as boxes")
	}
	return reasons
}

// checkBox checks a non-crowd annotation of the right types: its class
// (classR: bad_schema without category_id, unknown_class outside the
// categories; ci is its index in the class table otherwise) and its box
// (boxR, px as boxReason).
func (s *Source) checkBox(a *annotation, sized bool, w, h int, px *[4]float64) (ci int, classR, boxR validate.Reason) {
	if a.flags&annCat == 0 {
		classR = validate.ReasonBadSchema
	} else if i, known := s.doc.catIndex[a.cat]; !known {
		classR = validate.ReasonUnknownClass
	} else {
		ci = i
	}
	return ci, classR, boxReason(a, sized, w, h, px)
}

// LabelBox is one annotation of an image as Scan judged it, for a viewer
// that draws a rejected sample's label: the box as listed (corners
// x, y, x+w, y+h; HasBox false without a usable bbox), its class and what
// was wrong with it (none for a box Scan used). Crowd annotations are not
// boxes and are not listed.
type LabelBox struct {
	Corners [4]float64
	HasBox  bool
	Class   sources.ClassKey // the category; only ID for an unknown one
	Reasons []validate.Reason
}

// ImageLabel lists the annotations of image id, in file order, checked as
// Scan checks them against a w x h image (w or h 0: the image size is
// unknown and only the values are checked). It reads nothing: New has
// the annotations.
func (s *Source) ImageLabel(id uint64, w, h int) []LabelBox {
	sized := w > 0 && h > 0
	var out []LabelBox
	lo, hi := s.doc.group(id)
	for i := lo; i < hi; i++ {
		a := s.doc.anns.at(i)
		if a.flags&annCrowd != 0 {
			continue
		}
		lb := LabelBox{HasBox: a.flags&annBBox != 0, Class: sources.ClassKey{ID: a.cat, HasID: a.flags&annCat != 0}}
		if lb.HasBox {
			b := a.bbox
			lb.Corners = [4]float64{b[0], b[1], b[0] + b[2], b[1] + b[3]}
		}
		if a.flags&annBadSchema != 0 {
			lb.Reasons = []validate.Reason{validate.ReasonBadSchema}
			out = append(out, lb)
			continue
		}
		var px [4]float64
		ci, classR, boxR := s.checkBox(a, sized, w, h, &px)
		if classR == "" {
			lb.Class = s.doc.cats[ci]
		}
		for _, r := range []validate.Reason{classR, boxR} {
			if r != "" {
				lb.Reasons = append(lb.Reasons, r)
			}
		}
		out = append(out, lb)
	}
	return out
}

// boxReason checks an annotation's bbox [x, y, w, h]: as corners
// [x, y, x+w, y+h] with validate.CheckPx against a w x h image when sized
// (px gets the clamped box), with validate.CheckOrder otherwise.
func boxReason(a *annotation, sized bool, w, h int, px *[4]float64) validate.Reason {
	if a.flags&annBBox == 0 {
		return validate.ReasonInvalidBBox
	}
	b := a.bbox
	if !(b[2] > 0) || !(b[3] > 0) {
		return validate.ReasonInvalidBBox // NaN fails too
	}
	corners := [4]float64{b[0], b[1], b[0] + b[2], b[1] + b[3]}
	if !sized {
		return validate.CheckOrder(corners)
	}
	c, r := validate.CheckPx(corners, w, h)
	*px = c
	return r
}

// probeImage checks the image at rel (relative to the root) and reads its
// size from the header. Problems of the file are reasons; errors of the
// file system are errors.
func (s *Source) probeImage(rel string) (w, h int, r validate.Reason, detail string, err error) {
	w, h, r, detail, err = sources.ProbeImage(s.root, rel, s.opts.MaxImageBytes)
	if err != nil {
		return 0, 0, "", "", fmt.Errorf("coco: %w", err)
	}
	return w, h, r, detail, nil
}

// explainBBox says why boxReason gave a reason r: the bbox as listed
// ([x, y, width, height]) and what is wrong with it.
func explainBBox(a *annotation, r validate.Reason, w, h int) string {
	if a.flags&annBBox == 0 {
		return "no bbox"
	}
	b := a.bbox
	listed := "bbox " + validate.FormatBox(b)
	switch {
	case !(b[2] > 0):
		return listed + ": width is not > 0"
	case !(b[3] > 0):
		return listed + ": height is not > 0"
	}
	return validate.ExplainBox(listed+" as corners", [4]float64{b[0], b[1], b[0] + b[2], b[1] + b[3]}, r, w, h)
}

// ReadImage returns the bytes of the sample's image, refusing files larger
// than Options.MaxImageBytes. Errors name the file.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	return sources.ReadImageFile(s, "coco", smp)
}

// ImageFile is the file holding smp's encoded image and the largest size
// ReadImage reads (sources.ImageFiler).
func (s *Source) ImageFile(smp *sources.Sample) (string, int64, error) {
	if smp.ImagePath == "" || !filepath.IsLocal(filepath.FromSlash(smp.ImagePath)) {
		return "", 0, fmt.Errorf("coco: sample %s #%d has no readable image path %q", s.base, smp.Frame, smp.ImagePath)
	}
	return filepath.Join(s.root, filepath.FromSlash(smp.ImagePath)), s.opts.MaxImageBytes, nil
}
