package roverd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"warehouse-etl/sources"
	"warehouse-etl/sources/roverd/avi"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// cameraInfo is what ReadImage needs to reopen a dataset's camera.
type cameraInfo struct {
	dir           string // the camera sensor's folder
	channel       Channel
	n             int // frames used: the common length of ts and the image channel
	width, height int
}

// imageFile is the file frame k is read from, relative to the sensor.
func (c *cameraInfo) imageFile(k int) string {
	switch c.channel.Format {
	case FormatJPG:
		return c.channel.Name + "/" + blobName(k, "jpg")
	case FormatNPZ:
		return c.channel.Name + "/" + blobName(k, "npz")
	}
	return c.channel.Name
}

// cameraReader returns one frame's image; it is safe for concurrent use
// and holds no open file between calls.
type cameraReader interface {
	image(k int) (sources.Image, error)
	// size returns the frame size from the first readable header among
	// the first n frames.
	size(n int) (w, h int, err error)
}

// cameraPlan is a dataset's camera as Scan uses it.
type cameraPlan struct {
	info    *cameraInfo
	reader  cameraReader
	ts      []float64
	reasons []validate.Reason // on every sample
	details validate.Details  // their causes in words
	notes   []string          // truncation
	attrs   map[string]string // entry attributes
	empty   []bool            // frames whose chunk is empty (mjpg)
}

func (c *cameraPlan) emptyFrame(k int) bool { return k < len(c.empty) && c.empty[k] }

// imageRank orders image channels for the automatic choice; -1 is not an
// image channel that can be read frame by frame.
func imageRank(c Channel) int {
	switch c.Format {
	case FormatMJPG:
		return 0
	case FormatJPG:
		return 1
	case FormatRaw, FormatLZMAF, FormatNPZ:
		if _, _, _, ok := pixelShape(c); ok {
			return 2
		}
	}
	return -1
}

// pixelShape reads [H, W, 3], [H, W, 1] or [H, W] of type u1.
func pixelShape(c Channel) (w, h, channels int, ok bool) {
	if c.DType != (DType{'u', 1}) {
		return 0, 0, 0, false
	}
	switch {
	case len(c.Shape) == 2:
		return c.Shape[1], c.Shape[0], 1, true
	case len(c.Shape) == 3 && (c.Shape[2] == 3 || c.Shape[2] == 1):
		return c.Shape[1], c.Shape[0], c.Shape[2], true
	}
	return 0, 0, 0, false
}

// imageChannel picks the camera's image channel (see the package
// documentation).
func (s *Source) imageChannel(meta *Meta) (Channel, *failure) {
	if name := s.camera.channel; name != "" {
		c, err := meta.Channel(name)
		if err != nil {
			return Channel{}, classify(err, validate.ReasonMissingBlock)
		}
		if c.Format == FormatLZMA {
			return Channel{}, &failure{validate.ReasonDecodeError, fmt.Errorf("channel %s: format lzma is one .xz stream for the whole channel; frames cannot be read one at a time (store it as lzmaf)", name)}
		}
		if imageRank(c) < 0 {
			return Channel{}, &failure{validate.ReasonBadSchema, fmt.Errorf("channel %s: format %s, type %s, shape %v is not an image (mjpg, jpg, or u1 [H, W, 3])", name, c.Format, c.DType, c.Shape)}
		}
		return c, nil
	}
	best, rank := []Channel(nil), 3
	var unreadable error // the first channel that could not be resolved
	for _, name := range meta.Names() {
		if name == TimestampChannel {
			continue
		}
		c, err := meta.Channel(name)
		if err != nil {
			if unreadable == nil {
				unreadable = err
			}
			continue // a channel that cannot be read cannot be the camera
		}
		switch r := imageRank(c); {
		case r < 0 || r > rank:
		case r < rank:
			best, rank = []Channel{c}, r
		default:
			best = append(best, c)
		}
	}
	switch len(best) {
	case 0:
		if unreadable != nil {
			// Most likely the image channel itself: say what is wrong with it.
			return Channel{}, &failure{validate.ReasonBadSchema, fmt.Errorf("sensor %s has no readable image channel: %w", s.camera.sensor, unreadable)}
		}
		return Channel{}, &failure{validate.ReasonMissingBlock, fmt.Errorf("sensor %s has no image channel (mjpg, jpg, or u1 [H, W, 3])", s.camera.sensor)}
	case 1:
		return best[0], nil
	}
	names := make([]string, len(best))
	for i, c := range best {
		names[i] = c.Name
	}
	return Channel{}, &failure{validate.ReasonBadSchema, fmt.Errorf("sensor %s has several image channels (%s): set source.camera to %s/<channel>", s.camera.sensor, strings.Join(names, ", "), s.camera.sensor)}
}

