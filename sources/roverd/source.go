// Package roverd reads roverd datasets (github.com/RadarML/red-rover,
// format/): multi-sensor recordings in which every sensor is a folder of
// channel files described by its meta.json. One sample is one frame of the
// configured camera sensor, timestamped by the sensor's ts channel; extras
// are channels of other sensors joined to the frame by nearest timestamp.
//
//	<root>/                        a folder of datasets, or itself one dataset
//	  drive_2/                     a dataset: any folder with a sensor in it
//	    config.yaml                not read
//	    camera/                    a sensor: any folder with a meta.json
//	      meta.json                {"ts": {"format": "raw", "type": "f8", "shape": []},
//	                                "video.avi": {"format": "mjpg", "type": "u1", "shape": [H, W, 3]}}
//	      ts                       N little-endian f8: epoch seconds
//	      video.avi                N frames
//	    imu/
//	      meta.json, ts
//	      acc                      raw:   N records of shape x type, back to back
//	      avel                     lzma:  the same, as one .xz stream
//	      rot, rot_i               lzmaf: one .xz stream per record; rot_i has N+1 u64 offsets
//	      (npz: a folder 000000.npz ...; jpg: a folder 000000.jpg ...)
//	    _odom/                     "_" folders are skipped unless IncludeUnderscore
//
// The root is one dataset when one of its sub-folders holds a meta.json;
// otherwise its sub-folders that hold sensors are the datasets, in natural
// order (drive_2 before drive_10). Folders starting with "." are never
// read, folders starting with "_" only with IncludeUnderscore; symbolic
// links are not followed.
//
// # Samples
//
// The camera's image channel is the one Options.Camera names
// ("camera/video.avi"), or else the sensor's only image channel: mjpg and
// jpg before raw, lzmaf or npz channels of type u1 and shape [H, W, 3],
// [H, W, 1] or [H, W] (grayscale is expanded to RGB). Frames are in file
// order; Width and Height come from the first readable frame's JPEG
// header (mjpg, jpg) or from the shape. Each frame's extras are read from
// the record of each configured channel whose sensor timestamp is nearest
// to the frame's (ties go to the earlier record), if no further than
// Options.Tolerance.
//
// # Crash tolerance and reasons
//
// roverd appends to every file as it records, so a crash leaves a partial
// trailing record, channels of one sensor with different lengths, lzmaf
// offsets ahead of the data, or an AVI without its index. Each sensor
// that is read uses the common length of the channels read from it (ts,
// the image channel, the configured extras channels), and every sample of
// the dataset then carries the length_truncated warning; the dataset's
// entry says what was dropped ("truncated"). A crash never fails a
// dataset. Other problems become reason codes:
//
//	camera_missing            the dataset has no camera sensor (one placeholder sample)
//	bad_schema                a meta.json read is not JSON or not a channel table, or a channel
//	                          read has an unknown format or type name, or is not an image
//	missing_block             ts or an extras sensor/channel is not there
//	missing_file              the image channel's file or folder is not there (placeholder)
//	decode_error              the AVI is not a readable MJPEG AVI (placeholder), a frame chunk is
//	                          empty, or no frame header gives the image size
//	zero_frames               the camera has no complete frame (placeholder)
//	dims_mismatch             the frames' size disagrees with the meta.json shape
//	timestamp_not_monotonic   a frame's ts is not finite or not after the previous frame's; or
//	                          an extras sensor's ts is not strictly increasing (every sample)
//	no_match_within_tolerance no record of an extras sensor is near enough to the frame
//	length_mismatch           an extras channel's shape differs from the first dataset's
//	decompress_error          an .xz stream, lzmaf offsets file or .npz archive is corrupt
//	block_size_mismatch       a record decompresses to the wrong size or shape
//
// A placeholder sample (frame 0, no image) stands for a dataset whose
// camera cannot be read at all, so that it is counted, never silently
// absent; its entry's "error" attribute says why. Errors the operating
// system reports (permissions, I/O) fail the scan, naming the file.
package roverd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/sources/roverd/xzstream"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Kind is the config name of this layout.
const Kind = "roverd"

