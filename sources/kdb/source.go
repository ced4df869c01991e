package kdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"warehouse-etl/sources"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "kdb"

// Extra fields a Source can carry per sample, as source.extras names them.
const (
	FieldState      = "state"       // f32[state_dim]
	FieldAction     = "action"      // f32[action_dim]
	FieldReward     = "reward"      // f32 scalar
	FieldIsTerminal = "is_terminal" // u8 in the file, 0 or 1 in the warehouse
)

// Fields lists the extras a Source knows, in the order of the file's
// state/action record.
var Fields = []string{FieldState, FieldAction, FieldReward, FieldIsTerminal}

// DefaultMaxImageBytes bounds one camera image's data (Options.MaxImageBytes).
const DefaultMaxImageBytes int64 = 256 << 20

// headerProbes are the prefix sizes read, in turn, to find a compressed
// image's size: a JPEG's SOF usually sits in the first few KiB, after
// EXIF or ICC segments it can be further in.
var headerProbes = []int{4 << 10, 64 << 10, 1 << 20}

// Options tune a Source. Zero values mean the defaults.
type Options struct {
	// Camera is the camera whose frames become samples. Default: the
	// first camera of the first frame (in scan order) that has one; every
	// episode then uses that name.
	Camera string
	// Extras are the per-frame fields carried as f32 tensors, in this
	// order: any of Fields. Default none.
	Extras []string
	// Logger receives warnings about files and episodes; nil discards.
	Logger *slog.Logger
	// MaxImageBytes is the largest camera image read; a larger one is a
	// decode_error. Default DefaultMaxImageBytes.
	MaxImageBytes int64
}

// Source reads the episodes of one or more .kdb files. New opens every
// file and checks its header and index; the files stay open (read through
// pread, safe for concurrent ReadImage calls) until Close.
//
// Samples are one per frame of the configured camera. Files are in
// natural order of their paths, episodes of a file in numeric episode_id
// order (not file order, which a merge can scramble), frames in order.
// Every sample's Locator is "<episode_id>#<frame>@<offset>", the offset of
// the camera record, so ReadImage reads that record and nothing else.
//
// What can be wrong with a sample becomes a reason (package validate):
//
//	zero_frames          the episode has no frames: one placeholder sample
//	bad_schema           the episode's meta blob is malformed (every frame)
//	length_mismatch      the state/action section's length disagrees with
//	                     num_frames, state_dim and action_dim (every frame);
//	                     or a configured state/action has another length
//	                     than the dataset's extras (every frame)
//	decode_error         the image section does not frame into num_frames
//	                     frames (every frame); or the camera's image is not
//	                     decodable: a raw image with 0 width or height or
//	                     channels other than 1, 3, 4; a compressed image
//	                     that is not JPEG or PNG or whose header does not
//	                     parse, or larger than MaxImageBytes
//	block_size_mismatch  a raw image's data_len is not width x height x channels
//	camera_missing       the frame has no image of the configured camera
//	dims_mismatch        the image's size differs from the episode's first
//	                     image of that camera, or a compressed image's size
//	                     differs from its record's width and height
//
// Non-finite extras are found by the pipeline (nonfinite); pixel data that
// fails to decode after a good header is a late decode_error.
type Source struct {
	root     string
	opts     Options
	log      *slog.Logger
	files    []*openFile
	episodes []episode // scan order
	camera   string
	extras   []sources.ExtraSpec
	dims     struct{ state, action int }
	entries  []warehouse.SourceEntry // of the last Scan
}

type openFile struct {
	rel string // relative to the dataset root's base, slash-separated
	fh  fileHandle
	kdb *File
}

