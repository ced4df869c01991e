package viewer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"warehouse-etl/analytics/records"
	"warehouse-etl/sources"
	"warehouse-etl/sources/coco"
	"warehouse-etl/sources/registry"
	"warehouse-etl/sources/yolo"
	"warehouse-etl/warehouse"
)

// A rejected sample's label and, for episode sources, its frame are not in
// the version: samples.jsonl says where the sample came from, the source
// package knows how to read it. The viewer opens the source again (its
// settings from the version recipe's source.* keys, its root the dataset
// root) and asks it, so that a refused box is drawn where the build saw it
// and a frame is decoded by the reader the build used:
//
//	coco    ImageLabel of each rejected image, collected once in the
//	        background and the annotations file let go: what is kept is
//	        the annotations of rejected samples only (maxLabelBoxes)
//	yolo    LabelLines of the sample's label file, read when asked
//	kdb,    one Scan in the background keeps the locator of each rejected
//	wshard, sample that has one (its frame's place in its container);
//	roverd  ReadImage then reads that frame as the build read kept ones
//
// For episode sources the pass checks that the scan still matches
// samples.jsonl (each rejected sample's run, frame and image path); if not,
// the dataset changed since the build and rejected frames are shown without
// a picture. A COCO image is known by its id (the sample's frame).

// maxLabelBoxes bounds the COCO annotations the viewer keeps for rejected
// samples; past it, the later rejected samples are shown without boxes.
const maxLabelBoxes = 1 << 20

// episodeKinds are the source kinds whose frames live in container files.
var episodeKinds = map[string]bool{"kdb": true, "wshard": true, "roverd": true}

// datasetSource is what the background pass found.
type datasetSource struct {
	src      sources.Source            // yolo and episode kinds: the open source
	locators map[int32]string          // episode kinds: rejected seq -> locator
	coco     map[int32][]coco.LabelBox // coco: rejected seq -> its annotations
}

// recipeSettings rebuilds the source settings of a version from its
// recipe's source.* keys (each a Go-quoted string): strings as they are,
// lists comma-separated, numbers and booleans parsed.
func recipeSettings(m *warehouse.Manifest) (sources.Settings, error) {
	k, ok := registry.Lookup(m.Source.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown source kind %q", m.Source.Kind)
	}
	recipe, err := records.ParseRecipe(m.VersionRecipe)
	if err != nil {
		return nil, fmt.Errorf("version recipe: %w", err)
	}
	vals := map[string]string{}
	for key, v := range recipe {
		if name, isSource := strings.CutPrefix(key, "source."); isSource {
			vals[name] = v
		}
	}
	s := k.NewSettings()
	t := reflect.TypeOf(s).Elem()
	obj := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, has := vals[name]
		if !has || name == "" || name == "-" {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.String:
			obj[name] = v
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			obj[name] = []string{}
			if v != "" {
				obj[name] = strings.Split(v, ",")
			}
		case f.Type.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("version recipe: source.%s: %w", name, err)
			}
			obj[name] = b
		case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Float64:
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("version recipe: source.%s: %w", name, err)
			}
			obj[name] = x
		default:
			return nil, fmt.Errorf("version recipe: source.%s: a setting of type %s", name, f.Type)
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("version recipe: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("version recipe: %w", err)
	}
	return s, nil
}

// configPath resolves a path of the build's config other than the root
// (COCO's annotations file) as the recipe records it: an absolute one as it
// is; a relative one was relative to the config file, like the dataset
// root as the manifest spells it (written), which the viewer found at
// actual: the path from one to the other is the same. "" when that cannot
// be worked out (a source then fails to open).
func configPath(written, actual, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	w := filepath.FromSlash(written)
	if filepath.IsAbs(w) || actual == "" {
		return ""
	}
	rel, err := filepath.Rel(filepath.Clean(w), filepath.Clean(filepath.FromSlash(p)))
	if err != nil {
		return ""
	}
	return filepath.Join(actual, rel)
}

// labelSource runs the background pass once and returns what it found;
// nil when the kind needs none or the source could not be opened.
func (v *Viewer) labelSource() *datasetSource {
	v.srcOnce.Do(func() {
		kind := v.m.Source.Kind
		if v.sourceRoot == "" || (kind != coco.Kind && kind != yolo.Kind && !episodeKinds[kind]) {
			return
		}
		ds, err := v.openLabelSource()
		if err != nil {
			v.log.Info("rejected samples are shown without their label's boxes or frame: the source does not open as the recipe says", "kind", kind, "err", err)
			return
		}
		v.src = ds
	})
	return v.src
}