// DefaultCamera is the camera sensor when Options.Camera is empty: the
// name roverd's collector gives it.
const DefaultCamera = "camera"

// Limits.
const (
	DefaultMaxChannelBytes int64 = 512 << 20 // an lzma channel decompressed as a whole (an hour of 1 kHz IMU is 43 MB)
	MaxTimestampBytes      int64 = 256 << 20 // a ts file: 33 million records
	MaxFrameBytes          int64 = 64 << 20  // one JPEG frame or file
	headerProbeFrames            = 8         // frames tried for the image size
)

// Options tune a Source.
type Options struct {
	// Camera is the camera sensor, "sensor" or "sensor/channel"; empty
	// means DefaultCamera and its only image channel.
	Camera string
	// Extras are the channels carried per sample, each "sensor/channel".
	Extras []string
	// ToleranceMs is the largest distance in time, in milliseconds, between
	// a frame and the extras record joined to it; 0 joins only equal
	// timestamps. (Milliseconds as in the config's source.tolerance_ms.)
	ToleranceMs float64
	// IncludeUnderscore also reads datasets and sensors whose folder
	// name starts with "_".
	IncludeUnderscore bool
	// MaxChannelBytes bounds an lzma channel's decompressed size; 0 means
	// DefaultMaxChannelBytes.
	MaxChannelBytes int64
	// Logger receives warnings about truncated and unreadable datasets;
	// nil discards them (they are also in the reasons and entries).
	Logger *slog.Logger
}

// channelRef is a "sensor/channel" name.
type channelRef struct{ sensor, channel string }

func (r channelRef) String() string { return r.sensor + "/" + r.channel }

// Source reads the roverd datasets under a root.
type Source struct {
	root     string
	opts     Options
	log      *slog.Logger
	camera   channelRef // channel "" = the sensor's only image channel
	extras   []channelRef
	specs    []sources.ExtraSpec
	shapes   [][]int // each extra's shape, as in specs
	tolerSec float64

	entries []warehouse.SourceEntry
	cams    []*cameraInfo // per dataset of the last Scan; nil for a placeholder
	readers readerCache
}

var _ sources.Source = (*Source)(nil)

