// Package wshard reads robot-learning episodes stored as WShard files
// (.wshard: a Shard container of role 0x05, see package container) and
// turns every time step into a warehouse sample: the camera frame as the
// image, the configured low-dimensional channels (state, action, reward,
// done, ...) as per-sample f32 extras.
//
// # Inputs
//
// The dataset root is a file, a directory (every *.wshard below it,
// recursively, in natural order of the relative path; names starting with
// "." are skipped) or a glob. A manifest file (role 0x04, JSON block
// meta/manifest) makes one chunked episode of the chunk files it names,
// relative to its own directory; those files are read through it and not
// again as episodes of their own. Every other file is one episode.
//
// # Channels
//
// meta/channels (either form, see parseChannels) declares each channel's
// block, dtype and per-step shape. The camera (Options.Camera, a block name
// or channel id) must be u8 [H,W,3] (RGB), [H,W] or [H,W,1] (grayscale,
// expanded to RGB) or [H,W,4] (RGBA, alpha dropped); by default it is the
// first channel with modality rgb, else the first u8 [H,W,3] channel of the
// first episode that has one, and then the same block in every episode.
// Extras (Options.Extras) are block names or channel ids; reward (f32),
// done (u8), time/timestamps_ns (i64) and time/ticks (i32) need no
// declaration. An extra's shape and source dtype are those of the first
// episode that declares it; every value is converted to float32
// (DType.Float32s).
//
// # Samples
//
// Every time step is one sample, in episode order then step order: Source
// is the episode id (the file path without .wshard when the file has
// none), Frame the step's global index (timestep_range start + step),
// ImagePath the file holding the frame, Locator "<file>#<step in file>".
// With the ticks timebase SimTime is Frame / tick_hz; with timestamps_ns
// UnixTimeNs is the step's timestamp and SimTime the seconds since the
// episode's first one.
//
// # Boxes
//
// Episodes carry no boxes unless Options.Boxes names a label channel of
// shape [K,4] (x0, y0, x1, y1 in the camera frame's pixels, any numeric
// dtype; a row of four zeros or four NaNs is padding), optionally with
// Options.BoxClasses, [K] or [K,1] integer class ids (exact up to 2^24:
// values pass through float32). Each step's rows are checked as a
// capture label's bbox_px: invalid_bbox, bbox_out_of_bounds (beyond
// validate.BoundsTolerancePx; within it, clamped), empty when every row is
// padding, bad_schema for a class id that is not an integer. A label
// channel that is not declared is missing_block, one of the wrong shape
// bad_schema, a class channel whose K differs length_mismatch (every step).
//
// # Reasons
//
// Scan reads headers, indexes, the meta blocks, the extras and timestamps
// blocks, never a camera block. What is wrong becomes reason codes:
//
//	whole file unreadable, one placeholder sample:
//	  decode_error       not a container, structurally corrupt (the
//	                     container's checks), or not an episode (role)
//	  checksum_mismatch  a meta block's CRC32C or a name's xxHash64
//	  decompress_error   a meta block does not decompress, or names an
//	                     unknown compression
//	  bad_schema         meta/episode, meta/wshard or meta/channels is not
//	                     valid JSON of the expected shape
//	  missing_block      no meta/episode
//	  length_mismatch    timestep_range disagrees with length_T
//	  zero_frames        length_T is 0
//	  missing_file       a chunk named by a manifest does not exist
//	  path_escape        a manifest's chunk uri leaves its directory
//	every step of the file:
//	  camera_missing      the camera channel is not declared
//	  missing_block       a used channel's block, or an extra, is absent
//	  block_size_mismatch a used block is not length_T x dtype x shape
//	  decode_error        the camera channel is not an image, or the
//	                      extras would exceed Limits.MaxBlockBytes as f32
//	  bad_schema          a used channel's dtype or shape is unreadable
//	  checksum_mismatch / decompress_error   an extras or timestamps block
//	  length_mismatch     an extra's shape differs from the warehouse's, or
//	                      a chunk disagrees with its manifest entry
//	  dims_mismatch       a chunk's frame size differs from the first chunk's
//	one step:
//	  timestamp_not_monotonic  its timestamp is not after the previous step's
//	  episode_gap              chunked: steps are missing before it (or
//	                           after it, on the episode's last sample)
//	  chunk_overlap            chunked: its step was already read
//
// length_T is a number in a JSON block until the camera block confirms it:
// when the camera is unusable, one sample per step is emitted only if
// length_T is at most the file's size in bytes (no real episode stores less
// than a byte per step), otherwise one placeholder sample.
//
// The camera block is read and checked (CRC32C) when the first of its
// frames is needed (ReadImage); a failure there makes those samples late
// decode_errors whose message names the file and block. Non-finite extras
// are flagged by the pipeline (nonfinite). An operating-system read error
// is not a reason: Scan fails naming the file.
package wshard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "wshard"