// fileHandle is what a Source reads a file through: an *os.File in
// production; tests substitute in-memory or read-recording handles.
type fileHandle interface {
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

// openHandle opens one .kdb file; tests replace it.
var openHandle = func(path string) (fileHandle, error) { return os.Open(path) }

// episode is one index entry in scan order.
type episode struct {
	file  int // index into Source.files
	entry int // index entry in its file
	name  string
}

var _ sources.Source = (*Source)(nil)

// New opens the .kdb files at root: a file, a directory of *.kdb files or
// a glob (see listFiles). A file whose header or index is corrupt fails
// New with an error naming it; problems inside episodes become sample
// reasons in Scan.
func New(root string, opts Options) (*Source, error) {
	s, err := newSource(root, opts)
	if err != nil {
		return nil, err
	}
	base, rels, err := listFiles(root)
	if err != nil {
		return nil, err
	}
	for _, rel := range rels {
		path := filepath.Join(base, filepath.FromSlash(rel))
		fh, err := openHandle(path)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("kdb: %w", err)
		}
		if err := s.add(rel, fh); err != nil {
			fh.Close()
			s.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := s.finish(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newSource checks the options and returns a Source without files.
func newSource(root string, opts Options) (*Source, error) {
	for i, x := range opts.Extras {
		if !slices.Contains(Fields, x) {
			return nil, fmt.Errorf("kdb: extra %q: known fields are state, action, reward, is_terminal", x)
		}
		if slices.Contains(opts.Extras[:i], x) {
			return nil, fmt.Errorf("kdb: extra %q is listed twice", x)
		}
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	if opts.MaxImageBytes < 0 {
		return nil, errors.New("kdb: MaxImageBytes must not be negative")
	}
	opts.Extras = slices.Clone(opts.Extras)
	s := &Source{root: root, opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// add checks one file's header and index and appends it to the source.
func (s *Source) add(rel string, fh fileHandle) error {
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	f, err := Open(fh, st.Size())
	if err != nil {
		return err
	}
	s.files = append(s.files, &openFile{rel: rel, fh: fh, kdb: f})
	if h := f.Header(); h.NewerMinor() {
		s.log.Warn("kdb file has a newer minor version; reading what version 0.1 defines",
			"file", rel, "version", fmt.Sprintf("%d.%d", h.VersionMajor, h.VersionMinor),
			"reader", fmt.Sprintf("%d.%d", VersionMajor, VersionMinor))
	}
	if n := f.TrailingBytes(); n > 0 {
		s.log.Warn("kdb file has bytes after its index; they are ignored", "file", rel, "bytes", n)
	}
	return nil
}

// finish orders the episodes of the added files and resolves the extras'
// shapes and the camera.
func (s *Source) finish() error {
	s.orderEpisodes()
	if err := s.resolveExtras(); err != nil {
		return err
	}
	s.camera = s.opts.Camera
	if s.camera == "" {
		var err error
		if s.camera, err = s.defaultCamera(); err != nil {
			return err
		}
	}
	return nil
}

// orderEpisodes lists every episode in scan order: files in natural order,
// episodes of a file by numeric episode_id, then by index position.
func (s *Source) orderEpisodes() {
	for fi, of := range s.files {
		order := make([]int, of.kdb.Len())
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Compare(of.kdb.Entry(a).EpisodeID, of.kdb.Entry(b).EpisodeID)
		})
		for k, i := range order {
			id := of.kdb.Entry(i).EpisodeID
			name := fmt.Sprintf("%s/episode_%d", of.rel, id)
			if k > 0 && of.kdb.Entry(order[k-1]).EpisodeID == id {
				// Two entries with one id: a reader by id sees only the
				// first; both are read here, the later one named apart.
				name = fmt.Sprintf("%s/episode_%d@entry_%d", of.rel, id, i)
				s.log.Warn("kdb file repeats an episode id", "file", of.rel, "episode_id", id, "index_entry", i)
			}
			s.episodes = append(s.episodes, episode{file: fi, entry: i, name: name})
		}
	}
}

// resolveExtras fixes the extras' shapes from the first episode that has
// frames (or the first episode): every sample carries the same shapes, and
// episodes of other dimensions get length_mismatch.
func (s *Source) resolveExtras() error {
	if len(s.opts.Extras) == 0 {
		return nil
	}
	if len(s.episodes) == 0 {
		return fmt.Errorf("kdb: %s holds no episodes to take the extras' shapes from", s.root)
	}
	ref := s.episodes[0]
	for _, ep := range s.episodes {
		if s.entry(ep).NumFrames > 0 {
			ref = ep
			break
		}
	}
	e := s.entry(ref)
	s.dims.state, s.dims.action = int(e.StateDim), int(e.ActionDim)
	for _, x := range s.opts.Extras {
		spec := sources.ExtraSpec{Name: x, Shape: []int{}, SourceDType: "f32"}
		switch x {
		case FieldState:
			spec.Shape = []int{s.dims.state}
		case FieldAction:
			spec.Shape = []int{s.dims.action}
		case FieldIsTerminal:
			spec.SourceDType = "u8"
		}
		if len(spec.Shape) == 1 && spec.Shape[0] == 0 {
			return fmt.Errorf("kdb: extra %q: %s has %s 0", x, ref.name, map[string]string{FieldState: "state_dim", FieldAction: "action_dim"}[x])
		}
		s.extras = append(s.extras, spec)
	}
	return nil
}

// defaultCamera is the first camera name of the first frame, in scan
// order, that has a camera; "" when no frame has one. An episode whose
// image section is corrupt is passed over.
func (s *Source) defaultCamera() (string, error) {
	for _, ep := range s.episodes {
		f := s.files[ep.file].kdb
		fr := f.Frames(ep.entry)
		for range s.entry(ep).NumFrames {
			cams, err := fr.Next()
			if errors.Is(err, ErrCorrupt) {
				break
			}
			if err != nil {
				return "", fmt.Errorf("kdb: %s: %w", s.files[ep.file].rel, err)
			}
			if len(cams) > 0 {
				s.log.Info("kdb camera not configured; using the first one found", "camera", cams[0].Name, "episode", ep.name)
				return cams[0].Name, nil
			}
		}
	}
	s.log.Warn("kdb files hold no camera image at all", "root", s.root)
	return "", nil
}

func (s *Source) entry(ep episode) IndexEntry { return s.files[ep.file].kdb.Entry(ep.entry) }

// Camera is the camera whose frames become samples (the configured one or
// the default).
func (s *Source) Camera() string { return s.camera }

// Kind returns "kdb".
func (s *Source) Kind() string { return Kind }

// Extras describes the configured per-sample fields.
func (s *Source) Extras() []sources.ExtraSpec { return s.extras }

// Entries describes the episodes of the last Scan: file, episode_id, task,
// embodiment, fps, success, total_reward and the index's dimensions.
func (s *Source) Entries() []warehouse.SourceEntry { return s.entries }

// Close releases the files. The Source is unusable afterwards.
func (s *Source) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.fh.Close())
	}
	s.files = nil
	return errors.Join(errs...)
}

// Fingerprint lists every .kdb file with the size and mtime of the open
// file, so it describes exactly the bytes Scan and ReadImage read.
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	for _, f := range s.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := f.fh.Stat()
		if err != nil {
			return fmt.Errorf("kdb: %s: %w", f.rel, err)
		}
		if err := fn(warehouse.FileEntry{Path: f.rel, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}); err != nil {
			return err
		}
	}
	return nil
}

