package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/internal/lockfile"
	"warehouse-etl/shard"
	"warehouse-etl/transforms"
	"warehouse-etl/warehouse"
)

// ReuseOptions say where a build looks for samples it need not decode
// again: a planned sample whose input identity (reuse_identity.go)
// matches a kept sample of a published version has its image bytes
// copied from that version's shard, after the old sample's CRC-32C
// checks out, instead of being decoded. The result is byte for byte what
// a build without reuse writes.
type ReuseOptions struct {
	Off  bool     // --no-reuse: decode every sample
	From []string // --reuse-from: other output roots or version directories, after output_root's versions
}

// reuseStats is what reuse did in this process, for the report.
type reuseStats struct {
	Sources []string // the versions matched samples came from
	Matched int64    // planned samples with a match
	Planned int64    // planned samples this process builds
	Seconds float64  // time to match (reading the old samples.jsonl files)
}

// versionDirRE is the name of a version directory (warehouse.ID.DirName).
var versionDirRE = regexp.MustCompile(`^v[0-9a-f]{16}$`)

// reuseLoc is where a planned sample's image lies in a source version:
// sample idx of shard shard of source src-1 (0: no match).
type reuseLoc struct {
	src   uint16
	shard uint32
	idx   uint32
}

// reuseSource is a published version samples are copied from, held with
// the readers' shared lock and pinned (warehouse.PinVersion) from the
// match until the last shard is written, so that neither gc nor a forced
// rebuild removes it meanwhile.
type reuseSource struct {
	dir     string
	lock    *lockfile.Lock
	pin     *warehouse.PinnedVersion
	shards  []string          // shard paths relative to dir, by reuseLoc.shard
	entries []warehouse.Shard // their manifest entries, likewise
	// sums are the shards' image sums by shard id (shard_sums.json), nil
	// when the version has none.
	sums map[string]imageSums
}

func (s *reuseSource) close() {
	if s.pin != nil {
		s.pin.Close()
	}
	if s.lock != nil {
		s.lock.Release()
	}
}

// reuseIndex maps the planned samples this process builds to their
// matches. Memory: 12 bytes per planned sample while building, 40 more
// while matching; nothing of the old versions but their shard names.
type reuseIndex struct {
	sources []*reuseSource
	base    int64 // planIdx of locs[0]
	locs    []reuseLoc
	layout  shard.Layout
	spec    transforms.Spec
}

// lookup is planned sample planIdx's match, if any.
func (x *reuseIndex) lookup(planIdx int64) (reuseLoc, bool) {
	if x == nil {
		return reuseLoc{}, false
	}
	i := planIdx - x.base
	if i < 0 || i >= int64(len(x.locs)) || x.locs[i].src == 0 {
		return reuseLoc{}, false
	}
	return x.locs[i], true
}

func (x *reuseIndex) close() {
	if x == nil {
		return
	}
	for _, s := range x.sources {
		s.close()
	}
}

// wanted is one planned sample's identity, sorted by digest for lookup.
type wanted struct {
	digest  [sha256.Size]byte
	planIdx int64
}