// openCamera reads a dataset's camera sensor: meta.json, ts, the image
// channel's index, the frame size.
func (s *Source) openCamera(ds dataset) (*cameraPlan, *failure) {
	sensor := s.camera.sensor
	if !slices.Contains(ds.sensors, sensor) {
		return nil, &failure{validate.ReasonCameraMissing, fmt.Errorf("no camera sensor %q (sensors: %s)", sensor, strings.Join(ds.sensors, ", "))}
	}
	dir := filepath.Join(ds.dir, sensor)
	meta, err := readMeta(dir)
	if err != nil {
		return nil, classify(err, validate.ReasonBadSchema)
	}
	if _, err := meta.timestamps(); err != nil {
		return nil, classify(err, validate.ReasonMissingBlock)
	}
	ch, fail := s.imageChannel(meta)
	if fail != nil {
		return nil, fail
	}
	ts, tsExt, err := readTimestamps(dir)
	if err != nil {
		return nil, classify(err, validate.ReasonMissingBlock)
	}
	reader, imgExt, attrs, err := openCameraReader(dir, ch)
	if err != nil {
		return nil, classify(err, validate.ReasonMissingFile)
	}
	n, note := commonLength(sensor, []namedExtent{{TimestampChannel, tsExt}, {ch.Name, imgExt}})
	if n == 0 {
		msg := "the camera has no complete frame"
		if note != "" {
			msg += " (" + note + ")"
		}
		return nil, &failure{validate.ReasonZeroFrames, errors.New(msg)}
	}
	plan := &cameraPlan{
		info:   &cameraInfo{dir: dir, channel: ch, n: n},
		reader: reader,
		ts:     ts[:n],
		attrs:  attrs,
	}
	if note != "" {
		plan.notes = append(plan.notes, note)
	}
	if plan.attrs == nil {
		plan.attrs = map[string]string{}
	}
	if m, ok := reader.(*mjpgReader); ok {
		plan.empty = make([]bool, n)
		for k := range n {
			plan.empty[k] = m.index.Frames[k].Size == 0
		}
	}
	w, h, err := reader.size(n)
	if err != nil {
		plan.reasons = append(plan.reasons, validate.ReasonDecodeError)
		plan.attrs["size_error"] = s.message(err)
		plan.details.Note(validate.ReasonDecodeError, "frame size: "+plan.attrs["size_error"])
		return plan, nil
	}
	plan.info.width, plan.info.height = w, h
	if (ch.Format == FormatMJPG || ch.Format == FormatJPG) && len(ch.Shape) >= 2 && (ch.Shape[0] != h || ch.Shape[1] != w) {
		plan.reasons = append(plan.reasons, validate.ReasonDimsMismatch)
		plan.attrs["dims"] = fmt.Sprintf("meta.json shape %v, frames are %dx%d (width x height)", ch.Shape, w, h)
		plan.details.Note(validate.ReasonDimsMismatch, plan.attrs["dims"])
	}
	return plan, nil
}