// Scan emits one sample per frame of every episode (see Source). It reads
// each episode's meta blob, its state/action section when extras are
// configured, the headers of its image records and, for a compressed
// image of the camera, the few KiB its size needs; never image data.
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	s.entries = make([]warehouse.SourceEntry, 0, len(s.episodes))
	var seq int64
	for idx, ep := range s.episodes {
		if err := s.scanEpisode(ctx, idx, ep, &seq, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) scanEpisode(ctx context.Context, idx int, ep episode, seq *int64, fn func(*sources.Sample) error) error {
	of := s.files[ep.file]
	f, e := of.kdb, s.entry(ep)
	attrs := map[string]string{
		"file":       of.rel,
		"episode_id": strconv.FormatUint(e.EpisodeID, 10),
		"num_frames": strconv.FormatUint(uint64(e.NumFrames), 10),
		"state_dim":  strconv.Itoa(int(e.StateDim)),
		"action_dim": strconv.Itoa(int(e.ActionDim)),
		"camera":     s.camera,
		"version":    fmt.Sprintf("%d.%d", f.Header().VersionMajor, f.Header().VersionMinor),
	}
	s.entries = append(s.entries, warehouse.SourceEntry{Index: idx, Name: ep.name, Attributes: attrs})
	warn := func(msg string, err error) {
		s.log.Warn(msg, "file", of.rel, "episode", ep.name, "err", err)
	}
	var common []validate.Reason // reasons of every frame of the episode
	var commonDetails validate.Details
	fault := func(r validate.Reason, msg string, err error) {
		common = append(common, r)
		commonDetails.Note(r, err.Error())
		warn(msg, err)
	}
	fps := 0.0
	meta, err := f.Meta(ep.entry)
	switch {
	case err == nil:
		attrs["embodiment"], attrs["task"] = meta.Embodiment, meta.Task
		attrs["fps"] = formatF32(meta.FPS)
		attrs["success"] = meta.Success.String()
		if meta.HasTotalReward {
			attrs["total_reward"] = formatF32(meta.TotalReward)
		}
		if v := float64(meta.FPS); v > 0 && !math.IsInf(v, 0) {
			fps = v
		}
	case errors.Is(err, ErrCorrupt):
		attrs["meta_error"] = err.Error()
		fault(validate.ReasonBadSchema, "kdb meta blob is malformed", err)
	default:
		return fmt.Errorf("kdb: %s: %w", of.rel, err)
	}
	base := sources.Sample{Source: ep.name, SourceIndex: int32(idx), ImagePath: of.rel}
	emit := func(smp *sources.Sample) error {
		smp.Seq = *seq
		*seq++
		smp.Reasons = validate.Normalize(smp.Reasons)
		return fn(smp)
	}
	if e.NumFrames == 0 {
		smp := base
		smp.Reasons = append(common, validate.ReasonZeroFrames)
		smp.Details = maps.Clone(commonDetails)
		smp.Explain(validate.ReasonZeroFrames, "the index lists 0 frames for episode "+strconv.FormatUint(e.EpisodeID, 10))
		return emit(&smp)
	}

	steps, err := f.Steps(ep.entry)
	if err != nil {
		fault(validate.ReasonLengthMismatch, "kdb state/action section disagrees with the index", err)
	}
	if (slices.Contains(s.opts.Extras, FieldState) && int(e.StateDim) != s.dims.state) ||
		(slices.Contains(s.opts.Extras, FieldAction) && int(e.ActionDim) != s.dims.action) {
		fault(validate.ReasonLengthMismatch, "kdb episode's state or action length differs from the dataset's extras",
			fmt.Errorf("state_dim %d, action_dim %d; extras have %d, %d", e.StateDim, e.ActionDim, s.dims.state, s.dims.action))
	}
	if len(s.extras) == 0 || slices.Contains(common, validate.ReasonLengthMismatch) {
		steps = nil
	}
	var frames *FrameReader
	switch err := f.CheckFraming(ep.entry); {
	case err == nil:
		frames = f.Frames(ep.entry)
	case errors.Is(err, ErrCorrupt):
		fault(validate.ReasonDecodeError, "kdb image section is malformed (a file of the pre-format-byte layout reads like this)", err)
	default:
		return fmt.Errorf("kdb: %s: %w", of.rel, err)
	}

	var refW, refH int // the episode's first usable image size
	for t := range int(e.NumFrames) {
		if err := ctx.Err(); err != nil {
			return err
		}
		smp := base
		smp.Frame = uint64(t)
		if fps > 0 {
			smp.SimTime = float64(t) / fps
		}
		smp.Reasons = slices.Clone(common)
		smp.Details = maps.Clone(commonDetails)
		if frames != nil {
			cams, err := frames.Next()
			if err != nil {
				return fmt.Errorf("kdb: %s: %w", of.rel, err) // the file changed since CheckFraming
			}
			i := slices.IndexFunc(cams, func(c CameraRecord) bool { return c.Name == s.camera })
			if i < 0 {
				smp.Reject(validate.ReasonCameraMissing, fmt.Sprintf("no camera %q among the frame's %d", s.camera, len(cams)))
			} else {
				rec := cams[i]
				smp.Locator = fmt.Sprintf("%d#%d@%d", e.EpisodeID, t, rec.Offset)
				w, h, reason, detail, err := s.inspect(f, rec)
				if err != nil {
					return fmt.Errorf("kdb: %s: %w", of.rel, err)
				}
				smp.Width, smp.Height = w, h
				if reason != "" {
					smp.Reject(reason, detail)
				}
				if reason == "" || reason == validate.ReasonDimsMismatch {
					if refW == 0 {
						refW, refH = w, h
					} else if w != refW || h != refH {
						smp.Reject(validate.ReasonDimsMismatch, fmt.Sprintf("%dx%d, the episode's first frame is %dx%d", w, h, refW, refH))
					}
				}
			}
		}
		if steps != nil {
			st, err := steps.Next()
			if err != nil {
				return fmt.Errorf("kdb: %s: %w", of.rel, err)
			}
			smp.Extras = s.flatten(st)
		}
		if err := emit(&smp); err != nil {
			return err
		}
	}
	return nil
}

// inspect finds the size of a camera image and what is wrong with it, if
// anything, reading at most a header prefix of a compressed image's data.
// err is an I/O error only.
func (s *Source) inspect(f *File, rec CameraRecord) (w, h int, reason validate.Reason, detail string, err error) {
	w, h = int(rec.Width), int(rec.Height)
	if !rec.Compressed() {
		switch {
		case rec.Channels != 1 && rec.Channels != 3 && rec.Channels != 4, w == 0, h == 0:
			return w, h, validate.ReasonDecodeError, fmt.Sprintf("raw frame %dx%d with %d channels", w, h, rec.Channels), nil
		case uint64(rec.Width)*uint64(rec.Height)*uint64(rec.Channels) != uint64(rec.DataLen):
			return w, h, validate.ReasonBlockSizeMismatch, fmt.Sprintf("raw frame %dx%dx%d is %d bytes, not %d", w, h, rec.Channels, rec.DataLen, uint64(rec.Width)*uint64(rec.Height)*uint64(rec.Channels)), nil
		}
		return w, h, "", "", nil
	}
	if int64(rec.DataLen) > s.opts.MaxImageBytes {
		return w, h, validate.ReasonDecodeError, fmt.Sprintf("%d-byte image, more than the limit of %d", rec.DataLen, s.opts.MaxImageBytes), nil
	}
	for _, n := range headerProbes {
		prefix, err := f.ReadData(rec, n)
		if err != nil {
			return 0, 0, "", "", err
		}
		dw, dh, format, derr := transforms.DecodeConfig(prefix)
		if derr == nil {
			if format != "jpeg" && format != "png" {
				return w, h, validate.ReasonDecodeError, "a " + format + " image, want jpeg or png", nil
			}
			if dw != w || dh != h {
				return dw, dh, validate.ReasonDimsMismatch, fmt.Sprintf("the record says %dx%d, the image header %dx%d", w, h, dw, dh), nil
			}
			return w, h, "", "", nil
		}
		if len(prefix) == int(rec.DataLen) {
			break
		}
	}
	return w, h, validate.ReasonDecodeError, "the image header cannot be decoded", nil
}

// flatten lays one step out in the order of Extras.
func (s *Source) flatten(st Step) []float32 {
	out := make([]float32, 0, s.dims.state+s.dims.action+2)
	for _, x := range s.opts.Extras {
		switch x {
		case FieldState:
			out = append(out, st.State...)
		case FieldAction:
			out = append(out, st.Action...)
		case FieldReward:
			out = append(out, st.Reward)
		case FieldIsTerminal:
			out = append(out, boolF32(st.Terminal))
		}
	}
	return out
}

func boolF32(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// formatF32 prints a float32 in the shortest form that reads back exactly.
func formatF32(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

// ReadImage reads the camera record a scanned sample points to: the
// encoded bytes of a compressed image, or the pixels of a raw one expanded
// to RGB (grayscale replicated, alpha dropped). It reads that record only.
func (s *Source) ReadImage(smp *sources.Sample) (sources.Image, error) {
	idx := int(smp.SourceIndex)
	if idx < 0 || idx >= len(s.episodes) {
		return sources.Image{}, fmt.Errorf("kdb: sample %d: source index %d out of range", smp.Seq, idx)
	}
	ep := s.episodes[idx]
	var id uint64
	var frame, off int64
	if _, err := fmt.Sscanf(smp.Locator, "%d#%d@%d", &id, &frame, &off); err != nil ||
		fmt.Sprintf("%d#%d@%d", id, frame, off) != smp.Locator {
		return sources.Image{}, fmt.Errorf("kdb: %s: malformed locator %q", ep.name, smp.Locator)
	}
	f := s.files[ep.file].kdb
	if e := s.entry(ep); e.EpisodeID != id {
		return sources.Image{}, fmt.Errorf("kdb: %s: locator %q names episode %d", ep.name, smp.Locator, id)
	}
	rec, err := f.CameraAt(ep.entry, off)
	if err != nil {
		return sources.Image{}, err
	}
	if rec.Name != s.camera {
		return sources.Image{}, fmt.Errorf("kdb: %s frame %d: record at %d is camera %q, want %q", ep.name, frame, off, rec.Name, s.camera)
	}
	if int64(rec.DataLen) > s.opts.MaxImageBytes {
		return sources.Image{}, fmt.Errorf("kdb: %s frame %d: image of %d bytes exceeds the %d-byte limit", ep.name, frame, rec.DataLen, s.opts.MaxImageBytes)
	}
	data, err := f.ReadData(rec, int(rec.DataLen))
	if err != nil {
		return sources.Image{}, err
	}
	if rec.Compressed() {
		return sources.Image{Encoded: data}, nil
	}
	return rawImage(rec, data)
}

// rawImage turns raw HWC u8 data into packed RGB.
func rawImage(rec CameraRecord, data []byte) (sources.Image, error) {
	w, h, ch := int(rec.Width), int(rec.Height), int(rec.Channels)
	if w == 0 || h == 0 || (ch != 1 && ch != 3 && ch != 4) || uint64(len(data)) != uint64(w)*uint64(h)*uint64(ch) {
		return sources.Image{}, fmt.Errorf("kdb: raw image %dx%d with %d channels does not match its %d bytes", w, h, ch, len(data))
	}
	im := sources.Image{Width: w, Height: h, Stride: 3 * w}
	if ch == 3 {
		im.Pixels = data
		return im, nil
	}
	im.Pixels = make([]byte, 3*w*h)
	for p := range w * h {
		src := data[p*ch:]
		if ch == 1 {
			im.Pixels[3*p], im.Pixels[3*p+1], im.Pixels[3*p+2] = src[0], src[0], src[0]
		} else {
			copy(im.Pixels[3*p:3*p+3], src[:3])
		}
	}
	return im, nil
}