// DefaultFrameCacheBytes is the default Options.FrameCacheBytes.
const DefaultFrameCacheBytes = 256 << 20

// maxExtraF32 is the most f32 extras a shard sample can carry.
const maxExtraF32 = 65535

// Options tune a Source. Zero values mean the defaults.
type Options struct {
	// Camera is the image channel, a block name or a channel id; "" picks
	// the default (see the package documentation).
	Camera string
	// Extras are the channels carried per sample as f32 tensors, in order.
	Extras []string
	// Boxes, when set, is the label channel (block name or channel id):
	// per step K boxes x0, y0, x1, y1 in the camera frame's pixels, shape
	// [K,4], any numeric dtype. A row of four zeros or four NaNs is
	// padding. Without it episodes carry no boxes.
	Boxes string
	// BoxClasses, optional with Boxes, is a channel of shape [K] or [K,1]
	// holding each box's integer class id.
	BoxClasses string
	// Logger receives one warning per episode problem; nil discards.
	Logger *slog.Logger
	// Limits bound what the container reader allocates.
	Limits container.Limits
	// FrameCacheBytes bounds the camera blocks ReadImage keeps in memory:
	// a raw block up to this size is read whole once (and its CRC checked),
	// a larger one frame by frame after a streamed CRC check. Compressed
	// blocks are always decoded whole, once, within Limits.MaxBlockBytes
	// and the build's memory budget when it has one (SetMemoryBudget,
	// which then bounds the cache instead of this). Default
	// DefaultFrameCacheBytes.
	FrameCacheBytes int64
}

// Source scans a dataset of WShard episodes.
type Source struct {
	root    string // as given: a file, a directory or a glob
	base    string // the directory paths are relative to
	opts    Options
	log     *slog.Logger
	camera  string
	extras  []sources.ExtraSpec
	extraN  int // float32 values per sample
	entries []warehouse.SourceEntry
	frames  *frameCache
}

var _ sources.Source = (*Source)(nil)

// New returns a Source for the episodes at root. It lists them and opens
// as many as it takes to resolve the default camera and every extra's
// shape and dtype; it fails when the root is unreadable, holds no files,
// or no readable episode declares the camera or an extra.
func New(root string, opts Options) (*Source, error) {
	base, _, err := listInputs(root)
	if err != nil {
		return nil, err
	}
	s := &Source{root: root, base: base, opts: opts, log: opts.Logger}
	s.opts.Extras = slices.Clone(opts.Extras)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.FrameCacheBytes <= 0 {
		s.opts.FrameCacheBytes = DefaultFrameCacheBytes
	}
	for i, name := range opts.Extras {
		if name == "" || slices.Contains(opts.Extras[:i], name) {
			return nil, fmt.Errorf("wshard: extra %q is empty or repeated", name)
		}
	}
	if err := s.resolve(); err != nil {
		return nil, err
	}
	s.frames = newFrameCache(s)
	return s, nil
}

// resolve fixes the camera block and the extras' specs from the first
// episodes that declare them.
func (s *Source) resolve() error {
	plans, err := s.plan()
	if err != nil {
		return err
	}
	s.camera = s.opts.Camera
	specs := make([]*sources.ExtraSpec, len(s.opts.Extras))
	pending := func() bool { return s.camera == "" || slices.Contains(specs, nil) }
	opened, unreadable := 0, 0
	for _, rel := range partFiles(plans) {
		if !pending() {
			break
		}
		ep, err := OpenEpisode(s.abs(rel), rel, s.opts.Limits)
		if err != nil {
			if errors.As(err, new(*Problem)) {
				unreadable++
				continue
			}
			return err
		}
		opened++
		if s.camera == "" {
			s.camera = defaultCamera(ep.Channels)
		}
		for i, name := range s.opts.Extras {
			if c, ok := ep.Channel(name); ok && specs[i] == nil && c.err == nil {
				specs[i] = &sources.ExtraSpec{Name: name, Shape: slices.Clone(c.Shape), SourceDType: c.DType.String()}
			}
		}
		ep.Close()
	}
	where := fmt.Sprintf("%d readable episode files (%d unreadable) under %s", opened, unreadable, s.root)
	if s.camera == "" {
		return fmt.Errorf("wshard: no channel with modality rgb or u8 [H,W,3] in %s: set source.camera", where)
	}
	for i, spec := range specs {
		if spec == nil {
			return fmt.Errorf("wshard: extra %q: no channel or block of that name is declared in %s", s.opts.Extras[i], where)
		}
		s.extras = append(s.extras, *spec)
		s.extraN += spec.Elements()
	}
	if s.extraN > maxExtraF32 {
		return fmt.Errorf("wshard: the extras take %d float32 values per sample; a shard holds at most %d", s.extraN, maxExtraF32)
	}
	return nil
}