// openCameraReader opens an image channel and returns its extent and any
// entry attributes worth recording.
func openCameraReader(dir string, c Channel) (cameraReader, extent, map[string]string, error) {
	p := filepath.Join(dir, c.Name)
	switch c.Format {
	case FormatMJPG:
		f, err := os.Open(p)
		if err != nil {
			return nil, extent{}, nil, err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil, extent{}, nil, err
		}
		ix, err := avi.ReadIndex(f, st.Size())
		if err != nil {
			return nil, extent{}, nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		ext := extent{n: len(ix.Frames)}
		if ix.PartialFrame {
			ext.dropped = "a partial trailing frame"
		}
		var attrs map[string]string
		if ix.Incomplete {
			attrs = map[string]string{"video": c.Name + " was not closed by its writer (no index): frames found by walking the movi list"}
		}
		return &mjpgReader{path: p, index: ix}, ext, attrs, nil
	case FormatJPG:
		b, ext, err := openBlobFolder(p, "jpg")
		if err != nil {
			return nil, extent{}, nil, err
		}
		return &jpgReader{b}, ext, nil, nil
	default:
		w, h, channels, ok := pixelShape(c)
		if !ok {
			return nil, extent{}, nil, metaErrorf("channel %s is not an image", c.Name)
		}
		recs, ext, err := openRecords(dir, c, c.RecordBytes)
		if err != nil {
			return nil, extent{}, nil, err
		}
		return &pixelReader{recs: recs, w: w, h: h, channels: channels}, ext, nil, nil
	}
}

// mjpgReader reads frames of an MJPEG AVI through its index.
type mjpgReader struct {
	path  string
	index *avi.Index
}

func (m *mjpgReader) frame(k int) ([]byte, error) {
	f, err := os.Open(m.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return m.index.ReadFrame(f, k)
}

func (m *mjpgReader) image(k int) (sources.Image, error) {
	b, err := m.frame(k)
	if err != nil {
		return sources.Image{}, err
	}
	if len(b) == 0 {
		return sources.Image{}, fmt.Errorf("frame %d is an empty chunk", k)
	}
	return sources.Image{Encoded: b}, nil
}

func (m *mjpgReader) size(n int) (int, int, error) {
	return probeSize(n, m.frame)
}

// probeSize returns the size in the first readable header among the first
// frames, so that one damaged frame does not cost the whole dataset.
func probeSize(n int, read func(k int) ([]byte, error)) (int, int, error) {
	var first error
	for k := range min(n, headerProbeFrames) {
		b, err := read(k)
		if err == nil {
			var w, h int
			if w, h, _, err = transforms.DecodeConfig(b); err == nil {
				return w, h, nil
			}
		}
		if isOSError(err) {
			return 0, 0, err
		}
		if first == nil {
			first = fmt.Errorf("frame %d: %w", k, err)
		}
	}
	return 0, 0, fmt.Errorf("no readable frame header among the first %d frames: %w", min(n, headerProbeFrames), first)
}

// jpgReader reads a folder of JPEG files.
type jpgReader struct{ *blobFolder }

func (j *jpgReader) frame(k int) ([]byte, error) {
	b, _, err := j.read(k, MaxFrameBytes)
	return b, err
}

func (j *jpgReader) image(k int) (sources.Image, error) {
	b, err := j.frame(k)
	if err != nil {
		return sources.Image{}, err
	}
	return sources.Image{Encoded: b}, nil
}

func (j *jpgReader) size(n int) (int, int, error) { return probeSize(n, j.frame) }

// pixelReader reads raw u1 frames from a numeric channel.
type pixelReader struct {
	recs           records
	w, h, channels int
}

func (p *pixelReader) image(k int) (sources.Image, error) {
	rec, err := p.recs.Record(k)
	if err != nil {
		return sources.Image{}, err
	}
	if p.channels == 3 {
		return sources.Image{Pixels: rec, Width: p.w, Height: p.h, Stride: 3 * p.w}, nil
	}
	rgb := make([]byte, 3*len(rec))
	for i, v := range rec {
		rgb[3*i], rgb[3*i+1], rgb[3*i+2] = v, v, v
	}
	return sources.Image{Pixels: rgb, Width: p.w, Height: p.h, Stride: 3 * p.w}, nil
}

func (p *pixelReader) size(int) (int, int, error) { return p.w, p.h, nil }

// ReadImage returns a frame's JPEG bytes (mjpg, jpg) or RGB pixels (raw,
// lzmaf, npz u1 channels), reading only that frame.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	i := int(smp.SourceIndex)
	if i < 0 || i >= len(s.cams) || s.cams[i] == nil {
		return sources.Image{}, fmt.Errorf("roverd: sample %d: dataset %d has no readable camera", smp.Seq, i)
	}
	info := s.cams[i]
	k := int(smp.Frame)
	if smp.Frame >= uint64(info.n) {
		return sources.Image{}, fmt.Errorf("roverd: sample %d: frame %d out of range [0, %d)", smp.Seq, smp.Frame, info.n)
	}
	r := s.readers.get(i)
	if r == nil {
		var ext extent
		var err error
		r, ext, _, err = openCameraReader(info.dir, info.channel)
		if err != nil {
			return sources.Image{}, fmt.Errorf("roverd: %s: %w", smp.Source, err)
		}
		if ext.n < info.n {
			return sources.Image{}, fmt.Errorf("roverd: %s: the camera has %d frames now, %d when scanned", smp.Source, ext.n, info.n)
		}
		s.readers.put(i, r)
	}
	im, err := r.image(k)
	if err != nil {
		return sources.Image{}, fmt.Errorf("roverd: %s frame %d: %w", smp.Source, k, err)
	}
	return im, nil
}

// readerCache keeps the camera readers (with their AVI indexes or lzmaf
// offsets) of the few datasets being read, so that memory does not grow
// with the number of datasets; an evicted reader is reopened on demand.
type readerCache struct {
	mu   sync.Mutex
	keys []int
	m    map[int]cameraReader
}

const cachedReaders = 4

func (c *readerCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys, c.m = nil, map[int]cameraReader{}
}

func (c *readerCache) get(i int) cameraReader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[i]
}

