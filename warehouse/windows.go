package warehouse

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// EpisodesName is the episode index's file name inside a version directory
// (docs/format/manifest.md, "episodes.bin"). A build of a source with
// extras writes it; Files.Episodes names it.
const EpisodesName = "episodes.bin"

// EpisodesVersion is the episodes.bin layout this code writes and reads.
const EpisodesVersion = 1

const (
	episodesMagic  = "TWEP"
	episodesHeader = 24
	// maxEpisodeExtras is the shards' bound on extra_f32 (shard.md).
	maxEpisodeExtras = 65535
)

// ErrEpisodes wraps every problem of an episodes.bin file or of a window
// request against it.
var ErrEpisodes = errors.New("episode index invalid")

// ErrNoEpisodes is returned for windows over a version without an episode
// index: built before windows existed, or from a source without extras.
var ErrNoEpisodes = errors.New("no episode index (episodes.bin)")

// Episodes is episodes.bin: for every sample of the version, in sample
// order, its episode (the record's source_index), its step (the record's
// frame_id) and a copy of its extra_f32 values, the data a window gathers.
// One that ParseEpisodes (so Reader.Episodes) returned is safe for
// concurrent use; memory: 16 + 4 x E bytes per sample.
type Episodes struct {
	Episode []uint32
	Step    []uint64
	Extras  []float32 // Len() * E values, sample-major
	E       int

	order []int32 // sample indices sorted by (episode, step, index)
}

// Len is the number of samples.
func (e *Episodes) Len() int { return len(e.Episode) }

// episodesLayout returns where the sections of an episodes.bin of n
// samples and e extras start and its size; ok is false when the size does
// not fit in an int64.
func episodesLayout(n, e uint64) (steps, extras, size uint64, ok bool) {
	if n > math.MaxInt64/16 || e > maxEpisodeExtras {
		return 0, 0, 0, false
	}
	steps = (episodesHeader + 4*n + 7) &^ 7
	extras = steps + 8*n
	row := 4 * e
	if row != 0 && n > (math.MaxInt64-extras)/row {
		return 0, 0, 0, false
	}
	return steps, extras, extras + n*row, true
}

// EncodeEpisodes writes ep in the episodes.bin layout.
func EncodeEpisodes(w io.Writer, ep *Episodes) error {
	n := uint64(len(ep.Episode))
	if uint64(len(ep.Step)) != n || ep.E < 0 || uint64(len(ep.Extras)) != n*uint64(ep.E) {
		return fmt.Errorf("%w: %d episodes, %d steps, %d extras of %d per sample", ErrEpisodes, n, len(ep.Step), len(ep.Extras), ep.E)
	}
	stepsOff, _, size, ok := episodesLayout(n, uint64(ep.E))
	if !ok {
		return fmt.Errorf("%w: %d samples of %d extras do not fit", ErrEpisodes, n, ep.E)
	}
	b := make([]byte, 0, size)
	b = append(b, episodesMagic...)
	b = binary.LittleEndian.AppendUint32(b, EpisodesVersion)
	b = binary.LittleEndian.AppendUint64(b, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(ep.E))
	b = binary.LittleEndian.AppendUint32(b, 0)
	for _, v := range ep.Episode {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	b = append(b, make([]byte, int(stepsOff)-len(b))...)
	for _, v := range ep.Step {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	for _, v := range ep.Extras {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	_, err := w.Write(b)
	return err
}

// ParseEpisodes decodes an episodes.bin, checking its header against the
// manifest's samples and extra_f32 before allocating, and its size.
func ParseEpisodes(b []byte, samples int64, extraF32 int) (*Episodes, error) {
	if len(b) < episodesHeader {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrEpisodes, len(b), episodesHeader)
	}
	if string(b[:4]) != episodesMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrEpisodes, b[:4], episodesMagic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[4:]); v != EpisodesVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrEpisodes, v, EpisodesVersion)
	}
	n, e := le.Uint64(b[8:]), le.Uint32(b[16:])
	if le.Uint32(b[20:]) != 0 {
		return nil, fmt.Errorf("%w: reserved header bytes are not zero", ErrEpisodes)
	}
	if samples < 0 || n != uint64(samples) || extraF32 < 0 || uint64(e) != uint64(extraF32) {
		return nil, fmt.Errorf("%w: %d samples of %d extras, the manifest says %d of %d", ErrEpisodes, n, e, samples, extraF32)
	}
	stepsOff, extrasOff, size, ok := episodesLayout(n, uint64(e))
	if !ok || uint64(len(b)) != size {
		return nil, fmt.Errorf("%w: %d bytes, want %d for %d samples of %d extras", ErrEpisodes, len(b), size, n, e)
	}
	if !allZero(b[episodesHeader+4*n : stepsOff]) {
		return nil, fmt.Errorf("%w: padding before the steps is not zero", ErrEpisodes)
	}
	ep := &Episodes{Episode: make([]uint32, n), Step: make([]uint64, n), Extras: make([]float32, n*uint64(e)), E: int(e)}
	for i := range ep.Episode {
		ep.Episode[i] = le.Uint32(b[episodesHeader+4*i:])
		ep.Step[i] = le.Uint64(b[int(stepsOff)+8*i:])
	}
	for i := range ep.Extras {
		ep.Extras[i] = math.Float32frombits(le.Uint32(b[int(extrasOff)+4*i:]))
	}
	ep.index()
	return ep, nil
}

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