// partFiles lists every episode file of the plans in scan order.
func partFiles(plans []episodePlan) []string {
	var out []string
	for _, p := range plans {
		if p.manifest == nil {
			out = append(out, p.rel)
			continue
		}
		for _, c := range p.manifest.chunks {
			if c.rel != "" {
				out = append(out, c.rel)
			}
		}
	}
	return out
}

// Kind returns "wshard".
func (s *Source) Kind() string { return Kind }

// Camera is the camera channel every episode is read with.
func (s *Source) Camera() string { return s.camera }

// Extras lists the per-sample extras in Sample.Extras order.
func (s *Source) Extras() []sources.ExtraSpec { return s.extras }

// Entries describes the episodes of the last Scan.
func (s *Source) Entries() []warehouse.SourceEntry { return s.entries }

// Fingerprint calls fn for every file Scan reads: per episode in scan
// order, the episode file, or the manifest and then its chunks in chunk
// order. Files that do not exist (a missing chunk) are not listed.
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	plans, err := s.plan()
	if err != nil {
		return err
	}
	for _, p := range plans {
		rels := []string{p.rel}
		if p.manifest != nil {
			for _, c := range p.manifest.chunks {
				if c.rel != "" && !slices.Contains(rels, c.rel) {
					rels = append(rels, c.rel)
				}
			}
		}
		for _, rel := range rels {
			if err := ctx.Err(); err != nil {
				return err
			}
			st, err := os.Stat(s.abs(rel))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				return fmt.Errorf("wshard: fingerprint %s: %w", rel, err)
			case !st.Mode().IsRegular():
				continue
			}
			if err := fn(warehouse.FileEntry{Path: rel, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Scan calls fn for every time step of every episode (see the package
// documentation).
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	plans, err := s.plan()
	if err != nil {
		return err
	}
	em := &emitter{fn: fn}
	entries := make([]warehouse.SourceEntry, 0, len(plans))
	for i, p := range plans {
		if err := ctx.Err(); err != nil {
			return err
		}
		es := &episodeScan{s: s, index: int32(i), em: em, attrs: map[string]string{"file": p.rel, "camera": s.camera}}
		em.details = &es.details
		if err := es.run(p); err != nil {
			return err
		}
		if err := em.flush(); err != nil {
			return err
		}
		entries = append(entries, es.entry())
	}
	s.entries = entries
	return nil
}

// emitter numbers samples and holds back the last one of an episode, which
// may still receive a reason (a gap after it) when the episode ends.
type emitter struct {
	fn   func(*sources.Sample) error
	seq  int64
	held *sources.Sample
	// details are the causes of the current episode's problems, by
	// reason: a sample gets the cause of each of its reasons from here
	// unless it has its own.
	details *validate.Details
}

func (e *emitter) push(smp *sources.Sample) error {
	if err := e.flush(); err != nil {
		return err
	}
	e.held = smp
	return nil
}

// flush sends the held sample with extra reasons added.
func (e *emitter) flush(extra ...validate.Reason) error {
	smp := e.held
	if smp == nil {
		return nil
	}
	e.held = nil
	smp.Reasons = validate.Normalize(append(smp.Reasons, extra...))
	if e.details != nil {
		for _, r := range smp.Reasons {
			smp.Explain(r, (*e.details)[r])
		}
	}
	smp.Seq = e.seq
	e.seq++
	return e.fn(smp)
}

// partData is what Scan reads of one episode file.
type partData struct {
	rel      string
	meta     Meta
	w, h     int
	reasons  []validate.Reason // apply to every step
	problems []error
	extras   []float32 // Length x extraN, nil when any extra is unusable
	ts       []int64   // per-step timestamps, nil with the ticks timebase or when unreadable
	boxes    []float32 // Length x boxK x 4, nil without a usable label channel
	classes  []float32 // Length x boxK class ids, nil without a class channel
	boxK     int
}

// note records the Problems in err (one, or several joined) on the part;
// any other error is returned.
func (pd *partData) note(err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var p *Problem
		if !errors.As(err, &p) {
			return err
		}
		pd.reasons = append(pd.reasons, p.Reason)
		pd.problems = append(pd.problems, err)
	}
	return nil
}

// readPart opens one episode file and reads everything Scan needs of it.
// A file unreadable as a whole is a *Problem; an I/O failure another error.
func (s *Source) readPart(rel string) (*partData, error) {
	ep, err := OpenEpisode(s.abs(rel), rel, s.opts.Limits)
	if err != nil {
		return nil, err
	}
	defer ep.Close()
	pd := &partData{rel: rel, meta: ep.Meta}
	T := ep.Meta.Length
	if T == 0 {
		return nil, problemf(validate.ReasonZeroFrames, rel, "length_T is 0")
	}
	img, err := ep.imageChannel(s.camera)
	pd.w, pd.h = img.W, img.H
	if err != nil {
		// length_T is only a number in a JSON block until a block of that
		// many frames confirms it. Without the camera block, one sample
		// per step is emitted only for a length a file of this size could
		// hold (a byte per step); a larger claim is one placeholder.
		if int64(T) > ep.Container().Size() {
			return nil, err
		}
		if err := pd.note(err); err != nil {
			return nil, err
		}
	}
	if len(s.extras) > 0 {
		vals, err := s.readExtras(ep)
		if err != nil {
			if err := pd.note(err); err != nil {
				return nil, err
			}
		}
		pd.extras = vals
	}
	if s.opts.Boxes != "" {
		if err := s.readBoxes(ep, pd); err != nil {
			if err := pd.note(err); err != nil {
				return nil, err
			}
		}
	}
	if ep.Meta.Timebase.Type == TimebaseTimestampsNs {
		ts, err := ep.Timestamps()
		if err != nil {
			if err := pd.note(err); err != nil {
				return nil, err
			}
		}
		pd.ts = ts
	}
	return pd, nil
}

// readExtras reads every extra of an episode and interleaves them, step by
// step, in Extras order. The first extra that cannot be read is returned as
// its problem (each extra's reason ends up on the samples: see readPart).
func (s *Source) readExtras(ep *Episode) ([]float32, error) {
	if err := ep.checkFloat32Bytes("the extras", int64(s.extraN)); err != nil {
		return nil, err
	}
	columns := make([][]float32, len(s.extras))
	var problems []error
	for i, spec := range s.extras {
		v, err := s.readExtra(ep, spec)
		if err != nil {
			if !errors.As(err, new(*Problem)) {
				return nil, err
			}
			problems = append(problems, err)
			continue
		}
		columns[i] = v
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	T := ep.Meta.Length
	vals := make([]float32, T*s.extraN)
	off := 0
	for i, spec := range s.extras {
		n := spec.Elements()
		for t := range T {
			copy(vals[t*s.extraN+off:], columns[i][t*n:(t+1)*n])
		}
		off += n
	}
	return vals, nil
}

// readExtra reads one extra of an episode as Length x Elements values.
func (s *Source) readExtra(ep *Episode, spec sources.ExtraSpec) ([]float32, error) {
	c, ok := ep.Channel(spec.Name)
	if !ok {
		return nil, problemf(validate.ReasonMissingBlock, ep.Name, "extra %q: no channel or block of that name is declared", spec.Name)
	}
	if c.err == nil && !slices.Equal(c.Shape, spec.Shape) {
		return nil, problemf(validate.ReasonLengthMismatch, ep.Name, "extra %q has shape %v here, %v in the warehouse", spec.Name, c.Shape, spec.Shape)
	}
	return ep.Float32s(c)
}

// maxBoxesPerStep bounds K of a label channel.
const maxBoxesPerStep = 4096

// readBoxes reads the label channel, and the class channel when
// configured, into pd. Any problem is returned for every step.
func (s *Source) readBoxes(ep *Episode, pd *partData) error {
	c, ok := ep.Channel(s.opts.Boxes)
	if !ok {
		return problemf(validate.ReasonMissingBlock, ep.Name, "label channel %q: no channel or block of that name is declared", s.opts.Boxes)
	}
	if c.err == nil && (len(c.Shape) != 2 || c.Shape[1] != 4 || c.Shape[0] < 1 || c.Shape[0] > maxBoxesPerStep) {
		return problemf(validate.ReasonBadSchema, ep.Name, "label channel %q has shape %v, want [K,4] with 1 <= K <= %d", s.opts.Boxes, c.Shape, maxBoxesPerStep)
	}
	boxes, err := ep.Float32s(c)
	if err != nil {
		return err
	}
	k := c.Shape[0]
	var classes []float32
	if s.opts.BoxClasses != "" {
		cc, ok := ep.Channel(s.opts.BoxClasses)
		if !ok {
			return problemf(validate.ReasonMissingBlock, ep.Name, "box class channel %q: no channel or block of that name is declared", s.opts.BoxClasses)
		}
		if cc.err == nil && !slices.Equal(cc.Shape, []int{k}) && !slices.Equal(cc.Shape, []int{k, 1}) {
			return problemf(validate.ReasonLengthMismatch, ep.Name, "box class channel %q has shape %v, want [%d] or [%d,1] like the label channel", s.opts.BoxClasses, cc.Shape, k, k)
		}
		if classes, err = ep.Float32s(cc); err != nil {
			return err
		}
	}
	pd.boxes, pd.classes, pd.boxK = boxes, classes, k
	return nil
}

// stepBoxes checks step t's boxes like a capture label's bbox_px: valid
// ones go to smp.Boxes (clamped to the frame), each problem is a reason.
// A step whose rows are all padding is empty.
func (pd *partData) stepBoxes(smp *sources.Sample, t int) {
	rows := pd.boxes[t*pd.boxK*4 : (t+1)*pd.boxK*4]
	n := 0
	for i := range pd.boxK {
		r := rows[i*4 : i*4+4]
		if isPadding(r) {
			continue
		}
		n++
		b := [4]float64{float64(r[0]), float64(r[1]), float64(r[2]), float64(r[3])}
		var class sources.ClassKey
		if pd.classes != nil {
			v := float64(pd.classes[t*pd.boxK+i])
			if v != math.Trunc(v) || math.IsInf(v, 0) {
				smp.Reject(validate.ReasonBadSchema, fmt.Sprintf("box %d: class %v is not an integer", i, v))
				continue
			}
			class = sources.ClassKey{ID: int64(v), HasID: true}
		}
		var px [4]float64
		var reason validate.Reason
		if pd.w > 0 {
			px, reason = validate.CheckPx(b, pd.w, pd.h)
		} else {
			reason = validate.CheckOrder(b)
		}
		if reason != "" {
			smp.Reject(reason, fmt.Sprintf("box %d: %s", i, validate.ExplainBox("box", b, reason, pd.w, pd.h)))
			continue
		}
		smp.ValidBoxes++
		if pd.w > 0 {
			smp.Boxes = append(smp.Boxes, sources.Box{X0: px[0], Y0: px[1], X1: px[2], Y1: px[3], Class: class})
		}
	}
	if n == 0 {
		smp.Reject(validate.ReasonEmpty, "every box row of this step is padding")
	}
}

// isPadding reports a label row of four zeros or four NaNs.
func isPadding(r []float32) bool {
	zeros, nans := 0, 0
	for _, v := range r {
		switch {
		case v == 0:
			zeros++
		case v != v:
			nans++
		}
	}
	return zeros == 4 || nans == 4
}

// episodeScan turns one episode plan into samples.
type episodeScan struct {
	s     *Source
	index int32
	em    *emitter
	name  string
	attrs map[string]string

	chunked    bool
	next       int64 // chunked: the first step not yet read
	w, h       int   // frame size of the first part that has one
	haveTs     bool
	ts0        int64
	lastTs     int64
	steps      int64
	problems   int
	firstError string
	details    validate.Details // the first problem of each reason, in words
}

func (es *episodeScan) entry() warehouse.SourceEntry {
	es.attrs["steps"] = strconv.FormatInt(es.steps, 10)
	if es.problems > 0 {
		es.attrs["problems"] = strconv.Itoa(es.problems)
		es.attrs["error"] = es.firstError
	}
	return warehouse.SourceEntry{Index: int(es.index), Name: es.name, Attributes: es.attrs}
}

// maxLoggedProblems is how many problems of one episode are logged: a
// broken timestamp block can have one per step.
const maxLoggedProblems = 3

// problem records and logs one problem of the episode.
func (es *episodeScan) problem(err error) {
	if es.problems == 0 {
		es.firstError = err.Error()
	}
	es.problems++
	reason := validate.ReasonDecodeError
	var p *Problem
	if errors.As(err, &p) {
		reason = p.Reason
	}
	es.details.Note(reason, strings.TrimPrefix(err.Error(), "wshard: "))
	if es.problems > maxLoggedProblems {
		return // the count goes into the episode's attributes
	}
	es.s.log.Warn("wshard episode problem", "episode", es.name, "reason", string(reason), "err", err.Error())
}

// setName names the episode after its id, else its file.
func (es *episodeScan) setName(id, rel string) {
	if id == "" {
		id = strings.TrimSuffix(rel, Ext)
	}
	es.name = id
	es.attrs["episode_id"] = id
}

// describe records a part's metadata in the episode's attributes once.
func (es *episodeScan) describe(m Meta) {
	if _, ok := es.attrs["timebase"]; ok {
		return
	}
	if m.EnvID != "" {
		es.attrs["env_id"] = m.EnvID
	}
	es.attrs["timebase"] = m.Timebase.Type
	if m.Timebase.TickHz > 0 {
		es.attrs["tick_hz"] = strconv.FormatFloat(m.Timebase.TickHz, 'g', -1, 64)
	}
}

// placeholder emits the one sample that records an unreadable file.
func (es *episodeScan) placeholder(rel string, frame int64, err error) error {
	var p *Problem
	if !errors.As(err, &p) {
		return err
	}
	es.problem(err)
	return es.em.push(&sources.Sample{
		Source: es.name, SourceIndex: es.index, Frame: uint64(frame), ImagePath: rel,
		Reasons: []validate.Reason{p.Reason},
	})
}

func (es *episodeScan) run(p episodePlan) error {
	if p.manifest == nil {
		pd, err := es.s.readPart(p.rel)
		if err != nil {
			es.setName("", p.rel)
			return es.placeholder(p.rel, 0, err)
		}
		es.setName(pd.meta.EpisodeID, p.rel)
		return es.emit(pd, pd.meta.Start, nil, nil)
	}
	return es.runChunked(p.rel, p.manifest)
}

// runChunked reads a manifest's chunks in chunk order and checks that
// their steps join without gaps, overlaps or repeats.
func (es *episodeScan) runChunked(rel string, m *manifestPlan) error {
	es.chunked = true
	es.setName(m.episodeID, rel)
	if m.envID != "" {
		es.attrs["env_id"] = m.envID
	}
	es.attrs["chunks"] = strconv.Itoa(len(m.chunks))
	if m.problem != nil {
		return es.placeholder(rel, 0, m.problem)
	}
	if len(m.chunks) == 0 {
		return es.placeholder(rel, 0, problemf(validate.ReasonZeroFrames, rel, "manifest lists no chunks"))
	}
	prevIndex := -1
	distinct := 0
	for _, c := range m.chunks {
		var all, first []validate.Reason
		switch {
		case c.index == prevIndex:
			all = append(all, validate.ReasonChunkOverlap)
		case c.index != prevIndex+1:
			first = append(first, validate.ReasonEpisodeGap)
			distinct++
		default:
			distinct++
		}
		prevIndex = c.index
		declaredStart := es.next
		if c.declared {
			declaredStart = c.start
		}
		if c.rel == "" {
			if err := es.placeholder(rel, declaredStart, c.problem); err != nil {
				return err
			}
			es.skipDeclared(c)
			continue
		}
		pd, err := es.s.readPart(c.rel)
		if err != nil {
			if err := es.placeholder(c.rel, declaredStart, err); err != nil {
				return err
			}
			es.skipDeclared(c)
			continue
		}
		if c.problem != nil {
			if err := pd.note(c.problem); err != nil {
				return err
			}
		}
		start := declaredStart
		if pd.meta.RangeGiven {
			start = pd.meta.Start
		}
		if c.declared && (start != c.start || int64(pd.meta.Length) != c.length) {
			_ = pd.note(problemf(validate.ReasonLengthMismatch, c.rel, "chunk holds steps [%d, %d), the manifest says [%d, %d)", start, start+int64(pd.meta.Length), c.start, c.start+c.length))
		}
		if ci := pd.meta.ChunkIndex; ci != nil && *ci != c.index {
			_ = pd.note(problemf(validate.ReasonLengthMismatch, c.rel, "chunk_index %d, the manifest says %d", *ci, c.index))
		}
		if err := es.emit(pd, start, all, first); err != nil {
			return err
		}
	}
	var tail []validate.Reason
	if t := m.totalTimesteps; t != nil && es.next != *t {
		reason := validate.ReasonEpisodeGap
		if es.next > *t {
			reason = validate.ReasonLengthMismatch
		}
		tail = append(tail, reason)
		es.problem(problemf(reason, rel, "chunks end at step %d, total_timesteps is %d", es.next, *t))
	}
	if t := m.totalChunks; t != nil && *t > distinct {
		tail = append(tail, validate.ReasonEpisodeGap)
		es.problem(problemf(validate.ReasonEpisodeGap, rel, "%d of %d chunks are listed", distinct, *t))
	}
	return es.em.flush(tail...)
}

// skipDeclared moves past an unreadable chunk's declared steps, so that
// the next chunk is not reported as a gap on top of it.
func (es *episodeScan) skipDeclared(c chunkPlan) {
	if c.declared {
		es.next = max(es.next, c.start+c.length)
	}
}

// emit pushes one sample per step of a readable part. all are reasons for
// every step, first for the first step only.
func (es *episodeScan) emit(pd *partData, start int64, all, first []validate.Reason) error {
	es.describe(pd.meta)
	for _, err := range pd.problems {
		es.problem(err)
	}
	all = append(all, pd.reasons...)
	if es.w == 0 && pd.w > 0 {
		es.w, es.h = pd.w, pd.h
	} else if pd.w > 0 && (pd.w != es.w || pd.h != es.h) {
		all = append(all, validate.ReasonDimsMismatch)
		es.problem(problemf(validate.ReasonDimsMismatch, pd.rel, "frames are %dx%d, the episode's first chunk has %dx%d", pd.w, pd.h, es.w, es.h))
	}
	overlapUntil := int64(-1)
	if es.chunked {
		if start > es.next {
			first = append(first, validate.ReasonEpisodeGap)
			es.problem(problemf(validate.ReasonEpisodeGap, pd.rel, "starts at step %d, steps %d..%d are missing", start, es.next, start-1))
		}
		if start < es.next {
			overlapUntil = es.next
			es.problem(problemf(validate.ReasonChunkOverlap, pd.rel, "starts at step %d, steps up to %d were already read", start, es.next-1))
		}
	}
	T := pd.meta.Length
	tickHz := pd.meta.Timebase.TickHz
	for t := range T {
		step := start + int64(t)
		smp := &sources.Sample{
			Source: es.name, SourceIndex: es.index, Frame: uint64(step), ImagePath: pd.rel,
			Width: pd.w, Height: pd.h, Locator: pd.rel + "#" + strconv.Itoa(t),
			Reasons: slices.Clone(all),
		}
		if t == 0 {
			smp.Reasons = append(smp.Reasons, first...)
		}
		if step < overlapUntil {
			smp.Reasons = append(smp.Reasons, validate.ReasonChunkOverlap)
		}
		switch {
		case pd.ts != nil:
			ts := pd.ts[t]
			if !es.haveTs {
				es.haveTs, es.ts0 = true, ts
			} else if ts <= es.lastTs {
				smp.Reasons = append(smp.Reasons, validate.ReasonTimestampNotMonotonic)
				es.problem(problemf(validate.ReasonTimestampNotMonotonic, pd.rel, "step %d at %d ns is not after the previous step at %d ns", step, ts, es.lastTs))
			}
			es.lastTs = ts
			smp.UnixTimeNs = ts
			smp.SimTime = float64(ts-es.ts0) / 1e9
		case tickHz > 0:
			smp.SimTime = float64(step) / tickHz
		}
		if pd.extras != nil {
			n := es.s.extraN
			smp.Extras = pd.extras[t*n : (t+1)*n : (t+1)*n]
		}
		if pd.boxes != nil {
			pd.stepBoxes(smp, t)
		}
		if err := es.em.push(smp); err != nil {
			return err
		}
	}
	es.steps += int64(T)
	es.next = max(es.next, start+int64(T))
	return nil
}