func (c *readerCache) put(i int, r cameraReader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[int]cameraReader{}
	}
	if _, ok := c.m[i]; !ok {
		c.keys = append(c.keys, i)
	}
	c.m[i] = r
	for len(c.keys) > cachedReaders {
		delete(c.m, c.keys[0])
		c.keys = c.keys[1:]
	}
}

// Fingerprint calls fn for every file Scan reads, datasets in scan order
// and, within one, by path: the meta.json, ts and used channel files of
// the camera sensor and of every extras sensor. Other sensors are listed
// by Scan but not read, and not fingerprinted.
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	datasets, err := s.datasets()
	if err != nil {
		return err
	}
	for _, ds := range datasets {
		if err := ctx.Err(); err != nil {
			return err
		}
		files, err := s.datasetFiles(ds)
		if err != nil {
			return err
		}
		for _, f := range files {
			st, err := os.Lstat(filepath.Join(ds.dir, filepath.FromSlash(f)))
			switch {
			case err == nil && st.Mode().IsRegular():
				if err := fn(warehouse.FileEntry{Path: ds.relPath(f), Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}); err != nil {
					return err
				}
			case err == nil || errors.Is(err, fs.ErrNotExist):
			default:
				return fmt.Errorf("roverd: fingerprint %s: %w", ds.relPath(f), err)
			}
		}
	}
	return nil
}

// datasetFiles lists, relative to the dataset and sorted, the files Scan
// reads in it. A sensor whose meta.json cannot be parsed contributes only
// its meta.json: that is all Scan reads of it.
func (s *Source) datasetFiles(ds dataset) ([]string, error) {
	used := map[string][]string{s.camera.sensor: nil}
	for _, ref := range s.extras {
		used[ref.sensor] = append(used[ref.sensor], ref.channel)
	}
	var files []string
	for sensor, channels := range used {
		if !slices.Contains(ds.sensors, sensor) {
			continue
		}
		dir := filepath.Join(ds.dir, sensor)
		files = append(files, sensor+"/meta.json")
		meta, err := readMeta(dir)
		if err != nil {
			if isOSError(err) {
				return nil, fmt.Errorf("roverd: fingerprint %s: %w", ds.relPath(sensor), err)
			}
			continue
		}
		files = append(files, sensor+"/"+TimestampChannel)
		var chans []Channel
		if sensor == s.camera.sensor {
			if c, fail := s.imageChannel(meta); fail == nil {
				chans = append(chans, c)
			}
		}
		for _, name := range channels {
			if c, err := meta.Channel(name); err == nil {
				chans = append(chans, c)
			}
		}
		for _, c := range chans {
			names, err := channelFiles(dir, c)
			if err != nil {
				return nil, fmt.Errorf("roverd: fingerprint %s: %w", ds.relPath(sensor, c.Name), err)
			}
			for _, n := range names {
				files = append(files, sensor+"/"+n)
			}
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}