// openReuse matches the planned samples of the shards in todo against the
// published versions (ReuseOptions) and returns the index of the matches,
// nil when reuse is off or nothing matched. Versions are tried in order:
// this version's own directory (the nightly case: the same config over
// changed inputs), the other versions of output_root newest first, then
// --reuse-from; once every planned sample has a match the rest are not
// read. A version is read only when its pixel recipe is this build's
// (target size, resize mode, pad, normalisation, dtype, decoder, code
// version), its samples.jsonl matches the checksum its manifest records,
// and it has per-sample CRC-32Cs.
func (b *builder) openReuse(ctx context.Context, scan *scanResult, sp shardPlan, todo map[int]bool) (*reuseIndex, error) {
	if b.opts.Reuse.Off {
		return nil, nil
	}
	t0 := time.Now()
	var want []wanted
	lo, hi := int64(-1), int64(-1)
	add := func(planIdx int64, identity []byte) {
		if lo < 0 {
			lo = planIdx
		}
		hi = planIdx + 1
		var w wanted
		if len(identity) != 2*sha256.Size {
			return
		}
		if _, err := hex.Decode(w.digest[:], identity); err != nil {
			return
		}
		w.planIdx = planIdx
		want = append(want, w)
	}
	var err error
	if scan.kept != nil {
		// The identities by key: no line decoded (sampleRef).
		err = keptLines(scan, func(line []byte, _, planIdx int64) error {
			if !todo[int(planIdx/sp.spp)] {
				return nil
			}
			id := identityOf(line)
			if id == nil { // none (the image could not be read), or not as a build writes it
				p := new(plannedSample)
				if err := json.Unmarshal(line, p); err != nil {
					return fmt.Errorf("read back %s: %w", spillName, err)
				}
				id = []byte(p.Identity)
			}
			add(planIdx, id)
			return nil
		})
	} else {
		err = readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
			if planIdx >= 0 && todo[int(planIdx/sp.spp)] {
				add(planIdx, []byte(p.Identity))
			}
			return nil
		})
	}
	if err != nil || len(want) == 0 {
		return nil, err
	}
	slices.SortFunc(want, func(a, b wanted) int { return bytes.Compare(a.digest[:], b.digest[:]) })
	x := &reuseIndex{base: lo, locs: make([]reuseLoc, hi-lo), layout: shardLayout(b.cfg, b.extraF32), spec: transformSpec(b.cfg)}
	remaining := int64(len(want))
	recipe := recipeValues(b.recipe.Encode())
	stats := &reuseStats{Planned: hi - lo}
	var metaOnly []string
	for _, dir := range b.reuseCandidates() {
		if remaining == 0 || len(x.sources) == 1<<16-1 {
			break
		}
		if err := ctx.Err(); err != nil {
			x.close()
			return nil, err
		}
		if shardsElsewhere(dir) {
			metaOnly = append(metaOnly, filepath.Base(dir))
			continue
		}
		src, n, err := b.matchVersion(dir, recipe, want, x, uint16(len(x.sources)+1))
		if errors.Is(err, errNotPublished) {
			continue // this version's own name, on its first build
		}
		if err != nil {
			b.log.Warn("not reusing the samples of a version", "dir", dir, "why", err.Error())
			continue
		}
		if n == 0 {
			src.close()
			continue
		}
		x.sources = append(x.sources, src)
		stats.Sources = append(stats.Sources, dir)
		remaining -= n
		stats.Matched += n
		b.log.Info("reusing samples of a published version", "dir", dir, "samples", n)
	}
	if len(metaOnly) > 0 {
		b.log.Info("not reusing versions whose shards are not on this machine (an s3:// root's mirror keeps only their metadata)",
			"versions", len(metaOnly), "names", strings.Join(metaOnly, ","))
	}
	stats.Seconds = time.Since(t0).Seconds()
	b.reuse = stats
	if len(x.sources) == 0 {
		return nil, nil
	}
	return x, nil
}

// reuseCandidates lists the version directories reuse may read, in the
// order openReuse tries them, each once.
func (b *builder) reuseCandidates() []string {
	own := filepath.Join(b.outRoot, b.id.DirName())
	out := []string{own}
	seen := map[string]bool{own: true}
	add := func(dirs []string) {
		for _, d := range dirs {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	add(versionsNewestFirst(b.outRoot))
	for _, p := range b.opts.Reuse.From {
		if _, err := os.Stat(filepath.Join(p, warehouse.ManifestName)); err == nil {
			add([]string{filepath.Clean(p)})
		} else {
			add(versionsNewestFirst(p))
		}
	}
	return out
}

// versionsNewestFirst lists the published versions under root, newest
// (manifest created_at_ms) first; entries are never followed out of the
// root (a version name that is a link is left out).
func versionsNewestFirst(root string) []string {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type v struct {
		dir     string
		created int64
	}
	var vs []v
	for _, e := range ents {
		if !e.IsDir() || !versionDirRE.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		m, err := warehouse.ReadManifest(dir)
		if err != nil {
			continue
		}
		vs = append(vs, v{dir, m.CreatedAtMs})
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].created > vs[j].created })
	out := make([]string, len(vs))
	for i, e := range vs {
		out[i] = e.dir
	}
	return out
}