func (v *Viewer) openLabelSource() (*datasetSource, error) {
	ix, err := v.sampleIndex()
	if err != nil {
		return nil, err
	}
	settings, err := recipeSettings(v.m)
	if err != nil {
		return nil, err
	}
	// The build reported what is wrong with the dataset: opening it again
	// says nothing new.
	resolve := func(p string) string { return configPath(v.m.DatasetRoot, v.sourceRoot, p) }
	src, err := settings.Open(v.sourceRoot, resolve, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	ds := &datasetSource{src: src}
	keep := false
	defer func() {
		if !keep {
			closeSource(src)
		}
	}()
	switch s := src.(type) {
	case *coco.Source:
		ds.coco = map[int32][]coco.LabelBox{}
		n := 0
		for seq := range int32(ix.len()) {
			if ix.index[seq] >= 0 {
				continue
			}
			if err := v.srcCtx.Err(); err != nil {
				return nil, err
			}
			rec, err := ix.record(v.samples, int(seq))
			if err != nil {
				return nil, err
			}
			if rec.ImagePath == "" {
				continue
			}
			boxes := s.ImageLabel(rec.Frame, int(rec.Width), int(rec.Height))
			if n += len(boxes); n > maxLabelBoxes {
				v.log.Info("more refused annotations than the viewer keeps: later rejected samples are shown without boxes", "limit", maxLabelBoxes)
				break
			}
			ds.coco[seq] = boxes
		}
		// The parsed annotations file is let go.
		ds.src = nil
		return ds, nil
	case *yolo.Source:
		keep = true
		return ds, nil
	}
	ds.locators = map[int32]string{}
	err = src.Scan(v.srcCtx, func(smp *sources.Sample) error {
		seq := smp.Seq
		if seq < 0 || seq >= int64(ix.len()) || ix.source[seq] != smp.SourceIndex {
			return fmt.Errorf("the scan's sample %d is not line %d of %s: the dataset changed since the build", seq, seq+1, warehouse.SamplesName)
		}
		// A sample without a frame size has no frame to read (a camera
		// that failed to open: its locator names the camera only).
		if ix.index[seq] >= 0 || smp.Locator == "" || smp.Width <= 0 || smp.Height <= 0 {
			return nil
		}
		rec, err := ix.record(v.samples, int(seq))
		if err != nil {
			return err
		}
		if rec.Frame != smp.Frame || rec.ImagePath != smp.ImagePath || rec.Source != smp.Source {
			return fmt.Errorf("the scan's sample %d (%s frame %d) is not line %d of %s: the dataset changed since the build", seq, smp.Source, smp.Frame, seq+1, warehouse.SamplesName)
		}
		ds.locators[int32(seq)] = smp.Locator
		return nil
	})
	if err != nil {
		return nil, err
	}
	keep = true
	return ds, nil
}

func closeSource(src sources.Source) {
	if c, ok := src.(io.Closer); ok {
		c.Close()
	}
}

// hasEpisodeFrame says whether a rejected episode sample's frame can be
// read: the pass found its locator (this waits for the pass).
func (v *Viewer) hasEpisodeFrame(seq int) bool {
	ds := v.labelSource()
	if ds == nil || ds.locators == nil {
		return false
	}
	_, ok := ds.locators[int32(seq)]
	return ok
}

// episodeFrame reads a rejected episode sample's frame through its source's
// ReadImage, as the pipeline reads a kept one, and decodes it, its size
// checked first.
func (v *Viewer) episodeFrame(seq int, ix *sampleIndex) (image.Image, error) {
	ds := v.labelSource()
	if ds == nil || ds.locators == nil {
		return nil, errNoImage
	}
	loc, ok := ds.locators[int32(seq)]
	if !ok {
		return nil, errNoImage
	}
	rec, err := ix.record(v.samples, seq)
	if err != nil {
		return nil, err
	}
	smp := &sources.Sample{Seq: rec.Seq, Source: rec.Source, SourceIndex: int32(rec.SourceIndex), Frame: rec.Frame,
		ImagePath: rec.ImagePath, Width: int(rec.Width), Height: int(rec.Height), Locator: loc}
	im, err := ds.src.ReadImage(smp)
	if err != nil {
		v.log.Debug("episode frame not readable", "seq", seq, "err", err)
		return nil, fmt.Errorf("%w: %v", errNoImage, err)
	}
	return decodeSourceImage(im)
}

// decodeSourceImage turns what a source's ReadImage returned into an
// image: encoded bytes decoded after their header says the size is at most
// maxSourcePixels, raw RGB rows wrapped after their size is checked.
func decodeSourceImage(im sources.Image) (image.Image, error) {
	if im.Encoded != nil {
		return decodeBounded(bytes.NewReader(im.Encoded))
	}
	w, h, stride := im.Width, im.Height, im.Stride
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxSourcePixels || stride < 3*w || len(im.Pixels) < stride*(h-1)+3*w {
		return nil, errNoImage
	}
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		row := im.Pixels[y*stride:]
		for x := range w {
			out.SetRGBA(x, y, color.RGBA{row[3*x], row[3*x+1], row[3*x+2], 255})
		}
	}
	return out, nil
}