// New checks the options and the root and reads the extras' shapes and
// types from the first dataset that declares each of them.
func New(root string, opts Options) (*Source, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("roverd: dataset root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("roverd: dataset root %s is not a directory", root)
	}
	if !(opts.ToleranceMs >= 0) || math.IsInf(opts.ToleranceMs, 0) {
		return nil, errors.New("roverd: tolerance must be finite and not negative")
	}
	if opts.MaxChannelBytes == 0 {
		opts.MaxChannelBytes = DefaultMaxChannelBytes
	}
	s := &Source{root: root, opts: opts, log: opts.Logger, tolerSec: opts.ToleranceMs / 1000}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	cam := opts.Camera
	if cam == "" {
		cam = DefaultCamera
	}
	sensor, channel, _ := strings.Cut(cam, "/")
	s.camera = channelRef{sensor, channel}
	if err := s.checkName("source.camera", cam, sensor, channel, false); err != nil {
		return nil, err
	}
	for i, e := range opts.Extras {
		sensor, channel, _ := strings.Cut(e, "/")
		if err := s.checkName("source.extras", e, sensor, channel, true); err != nil {
			return nil, err
		}
		if slices.Contains(opts.Extras[:i], e) {
			return nil, fmt.Errorf("roverd: source.extras: %q is repeated", e)
		}
		s.extras = append(s.extras, channelRef{sensor, channel})
	}
	if err := s.resolveExtras(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkName validates a configured "sensor/channel" name.
func (s *Source) checkName(key, full, sensor, channel string, needChannel bool) error {
	switch {
	case sensor == "" || strings.ContainsAny(sensor, `\`) || sensor == "." || sensor == "..":
		return fmt.Errorf("roverd: %s %q: not a sensor name", key, full)
	case needChannel && channel == "":
		return fmt.Errorf("roverd: %s %q: want sensor/channel, e.g. imu/acc", key, full)
	case strings.ContainsAny(channel, `/\`) || channel == "." || channel == "..":
		return fmt.Errorf("roverd: %s %q: not a channel name", key, full)
	case strings.HasPrefix(sensor, "_") && !s.opts.IncludeUnderscore:
		return fmt.Errorf("roverd: %s %q: sensor folders starting with \"_\" are skipped; set source.include_underscore to read them", key, full)
	case strings.HasPrefix(sensor, "."):
		return fmt.Errorf("roverd: %s %q: sensor folders starting with \".\" are never read", key, full)
	}
	return nil
}

// resolveExtras takes each extra's shape and type from the first dataset
// (in scan order) whose meta.json declares it readably.
func (s *Source) resolveExtras() error {
	if len(s.extras) == 0 {
		return nil
	}
	datasets, err := s.datasets()
	if err != nil {
		return err
	}
	s.specs = make([]sources.ExtraSpec, len(s.extras))
	s.shapes = make([][]int, len(s.extras))
	for i, ref := range s.extras {
		var firstErr error
		found := false
		for _, ds := range datasets {
			if !slices.Contains(ds.sensors, ref.sensor) {
				continue
			}
			meta, err := readMeta(filepath.Join(ds.dir, ref.sensor))
			if err == nil {
				var c Channel
				if c, err = numericChannel(meta, ref.channel); err == nil {
					s.specs[i] = sources.ExtraSpec{Name: ref.String(), Shape: slices.Clone(c.Shape), SourceDType: c.DType.Canonical()}
					s.shapes[i] = c.Shape
					found = true
					break
				}
			}
			if isOSError(err) {
				return fmt.Errorf("roverd: %s: %w", ds.name, err)
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("%s/%s: %w", ds.name, ref.sensor, err)
			}
		}
		if !found {
			if firstErr == nil {
				firstErr = fmt.Errorf("no dataset has a sensor %q", ref.sensor)
			}
			return fmt.Errorf("roverd: source.extras %q: no dataset declares it readably: %w", ref.String(), firstErr)
		}
	}
	return nil
}

// numericChannel resolves a channel that can be an extra.
func numericChannel(m *Meta, name string) (Channel, error) {
	c, err := m.Channel(name)
	if err != nil {
		return Channel{}, err
	}
	if c.Format == FormatMJPG || c.Format == FormatJPG {
		return Channel{}, metaErrorf("channel %q: format %s holds images, not numbers", name, c.Format)
	}
	return c, nil
}

// Kind returns "roverd".
func (s *Source) Kind() string { return Kind }

// Extras describes the configured extras, in order.
func (s *Source) Extras() []sources.ExtraSpec { return s.specs }

// Entries describes the datasets of the last Scan.
func (s *Source) Entries() []warehouse.SourceEntry { return s.entries }

// dataset is one recording folder.
type dataset struct {
	name    string   // Sample.Source: the folder name
	dir     string   // the folder
	rel     string   // its path relative to the root ("" when the root is the dataset)
	sensors []string // sub-folders holding a meta.json, byte order
}

// relPath is p inside the dataset, relative to the root, slash-separated.
func (d dataset) relPath(p ...string) string {
	return path.Join(append([]string{d.rel}, p...)...)
}

// datasets lists the datasets under the root in scan order.
func (s *Source) datasets() ([]dataset, error) {
	sensors, err := s.sensorFolders(s.root, true)
	if err != nil {
		return nil, err
	}
	if len(sensors) > 0 {
		ds := dataset{name: filepath.Base(filepath.Clean(s.root)), dir: s.root}
		ds.sensors, err = s.sensorFolders(s.root, false)
		return []dataset{ds}, err
	}
	entries, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("roverd: list datasets: %w", err)
	}
	var out []dataset
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !s.readable(name) {
			continue
		}
		dir := filepath.Join(s.root, name)
		sensors, err := s.sensorFolders(dir, false)
		if err != nil {
			return nil, err
		}
		if len(sensors) > 0 {
			out = append(out, dataset{name: name, dir: dir, rel: name, sensors: sensors})
		}
	}
	slices.SortFunc(out, func(a, b dataset) int { return sources.NaturalCompare(a.name, b.name) })
	return out, nil
}

// readable says whether a folder name is read: never ".x", "_x" only with
// IncludeUnderscore.
func (s *Source) readable(name string) bool {
	return !strings.HasPrefix(name, ".") && (s.opts.IncludeUnderscore || !strings.HasPrefix(name, "_"))
}

// sensorFolders lists the sub-folders of dir that hold a meta.json file;
// any includes "_" folders whatever the options say (deciding whether a
// folder is a dataset at all).
func (s *Source) sensorFolders(dir string, any bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("roverd: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || (!any && !s.readable(name)) {
			continue
		}
		st, err := os.Lstat(filepath.Join(dir, name, "meta.json"))
		switch {
		case err == nil && st.Mode().IsRegular():
			out = append(out, name)
		case err == nil || errors.Is(err, fs.ErrNotExist):
		default:
			return nil, fmt.Errorf("roverd: %s: %w", filepath.Join(dir, name), err)
		}
	}
	return out, nil // os.ReadDir sorts by name
}

// readMeta reads and parses a sensor's meta.json, refusing oversized files
// before reading them.
func readMeta(sensorDir string) (*Meta, error) {
	p := filepath.Join(sensorDir, "meta.json")
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxMetaBytes {
		return nil, metaErrorf("%d bytes, more than the limit of %d", st.Size(), MaxMetaBytes)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return ParseMeta(data)
}

// readTimestamps reads a sensor's ts channel: complete f8 records, and a
// note when a partial one was dropped.
func readTimestamps(sensorDir string) ([]float64, extent, error) {
	p := filepath.Join(sensorDir, TimestampChannel)
	st, err := os.Stat(p)
	if err != nil {
		return nil, extent{}, err
	}
	if st.Size() > MaxTimestampBytes {
		return nil, extent{}, fmt.Errorf("%w: ts is %d bytes, more than the limit of %d", ErrRecordSize, st.Size(), MaxTimestampBytes)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, extent{}, err
	}
	ts := DType{'f', 8}
	vals := make([]float64, len(data)/8)
	for i := range vals {
		vals[i] = math.Float64frombits(leUint64(data[8*i:]))
	}
	ext := extent{n: len(vals)}
	if rest := len(data) % 8; rest != 0 {
		ext.dropped = partialNote(int64(rest), int64(ts.Size))
	}
	return vals, ext, nil
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// failure is a problem that decides a reason for a whole dataset (camera)
// or for every sample's extras (an extras sensor).
type failure struct {
	reason validate.Reason
	err    error
}

func (f *failure) Error() string { return f.err.Error() }

// message is err's text with the dataset root cut from the paths in it:
// what goes into the manifest must be the same on every machine.
func (s *Source) message(err error) string {
	return strings.ReplaceAll(err.Error(), filepath.Clean(s.root)+string(filepath.Separator), "")
}

// isOSError reports errors that are not about the data: the scan fails on
// them instead of recording a reason.
func isOSError(err error) bool {
	var pe *fs.PathError
	return err != nil && errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist)
}

// classify turns a data error into a failure with the reason it stands
// for; absent is the reason for a file that does not exist.
func classify(err error, absent validate.Reason) *failure {
	r := validate.ReasonDecodeError
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrNoChannel):
		r = absent
	case errors.Is(err, ErrMeta), errors.Is(err, ErrUnknownType):
		r = validate.ReasonBadSchema
	case errors.Is(err, ErrRecordSize):
		r = validate.ReasonBlockSizeMismatch
	case errors.Is(err, xzstream.ErrCorrupt), errors.Is(err, xzstream.ErrTooLarge),
		errors.Is(err, xzstream.ErrUnsupported), errors.Is(err, ErrCorruptChannel), errors.Is(err, ErrNPY):
		r = validate.ReasonDecompressError
	}
	return &failure{reason: r, err: err}
}

// Scan calls fn for every frame of every dataset's camera (see the package
// documentation).
func (s *Source) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	datasets, err := s.datasets()
	if err != nil {
		return err
	}
	s.entries = make([]warehouse.SourceEntry, len(datasets))
	s.cams = make([]*cameraInfo, len(datasets))
	s.readers.reset()
	var seq int64
	for i, ds := range datasets {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.scanDataset(ctx, i, ds, &seq, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) scanDataset(ctx context.Context, i int, ds dataset, seq *int64, fn func(*sources.Sample) error) error {
	attrs := map[string]string{"sensors": strings.Join(ds.sensors, ",")} // filled in as the dataset is read
	s.entries[i] = warehouse.SourceEntry{Index: i, Name: ds.name, Attributes: attrs}
	emit := func(smp *sources.Sample) error {
		smp.Seq, smp.Source, smp.SourceIndex = *seq, ds.name, int32(i)
		*seq++
		return fn(smp)
	}
	cam, fail := s.openCamera(ds)
	if fail != nil {
		if isOSError(fail.err) {
			return fmt.Errorf("roverd: %s: %w", ds.name, fail.err)
		}
		attrs["error"] = s.message(fail.err)
		s.log.Warn("roverd dataset has no readable camera", "dataset", ds.name, "reason", fail.reason, "err", fail.err)
		smp := &sources.Sample{Locator: ds.name + "/" + s.camera.sensor}
		smp.Reject(fail.reason, attrs["error"])
		return emit(smp)
	}
	s.cams[i] = cam.info
	s.readers.put(i, cam.reader)
	attrs["camera"] = s.camera.sensor + "/" + cam.info.channel.Name
	attrs["frames"] = strconv.Itoa(cam.info.n)
	attrs["start_unix_s"] = strconv.FormatFloat(cam.ts[0], 'f', 6, 64)
	notes := cam.notes

	groups, slots, err := s.openExtras(ds)
	if err != nil {
		return err
	}
	var extrasErrs []string
	for _, g := range groups {
		notes = append(notes, g.notes...)
		if g.fail != nil {
			extrasErrs = append(extrasErrs, g.sensor+": "+s.message(g.fail.err))
			s.log.Warn("roverd extras sensor unreadable", "dataset", ds.name, "sensor", g.sensor, "reason", g.fail.reason, "err", g.fail.err)
		}
	}
	common := slices.Clone(cam.reasons)
	commonDetails := maps.Clone(cam.details)
	if len(notes) > 0 {
		common = append(common, validate.ReasonLengthTruncated)
		attrs["truncated"] = strings.Join(notes, "; ")
		commonDetails.Note(validate.ReasonLengthTruncated, attrs["truncated"])
		s.log.Warn("roverd dataset truncated: using the common length", "dataset", ds.name, "dropped", attrs["truncated"])
	}
	if len(extrasErrs) > 0 {
		attrs["extras_error"] = strings.Join(extrasErrs, "; ")
	}
	for k, note := range cam.attrs {
		attrs[k] = note
	}

	for k := 0; k < cam.info.n; k++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		smp := &sources.Sample{
			Frame:     uint64(k),
			Width:     cam.info.width,
			Height:    cam.info.height,
			ImagePath: ds.relPath(s.camera.sensor, cam.info.imageFile(k)),
			Locator:   fmt.Sprintf("%s/%s#%d", ds.name, s.camera.sensor, k),
			Reasons:   slices.Clone(common),
			Details:   maps.Clone(commonDetails),
		}
		t := cam.ts[k]
		finite := !math.IsNaN(t) && !math.IsInf(t, 0)
		if finite && math.Abs(t) < math.MaxInt64/1e9 {
			smp.UnixTimeNs = int64(math.Round(t * 1e9))
		}
		switch {
		case !finite:
			smp.Reject(validate.ReasonTimestampNotMonotonic, fmt.Sprintf("timestamp %v", t))
		case k > 0 && !math.IsNaN(cam.ts[k-1]) && !(t > cam.ts[k-1]):
			smp.Reject(validate.ReasonTimestampNotMonotonic, fmt.Sprintf("timestamp %.6f s is not after the previous frame's %.6f s", t, cam.ts[k-1]))
		}
		if cam.emptyFrame(k) {
			smp.Reject(validate.ReasonDecodeError, "the frame's chunk in the AVI is 0 bytes")
		}
		// A frame without a finite time cannot be joined; its timestamp
		// reason says why.
		if len(s.extras) > 0 && finite {
			vals, reasons, err := s.joinExtras(groups, slots, t, &smp.Details)
			if err != nil {
				return fmt.Errorf("roverd: %s frame %d: %w", ds.name, k, err)
			}
			smp.Reasons = append(smp.Reasons, reasons...)
			if len(reasons) == 0 {
				smp.Extras = vals
			}
		}
		smp.Reasons = validate.Normalize(smp.Reasons)
		if err := emit(smp); err != nil {
			return err
		}
	}
	return nil
}

// extraGroup is one extras sensor of one dataset.
type extraGroup struct {
	sensor string
	ts     []float64 // the common length
	fail   *failure  // set: every sample gets fail.reason
	recs   map[string]records
	dtypes map[string]DType
	notes  []string
}

// match returns the index of the record nearest to t, if within tolerance.
// ts is strictly increasing; ties go to the earlier record.
func (g *extraGroup) match(t, tol float64) (int, bool) {
	i := sort.SearchFloat64s(g.ts, t) // first ts >= t
	best, bestD := -1, math.Inf(1)
	if i > 0 {
		best, bestD = i-1, t-g.ts[i-1]
	}
	if i < len(g.ts) && g.ts[i]-t < bestD {
		best, bestD = i, g.ts[i]-t
	}
	return best, best >= 0 && bestD <= tol
}

// openExtras opens every extras sensor of a dataset; slot i is the group
// of extra i. Problems with the data become each group's failure; only OS
// errors are returned.
func (s *Source) openExtras(ds dataset) (groups, slots []*extraGroup, err error) {
	bySensor := map[string]*extraGroup{}
	for _, ref := range s.extras {
		g := bySensor[ref.sensor]
		if g == nil {
			g = &extraGroup{sensor: ref.sensor, recs: map[string]records{}, dtypes: map[string]DType{}}
			bySensor[ref.sensor] = g
			groups = append(groups, g)
		}
		slots = append(slots, g)
	}
	for _, g := range groups {
		if err := s.openGroup(ds, g); err != nil {
			return nil, nil, err
		}
	}
	return groups, slots, nil
}

func (s *Source) openGroup(ds dataset, g *extraGroup) error {
	fail := func(f *failure) error {
		if isOSError(f.err) {
			return fmt.Errorf("roverd: %s/%s: %w", ds.name, g.sensor, f.err)
		}
		g.fail = f
		return nil
	}
	if !slices.Contains(ds.sensors, g.sensor) {
		return fail(&failure{validate.ReasonMissingBlock, fmt.Errorf("no sensor %q (sensors: %s)", g.sensor, strings.Join(ds.sensors, ", "))})
	}
	dir := filepath.Join(ds.dir, g.sensor)
	meta, err := readMeta(dir)
	if err != nil {
		return fail(classify(err, validate.ReasonBadSchema))
	}
	if _, err := meta.timestamps(); err != nil {
		return fail(classify(err, validate.ReasonMissingBlock))
	}
	ts, ext, err := readTimestamps(dir)
	if err != nil {
		return fail(classify(err, validate.ReasonMissingBlock))
	}
	lengths := []namedExtent{{TimestampChannel, ext}}
	for i, ref := range s.extras {
		if ref.sensor != g.sensor {
			continue
		}
		c, err := numericChannel(meta, ref.channel)
		if err != nil {
			return fail(classify(err, validate.ReasonMissingBlock))
		}
		if !slices.Equal(c.Shape, s.shapes[i]) {
			return fail(&failure{validate.ReasonLengthMismatch, fmt.Errorf("channel %s has shape %v, the extra is %v", ref.channel, c.Shape, s.shapes[i])})
		}
		recs, ext, err := openRecords(dir, c, s.opts.MaxChannelBytes)
		if err != nil {
			return fail(classify(err, validate.ReasonMissingBlock))
		}
		g.recs[ref.channel], g.dtypes[ref.channel] = recs, c.DType
		lengths = append(lengths, namedExtent{ref.channel, ext})
	}
	n, note := commonLength(g.sensor, lengths)
	if note != "" {
		g.notes = append(g.notes, note)
	}
	g.ts = ts[:n]
	for j := range g.ts {
		if t := g.ts[j]; math.IsNaN(t) || math.IsInf(t, 0) || (j > 0 && !(t > g.ts[j-1])) {
			return fail(&failure{validate.ReasonTimestampNotMonotonic, fmt.Errorf("ts record %d (%v) is not finite or not after record %d", j, t, j-1)})
		}
	}
	return nil
}

// namedExtent is one channel's extent, for the truncation note.
type namedExtent struct {
	name string
	ext  extent
}

// commonLength is the smallest record count, with a note describing every
// channel when they disagree or one dropped something: e.g. "imu: ts 91,
// acc 90 (+ a partial trailing record of 7 of 12 bytes), avel 90 -> 90".
func commonLength(sensor string, ls []namedExtent) (int, string) {
	n := ls[0].ext.n
	clean := true
	for _, l := range ls {
		n = min(n, l.ext.n)
		if l.ext.n != ls[0].ext.n || l.ext.dropped != "" {
			clean = false
		}
	}
	if clean {
		return n, ""
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s %d", l.name, l.ext.n)
		if l.ext.dropped != "" {
			parts[i] += " (+ " + l.ext.dropped + ")"
		}
	}
	return n, fmt.Sprintf("%s: %s -> %d", sensor, strings.Join(parts, ", "), n)
}

// joinExtras reads the configured extras for a frame at time t. A data
// problem becomes reasons (all of them); an OS error is returned.
func (s *Source) joinExtras(groups, slots []*extraGroup, t float64, d *validate.Details) ([]float32, []validate.Reason, error) {
	var reasons []validate.Reason
	matched := make(map[*extraGroup]int, len(groups))
	for _, g := range groups {
		if g.fail != nil {
			reasons = append(reasons, g.fail.reason)
			d.Note(g.fail.reason, g.sensor+": "+s.message(g.fail.err))
			continue
		}
		j, ok := g.match(t, s.tolerSec)
		if !ok {
			reasons = append(reasons, validate.ReasonNoMatchWithinTolerance)
			d.Note(validate.ReasonNoMatchWithinTolerance, fmt.Sprintf("no %s sample within %g s of the frame at %.6f s", g.sensor, s.tolerSec, t))
			continue
		}
		matched[g] = j
	}
	if len(reasons) > 0 {
		return nil, reasons, nil
	}
	total := 0
	for _, sp := range s.specs {
		total += sp.Elements()
	}
	vals := make([]float32, 0, total)
	for i, ref := range s.extras {
		g := slots[i]
		rec, err := g.recs[ref.channel].Record(matched[g])
		if err != nil {
			if isOSError(err) {
				return nil, nil, err
			}
			f := classify(err, validate.ReasonMissingBlock)
			reasons = append(reasons, f.reason)
			d.Note(f.reason, g.sensor+": "+s.message(f.err))
			continue
		}
		vals = g.dtypes[ref.channel].AppendFloat32(vals, rec)
	}
	if len(reasons) > 0 {
		return nil, reasons, nil
	}
	return vals, nil, nil
}