// pixelKeys are the version-recipe keys that decide the image tensor of
// a sample from its input (pixelRecipe): a version that differs in any
// of them has nothing to reuse.
var pixelKeys = []string{"code_version", "shard_version", "target_size", "resize_mode", "pad_value",
	"normalize.mean", "normalize.std", "dtype", "decoder"}

// recipeValues splits a version_recipe (warehouse.Recipe.Encode) into
// its keys and quoted values.
func recipeValues(enc string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(enc, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

// matchVersion pins the version at dir and streams its samples.jsonl
// against want, recording the matches of planned samples without one
// yet in x as source number src. It returns the source and how many
// planned samples it matched; a version with nothing usable is an error
// saying why (logged, not fatal).
func (b *builder) matchVersion(dir string, recipe map[string]string, want []wanted, x *reuseIndex, src uint16) (*reuseSource, int64, error) {
	if err := warehouseEntryOK(dir); err != nil {
		return nil, 0, err
	}
	rs := &reuseSource{dir: dir}
	lock, err := warehouse.LockForReading(dir)
	if err != nil {
		return nil, 0, err
	}
	rs.lock = lock
	pin, err := warehouse.PinVersion(dir)
	if err != nil {
		rs.close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, errNotPublished
		}
		return nil, 0, err
	}
	rs.pin = pin
	n, err := b.matchPinned(rs, recipe, want, x, src)
	if err != nil {
		rs.close()
		return nil, 0, err
	}
	return rs, n, nil
}

var errNotPublished = errors.New("not published")

// shardsElsewhere reports whether dir is a published version whose first
// shard file is not here: a version of an s3:// root's mirror, reduced to
// its metadata after upload (or pulled as metadata only). Reuse skips it
// without a warning.
func shardsElsewhere(dir string) bool {
	m, err := warehouse.ReadManifest(dir)
	if err != nil || len(m.Shards) == 0 {
		return false
	}
	_, err = os.Lstat(filepath.Join(dir, filepath.FromSlash(m.Shards[0].RelativePath)))
	return errors.Is(err, os.ErrNotExist)
}

// warehouseEntryOK refuses a version directory that is not a directory
// (a symbolic link is not followed), and one that does not exist.
func warehouseEntryOK(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errNotPublished
		}
		return err
	}
	if !fi.IsDir() {
		return errors.New("not a directory (links are not followed)")
	}
	return nil
}