// index sorts the samples by (episode, step, index): the order windows
// search, whatever order the epoch reads in.
func (e *Episodes) index() {
	e.order = make([]int32, len(e.Episode))
	for i := range e.order {
		e.order[i] = int32(i)
	}
	slices.SortFunc(e.order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(e.Episode[a], e.Episode[b]), cmp.Compare(e.Step[a], e.Step[b]), cmp.Compare(a, b))
	})
}

// position is the first place in order whose (episode, step) is above
// (ep, step), or not below it when !above.
func (e *Episodes) position(ep uint32, step uint64, above bool) int {
	lo, hi := 0, len(e.order)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		j := e.order[m]
		if e.Episode[j] < ep || e.Episode[j] == ep && (e.Step[j] < step || above && e.Step[j] == step) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Neighbour returns the sample a window anchored at sample i reads for
// step offset d, and whether it is the sample at step step(i)+d of i's
// episode (valid). When there is none (before the episode's first kept
// step, after its last, or a step that was skipped) it returns the kept
// sample of the same episode nearest to that step on the anchor's side:
// the episode's first or last frame past its ends, as LeRobot pads, and
// the last kept frame before a gap. The anchor itself is kept, so a
// sample is always found.
func (e *Episodes) Neighbour(i, d int) (j int, valid bool) {
	if e.order == nil {
		e.index()
	}
	ep, s := e.Episode[i], e.Step[i]
	switch {
	case d == 0:
		return i, true
	case d > 0:
		t := s + uint64(d)
		exact := t >= s // no wrap past 2^64-1
		if !exact {
			t = math.MaxUint64
		}
		// The last sample of ep with step <= t.
		j = int(e.order[e.position(ep, t, true)-1])
		return j, exact && e.Step[j] == t
	default:
		back := uint64(-int64(d))
		t, exact := uint64(0), back <= s
		if exact {
			t = s - back
		}
		// The first sample of ep with step >= t.
		j = int(e.order[e.position(ep, t, false)])
		return j, exact && e.Step[j] == t
	}
}

// Window gathers the values of extra x for sample i at each step offset of
// offsets into dst (len(offsets) * prod(x.Shape) values, offset-major) and
// sets valid[k] to whether offsets[k] named a kept step of i's episode;
// an invalid step repeats the nearest kept frame (Neighbour).
func (e *Episodes) Window(i int, x Extra, offsets []int, dst []float32, valid []bool) error {
	n := 1
	for _, d := range x.Shape {
		n *= d
	}
	if i < 0 || i >= e.Len() {
		return fmt.Errorf("%w: sample %d of %d", ErrEpisodes, i, e.Len())
	}
	if x.Offset < 0 || x.Offset+n > e.E {
		return fmt.Errorf("%w: extra %s at [%d, %d) outside the %d extras", ErrEpisodes, x.Name, x.Offset, x.Offset+n, e.E)
	}
	if len(dst) != len(offsets)*n || len(valid) != len(offsets) {
		return fmt.Errorf("%w: window of %d steps of %d values into %d values and %d flags", ErrEpisodes, len(offsets), n, len(dst), len(valid))
	}
	for k, d := range offsets {
		j, ok := e.Neighbour(i, d)
		copy(dst[k*n:(k+1)*n], e.Extras[j*e.E+x.Offset:j*e.E+x.Offset+n])
		valid[k] = ok
	}
	return nil
}

// WindowBatch is Window for every sample of indices (a Batch's Indices):
// dst holds len(indices) x len(offsets) x prod(x.Shape) values and valid
// len(indices) x len(offsets) flags, sample-major, as the Python loader's
// [B, W, dim] and [B, W].
func (e *Episodes) WindowBatch(indices []int, x Extra, offsets []int, dst []float32, valid []bool) error {
	n := 1
	for _, d := range x.Shape {
		n *= d
	}
	w := len(offsets)
	if len(dst) != len(indices)*w*n || len(valid) != len(indices)*w {
		return fmt.Errorf("%w: %d windows of %d steps of %d values into %d values and %d flags", ErrEpisodes, len(indices), w, n, len(dst), len(valid))
	}
	for b, i := range indices {
		if err := e.Window(i, x, offsets, dst[b*w*n:(b+1)*w*n], valid[b*w:(b+1)*w]); err != nil {
			return err
		}
	}
	return nil
}

// Episodes reads and checks the version's episode index: its size and
// sha256 against files.checksums, then its header against the manifest.
// A version without one gives an error wrapping ErrNoEpisodes.
func (r *Reader) Episodes(ctx context.Context) (*Episodes, error) {
	return ReadEpisodes(ctx, r.dir, r.manifest)
}

// ReadEpisodes is Reader.Episodes for a version directory and its manifest.
func ReadEpisodes(ctx context.Context, dir string, m *Manifest) (*Episodes, error) {
	name := m.Files.Episodes
	if name == "" {
		return nil, fmt.Errorf("%s: version %.16s: %w: it was built before episode windows or from a source without extras; rebuild it with WAREHOUSE_CLEAR=1 to gather windows", dir, m.Version, ErrNoEpisodes)
	}
	sum, ok := m.Files.Checksums[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w: files.checksums has no entry for %s", dir, ErrEpisodes, name)
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	got, err := FileSHA256(ctx, p)
	if err != nil {
		return nil, err
	}
	if got != sum {
		return nil, fmt.Errorf("%s: %w: %d bytes of sha256 %s, the manifest says %d bytes of %s", p, ErrEpisodes, got.Bytes, got.SHA256, sum.Bytes, sum.SHA256)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != sum.Bytes { // replaced between the hash and the read
		return nil, fmt.Errorf("%s: %w: changed while being read", p, ErrEpisodes)
	}
	e := 0
	for _, x := range m.Extras {
		n := 1
		for _, d := range x.Shape {
			n *= d
		}
		e = max(e, x.Offset+n)
	}
	ep, err := ParseEpisodes(b, m.Samples, e)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return ep, nil
}

// ExtraStats are the statistics of one extra over every sample of the
// version, per channel (each of its prod(shape) f32 values), computed
// exactly at build time (docs/format/manifest.md, "extra_stats"): Mean is
// the exact mean rounded once to float64, Std the square root of the
// exactly computed population variance (ddof 0) rounded to float64, Min
// and Max exact, Q01 and Q99 the 1% and 99% quantiles with linear
// interpolation between the sorted values (numpy's default method).
type ExtraStats struct {
	Name  string    `json:"name"`
	Count int64     `json:"count"`
	Mean  []float64 `json:"mean"`
	Std   []float64 `json:"std"`
	Min   []float64 `json:"min"`
	Max   []float64 `json:"max"`
	Q01   []float64 `json:"q01"`
	Q99   []float64 `json:"q99"`
}

// checkExtraStats checks extra_stats against extras (one entry per extra,
// same order and name, prod(shape) values per field, count = samples) and
// that files.episodes is covered by files.checksums.
func (m *Manifest) checkExtraStats() error {
	if m.Files.Episodes != "" && m.Files.Checksums == nil {
		return fmt.Errorf("files.episodes %q without files.checksums", m.Files.Episodes)
	}
	if m.ExtraStats == nil {
		return nil
	}
	if len(m.ExtraStats) != len(m.Extras) {
		return fmt.Errorf("extra_stats: %d entries for %d extras", len(m.ExtraStats), len(m.Extras))
	}
	for i, st := range m.ExtraStats {
		x := m.Extras[i]
		n := 1
		for _, d := range x.Shape {
			n *= d
		}
		if st.Name != x.Name || st.Count != m.Samples {
			return fmt.Errorf("extra_stats[%d]: %s of %d samples, want %s of %d", i, st.Name, st.Count, x.Name, m.Samples)
		}
		for _, f := range [][]float64{st.Mean, st.Std, st.Min, st.Max, st.Q01, st.Q99} {
			if len(f) != n {
				return fmt.Errorf("extra_stats[%d] (%s): %d values per statistic, want %d", i, st.Name, len(f), n)
			}
		}
	}
	return nil
}