func (b *builder) matchPinned(rs *reuseSource, recipe map[string]string, want []wanted, x *reuseIndex, src uint16) (int64, error) {
	raw, err := rs.pin.ReadManifestBytes()
	if err != nil {
		return 0, err
	}
	m, err := warehouse.ParseManifest(raw)
	if err != nil {
		return 0, err
	}
	old := recipeValues(m.VersionRecipe)
	for _, k := range pixelKeys {
		if old[k] != recipe[k] {
			return 0, fmt.Errorf("its %s is %s, this build's %s", k, orNone(old[k]), orNone(recipe[k]))
		}
	}
	name := m.Files.Samples
	sum, ok := m.Files.Checksums[name]
	if name == "" || !ok {
		return 0, errors.New("its manifest records no checksum of samples.jsonl (built before reuse)")
	}
	f, err := rs.pin.Root().Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(make([]byte, 64<<10), records.MaxSampleLineBytes+1)
	// Matches go straight into x as source src, and are taken back out if
	// the file turns out not to be the one the manifest recorded (or any
	// other error): src is then the next version's number. No list of the
	// matches is kept beside x, which at 24 bytes a planned sample (and
	// twice that while it grew) was the largest thing reuse held.
	var n int64
	committed := false
	defer func() {
		if !committed && n > 0 {
			for k := range x.locs {
				if x.locs[k].src == src {
					x.locs[k] = reuseLoc{}
				}
			}
		}
	}()
	shardNo := map[string]uint32{}
	// The manifest's shards by id, with their cleaned paths: only those under
	// shards/ (a sample line naming another is an error below).
	type shardOf struct {
		rel   string
		entry warehouse.Shard
	}
	shards := map[string]shardOf{}
	for _, sh := range m.Shards {
		clean := path.Clean(sh.RelativePath)
		if filepath.IsLocal(clean) && strings.HasPrefix(clean, shardDir+"/") {
			shards[sh.ID] = shardOf{clean, sh}
		}
	}
	var line struct {
		Kept       bool   `json:"kept"`
		Shard      string `json:"shard"`
		ShardIndex int64  `json:"shard_index"`
		Identity   string `json:"identity"`
	}
	key := []byte(`"identity":"`)
	taken := make([]uint64, (len(want)+63)/64) // digests already matched in this version, by their first index in want
	var d [sha256.Size]byte
	for sc.Scan() {
		raw := sc.Bytes()
		if !bytes.Contains(raw, key) {
			continue
		}
		line.Kept, line.Shard, line.ShardIndex, line.Identity = false, "", -1, ""
		if !sampleRef(raw, &line.Kept, &line.Shard, &line.ShardIndex, &line.Identity) {
			if err := json.Unmarshal(raw, &line); err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
		}
		if !line.Kept || line.ShardIndex < 0 || line.ShardIndex > 1<<31 || len(line.Identity) != 2*sha256.Size {
			continue
		}
		if _, err := hex.Decode(d[:], []byte(line.Identity)); err != nil {
			continue
		}
		i, found := slices.BinarySearchFunc(want, d, func(w wanted, t [sha256.Size]byte) int { return bytes.Compare(w.digest[:], t[:]) })
		if !found || taken[i/64]&(1<<(i%64)) != 0 {
			continue // the first old sample with a digest serves every planned one with it
		}
		taken[i/64] |= 1 << (i % 64)
		no, ok := shardNo[line.Shard]
		if !ok {
			sh, known := shards[line.Shard]
			if !known {
				return 0, fmt.Errorf("%s: shard %q is not in the manifest", name, line.Shard)
			}
			no = uint32(len(rs.shards))
			shardNo[line.Shard] = no
			rs.shards = append(rs.shards, sh.rel)
			rs.entries = append(rs.entries, sh.entry)
		}
		for ; i < len(want) && want[i].digest == d; i++ {
			if l := &x.locs[want[i].planIdx-x.base]; l.src == 0 {
				*l = reuseLoc{src: src, shard: no, idx: uint32(line.ShardIndex)}
				n++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum.SHA256 {
		return 0, fmt.Errorf("%s: sha256 %s, the manifest records %s", name, got, sum.SHA256)
	}
	// The shards' recorded image sums serve shards taken whole (reuse_link.go):
	// read only from a version that serves any sample.
	if n > 0 {
		if rs.sums, err = readShardSums(rs, m); err != nil {
			b.log.Warn("not using the shard sums of a version: shards taken whole are read to add them up", "dir", rs.dir, "why", err.Error())
			rs.sums = nil
		}
	}
	committed = true
	return n, nil
}

// sampleRef reads kept, shard, shard_index and identity of a
// samples.jsonl line (docs/format/manifest.md) by their keys, without
// decoding the rest of the line: the match reads every line of every
// version it tries, and a full decode cost a 1% rebuild of 10,000 frames
// a quarter of a second. It is exact for the lines builds write: each key
// occurs once, at the top level (the one nested object, letterbox, has
// other keys), and a key's quoted name cannot occur inside a string
// value, where every quote is escaped. false when a value is not in the
// form a build writes it; the caller then decodes the line.
func sampleRef(raw []byte, kept *bool, shard *string, shardIndex *int64, identity *string) bool {
	k := afterKey(raw, `"kept":`)
	switch {
	case bytes.HasPrefix(k, []byte("true,")):
		*kept = true
	case bytes.HasPrefix(k, []byte("false,")):
		*kept = false
	default:
		return false
	}
	sh := afterKey(raw, `"shard":"`)
	end := bytes.IndexByte(sh, '"')
	if end < 0 || bytes.IndexByte(sh[:end], '\\') >= 0 {
		return false
	}
	*shard = string(sh[:end])
	n := afterKey(raw, `"shard_index":`)
	var v int64
	digits := 0
	neg := len(n) > 0 && n[0] == '-'
	if neg {
		n = n[1:]
	}
	for ; digits < len(n) && digits < 12 && n[digits] >= '0' && n[digits] <= '9'; digits++ {
		v = 10*v + int64(n[digits]-'0')
	}
	if digits == 0 || digits == len(n) || (n[digits] != ',' && n[digits] != '}') {
		return false
	}
	if neg {
		v = -v
	}
	*shardIndex = v
	id := identityOf(raw)
	if id == nil {
		return false
	}
	*identity = string(id)
	return true
}

// afterKey is what follows the one occurrence of key (a quoted name and
// its colon) in the JSON line raw; nil when it occurs never or twice.
func afterKey(raw []byte, key string) []byte {
	i := bytes.Index(raw, []byte(key))
	if i < 0 || bytes.Index(raw[i+len(key):], []byte(key)) >= 0 {
		return nil
	}
	return raw[i+len(key):]
}

// identityOf is the 64 hex digits of the "identity" of a samples.jsonl or
// spill line, read by key (see sampleRef); nil when it is not there as a
// build writes it.
func identityOf(raw []byte) []byte {
	id := afterKey(raw, `"identity":"`)
	if len(id) < 2*sha256.Size+1 || id[2*sha256.Size] != '"' {
		return nil
	}
	return id[:2*sha256.Size]
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// reuseReader copies matched images out of the source versions' shards
// for one worker: it keeps the few shards it read last open.
type reuseReader struct {
	x        *reuseIndex
	counters *Counters
	warn     func(msg string, args ...any)
	open     []*openShard // most recent last
	region   []byte       // scratch for a compact shard's stored region
}

type openShard struct {
	src   uint16
	shard uint32
	f     *os.File
	r     *shard.Reader
	err   error
}

const reuseOpenShards = 4

// reader is a worker's reuseReader (nil when nothing is reused).
func (x *reuseIndex) reader(c *Counters, warn func(string, ...any)) *reuseReader {
	if x == nil {
		return nil
	}
	return &reuseReader{x: x, counters: c, warn: warn}
}

func (rr *reuseReader) close() {
	if rr == nil {
		return
	}
	for _, o := range rr.open {
		o.close()
	}
	rr.open = nil
}

func (o *openShard) close() {
	if o.r != nil {
		o.r.Close()
	}
	if o.f != nil {
		o.f.Close()
	}
}

// shardOf opens (or finds open) shard loc of its source.
func (rr *reuseReader) shardOf(loc reuseLoc) *openShard {
	for _, o := range rr.open {
		if o.src == loc.src && o.shard == loc.shard {
			return o
		}
	}
	src := rr.x.sources[loc.src-1]
	o := &openShard{src: loc.src, shard: loc.shard}
	o.f, o.err = src.pin.Root().Open(src.shards[loc.shard])
	if o.err == nil {
		o.r, o.err = shard.OpenFile(o.f)
	}
	if o.err == nil {
		l := o.r.Layout()
		switch {
		case !o.r.HasSampleChecksums():
			o.err = errors.New("the shard has no per-sample checksums")
		case l.DType != rr.x.layout.DType || l.Width != rr.x.layout.Width || l.Height != rr.x.layout.Height || l.Channels != rr.x.layout.Channels:
			o.err = fmt.Errorf("the shard's images are %s %dx%dx%d, this build's %s %dx%dx%d",
				l.DType, l.Channels, l.Height, l.Width, rr.x.layout.DType, rr.x.layout.Channels, rr.x.layout.Height, rr.x.layout.Width)
		}
	}
	if o.err != nil {
		o.err = fmt.Errorf("%s: %w", filepath.Join(src.dir, src.shards[loc.shard]), o.err)
	}
	if len(rr.open) == reuseOpenShards {
		rr.open[0].close()
		rr.open = rr.open[1:]
	}
	rr.open = append(rr.open, o)
	return o
}

// copy fills j.image with the image of j's match, checked against the old
// sample's CRC-32C (its image as copied, with its boxes, mask, record and
// extras), and j.sums from it. false: no match, or the old sample could
// not be read or failed its check (counted as a fallback); the caller
// decodes it.
func (rr *reuseReader) copy(j *job) bool {
	if rr == nil {
		return false
	}
	loc, ok := rr.x.lookup(j.planIdx)
	if !ok {
		return false
	}
	o := rr.shardOf(loc)
	err := o.err
	if err == nil && int(loc.idx) >= o.r.Len() {
		err = fmt.Errorf("%s: sample %d of %d", o.f.Name(), loc.idx, o.r.Len())
	}
	if err == nil {
		err = rr.readImage(o, int(loc.idx), j.image)
	}
	if err != nil {
		j.reuse = outcomeFellBack
		if rr.counters.ReuseFallbacks.Add(1) <= maxFallbackWarnings {
			rr.warn("a matched sample could not be reused: decoding it instead", "seq", j.p.Seq, "why", err.Error())
		}
		return false
	}
	j.sums = contentSums(j.image, rr.x.spec, j.p.Geometry)
	j.reuse = outcomeReused
	rr.counters.Reused.Add(1)
	rr.counters.ReuseBytes.Add(int64(len(j.image)))
	return true
}

// readImage reads sample i's whole image from o into image and checks it
// against the sample's CRC-32C: the stored bytes of a plain shard, or the
// stored region of a compact one (shard_version 5) restored around its
// pad value (shard.Reader.RestoreImage), whose CRC covers the region.
func (rr *reuseReader) readImage(o *openShard, i int, image []byte) error {
	if o.r.IsCompact() {
		if n := o.r.Layout().ImageBytes(); n != int64(len(image)) {
			return fmt.Errorf("%s: image of %d bytes, this build's are %d", o.f.Name(), n, len(image))
		}
		off, n := o.r.RegionSpan(i, 1)
		if cap(rr.region) < n {
			rr.region = make([]byte, n)
		}
		region := rr.region[:n]
		if _, err := o.f.ReadAt(region, off); err != nil {
			return err
		}
		o.r.RestoreImage(image, region, i, false)
	} else {
		off, n := o.r.ImageSpan(i, 1)
		if n != len(image) {
			return fmt.Errorf("%s: image of %d bytes, this build's are %d", o.f.Name(), n, len(image))
		}
		if _, err := o.f.ReadAt(image, off); err != nil {
			return err
		}
	}
	if err := o.r.VerifySample(i, image); err != nil {
		return fmt.Errorf("%s: %w", o.f.Name(), err)
	}
	return nil
}

// maxFallbackWarnings bounds the warnings of one build about samples that
// fell back to decoding; the count is in the report either way.
const maxFallbackWarnings = 10
