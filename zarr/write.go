package zarr

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"warehouse-etl/internal/progress"
	"warehouse-etl/warehouse"
)

// StoreName is the store's directory name when a build writes it into the
// version directory.
const StoreName = warehouse.ZarrStoreName

// MaxZstdLevel is the highest zstd level; Options.ZstdLevel 1..MaxZstdLevel
// compresses inner chunks.
const MaxZstdLevel = 22

// Options configure Write.
type Options struct {
	// ZstdLevel 0 stores inner chunks uncompressed (an export then runs at
	// about copy speed); 1..22 adds the zstd codec at that level, recorded
	// as given in zarr.json and mapped to the nearest level of the Go
	// encoder (github.com/klauspost/compress/zstd).
	ZstdLevel int
	// ShardSamples is the number of samples per Zarr shard; 0 means the
	// warehouse's samples_per_shard, so that each warehouse shard maps onto
	// one Zarr shard.
	ShardSamples int
	// Workers is how many shard files are written at once; 0 means
	// GOMAXPROCS.
	Workers int
	// Logger receives progress and warnings; nil discards.
	Logger *slog.Logger
	// FS performs every write; nil means OSFS.
	FS FS
	// Progress receives the array bytes (uncompressed) the store holds:
	// their sum when writing starts, then each shard file's as it is
	// written. Export also passes it to the verification before (the
	// bytes that reads). nil reports nothing.
	Progress progress.Counter
}

// Result describes a written store.
type Result struct {
	Store        string   // the target directory
	Arrays       []string // array names, in store order
	ShardFiles   int      // shard files written
	Bytes        int64    // bytes written, metadata documents included
	Samples      int64
	ShardSamples int // samples per Zarr shard
}

// Write writes the warehouse version in dir, whose manifest is m, as a Zarr
// v3 store at target (docs/format/zarr.md). The shards are read through
// shard.Open and checked against m; dir must not be changing (hold its build
// lock, or be the build writing it).
//
// The store is written into a temporary directory beside target, the root
// zarr.json last, made durable, then renamed to target. An existing target
// must be a Zarr store (a zarr.json of a group); it is renamed aside just
// before and removed just after, so on any failure target is either
// untouched or absent, never a partial store.
func Write(ctx context.Context, dir string, m *warehouse.Manifest, target string, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fsys := opts.FS
	if fsys == nil {
		fsys = OSFS{}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if opts.ZstdLevel < 0 || opts.ZstdLevel > MaxZstdLevel {
		return nil, fmt.Errorf("zarr: zstd level %d: want 0 (uncompressed) to %d", opts.ZstdLevel, MaxZstdLevel)
	}
	if opts.ShardSamples < 0 || opts.ShardSamples > MaxChunksPerShard {
		return nil, fmt.Errorf("zarr: %d samples per shard: want 0 (as the warehouse) to %d", opts.ShardSamples, MaxChunksPerShard)
	}
	layout, err := warehouse.ManifestLayout(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, warehouse.ManifestName), err)
	}
	cols, err := columns(m, layout)
	if err != nil {
		return nil, err
	}
	perShard := opts.ShardSamples
	if perShard == 0 {
		perShard = max(m.SamplesPerShard, 1) // 1 for a warehouse without samples
	}
	if perShard > MaxChunksPerShard {
		return nil, fmt.Errorf("zarr: the warehouse has %d samples per shard, more than the %d a Zarr shard index holds here; set the samples per Zarr shard", perShard, MaxChunksPerShard)
	}
	target = filepath.Clean(target)
	if err := checkTarget(target, dir); err != nil {
		return nil, err
	}
	parent := filepath.Dir(target)
	if err := fsys.MkdirAll(parent); err != nil {
		return nil, err
	}
	tmp, err := fsys.MkdirTemp(parent, "."+filepath.Base(target)+tmpInfix)
	if err != nil {
		return nil, err
	}
	published := false
	defer func() {
		if !published {
			if err := fsys.RemoveAll(tmp); err != nil {
				log.Warn("could not remove the temporary store", "dir", tmp, "err", err)
			}
		}
	}()

	w := &storeWriter{
		fs: fsys, tmp: tmp, m: m, cols: cols, perShard: perShard, zstdLevel: opts.ZstdLevel, progress: opts.Progress,
		src: newSampleSource(dir, m, layout), dirs: map[string]bool{tmp: true},
	}
	defer w.src.closeAll()
	if err := w.write(ctx, workers, log); err != nil {
		return nil, err
	}
	if err := publish(fsys, tmp, target, log); err != nil {
		return nil, err
	}
	published = true
	res := &Result{Store: target, ShardFiles: w.files, Bytes: w.bytes.Load(), Samples: m.Samples, ShardSamples: perShard}
	for _, c := range cols {
		res.Arrays = append(res.Arrays, c.name)
	}
	log.Info("zarr store written", "store", target, "arrays", len(cols), "shard_files", res.ShardFiles, "bytes", res.Bytes)
	return res, nil
}

// Names of the temporary directories beside a target: the store being
// written, and the replaced store between its rename and its removal.
const (
	tmpInfix = ".tmp-"
	oldInfix = ".old-"
)

// checkTarget refuses a target that would swallow the warehouse, and an
// existing one that is not a Zarr store: replacing it removes it.
func checkTarget(target, dir string) error {
	absTarget, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(absTarget, absDir); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return fmt.Errorf("zarr: target %s would contain the warehouse %s", target, dir)
	}
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("zarr: %s exists and is not a directory: refusing to replace it", target)
	}
	raw, err := os.ReadFile(filepath.Join(target, MetadataKey))
	var root struct {
		ZarrFormat int    `json:"zarr_format"`
		NodeType   string `json:"node_type"`
	}
	if err != nil || json.Unmarshal(raw, &root) != nil || root.ZarrFormat != zarrFormat || root.NodeType != "group" {
		return fmt.Errorf("zarr: %s exists and is not a Zarr v3 store (no zarr.json of a group): refusing to replace it", target)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// publish renames the finished tmp to target, moving an existing target
// aside first and removing it after.
func publish(fsys FS, tmp, target string, log *slog.Logger) error {
	parent := filepath.Dir(target)
	// The temporary directory's own entry must be durable before it can
	// be renamed durably.
	if err := fsys.SyncDir(parent); err != nil {
		return err
	}
	old := ""
	if exists(target) {
		old = filepath.Join(parent, "."+filepath.Base(target)+oldInfix+strings.TrimPrefix(filepath.Base(tmp), "."+filepath.Base(target)+tmpInfix))
		if err := fsys.Rename(target, old); err != nil {
			return err
		}
	}
	if err := fsys.Rename(tmp, target); err != nil {
		if old != "" {
			if rerr := fsys.Rename(old, target); rerr != nil {
				return errors.Join(err, fmt.Errorf("zarr: the previous store is left at %s: %w", old, rerr))
			}
		}
		return err
	}
	if old != "" {
		if err := fsys.RemoveAll(old); err != nil {
			log.Warn("could not remove the replaced store", "dir", old, "err", err)
		}
	}
	if err := fsys.SyncDir(parent); err != nil {
		return fmt.Errorf("zarr: %s is in place but its directory could not be synced: %w", target, err)
	}
	return nil
}

// storeWriter writes one store into its temporary directory.
type storeWriter struct {
	fs        FS
	tmp       string
	m         *warehouse.Manifest
	cols      []column
	perShard  int
	zstdLevel int
	src       *sampleSource
	progress  progress.Counter

	mu    sync.Mutex
	dirs  map[string]bool // every directory created so far
	files int
	bytes atomic.Int64
}

// write writes every array's metadata and shards, then the root group's
// metadata, then makes them all durable.
func (w *storeWriter) write(ctx context.Context, workers int, log *slog.Logger) error {
	n := w.m.Samples
	for _, c := range w.cols {
		if err := w.writeDocument(c.name, w.arrayMetadata(&c)); err != nil {
			return err
		}
	}
	shards := int((n + int64(w.perShard) - 1) / int64(w.perShard))
	var perSample int64
	for k := range w.cols {
		perSample += int64(w.cols[k].chunkBytes())
	}
	progress.Add(w.progress, n*perSample, 0)
	w.src.plan(w.perShard, shards, len(w.cols))
	encoders := newEncoderPool(w.zstdLevel)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
issue:
	for j := range shards {
		for k := range w.cols {
			if gctx.Err() != nil {
				break issue
			}
			g.Go(func() error { return w.writeShard(gctx, &w.cols[k], j, encoders) })
		}
		log.Debug("zarr shard issued", "shard", j, "of", shards)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The root document goes last: a temporary directory without it is
	// not a store.
	if err := w.writeDocument("", w.rootMetadata()); err != nil {
		return err
	}
	return w.fs.SyncTree(w.tmp)
}

// arrayMetadata is column c's zarr.json.
func (w *storeWriter) arrayMetadata(c *column) arrayMetadata {
	shape := []int64{w.m.Samples}
	outer := []int64{int64(w.perShard)}
	inner := []int64{1}
	for _, d := range c.shape {
		shape = append(shape, int64(d))
		outer = append(outer, int64(d))
		inner = append(inner, int64(d))
	}
	return arrayMetadata{
		ZarrFormat:       zarrFormat,
		NodeType:         "array",
		Shape:            shape,
		DataType:         c.dataType,
		ChunkGrid:        namedConfig{Name: "regular", Configuration: regularGridConfig{ChunkShape: outer}},
		ChunkKeyEncoding: namedConfig{Name: "default", Configuration: chunkKeyConfig{Separator: "/"}},
		FillValue:        json.RawMessage(c.fill),
		Codecs:           shardingCodecs(inner, w.zstdLevel),
		Attributes:       c.attrs,
		DimensionNames:   append([]string{sampleDim}, c.dims...),
	}
}

// Exporter names this code in the root group's attributes.
const Exporter = "warehouse-etl zarr export 1"

// rootMetadata is the root group's zarr.json: the manifest (less its
// build time and its TWH1 file tables, which say nothing about the store)
// and how the store was written.
func (w *storeWriter) rootMetadata() groupMetadata {
	raw, err := json.Marshal(w.m)
	var manifest map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(raw, &manifest)
	}
	if err != nil {
		// A Manifest always marshals; this would be a programming error.
		panic("zarr: manifest does not round-trip through JSON: " + err.Error())
	}
	// created_at_ms would make two exports of one version differ.
	for _, k := range []string{"created_at_ms", "shards", "files"} {
		delete(manifest, k)
	}
	names := make([]string, len(w.cols))
	for i, c := range w.cols {
		names[i] = c.name
	}
	return groupMetadata{
		ZarrFormat: zarrFormat,
		NodeType:   "group",
		Attributes: map[string]any{
			"warehouse": manifest,
			"zarr_export": map[string]any{
				"exporter":      Exporter,
				"arrays":        names,
				"shard_samples": w.perShard,
				"zstd_level":    w.zstdLevel,
			},
		},
	}
}

// writeDocument writes node's zarr.json ("" is the root).
func (w *storeWriter) writeDocument(node string, doc any) error {
	raw, err := encodeDocument(doc)
	if err != nil {
		return err
	}
	dir := filepath.Join(w.tmp, node)
	if err := w.mkdir(dir); err != nil {
		return err
	}
	f, err := w.fs.Create(filepath.Join(dir, MetadataKey))
	if err != nil {
		return err
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return err
	}
	w.bytes.Add(int64(len(raw)))
	return f.Close()
}

// mkdir creates dir once, and records it and its parents up to the
// temporary directory.
func (w *storeWriter) mkdir(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dirs[dir] {
		return nil
	}
	if err := w.fs.MkdirAll(dir); err != nil {
		return err
	}
	for d := dir; !w.dirs[d]; d = filepath.Dir(d) {
		w.dirs[d] = true
	}
	return nil
}

// chunkKey is the default chunk key encoding, separator "/", of shard j of
// an array of ndim dimensions: only the sample dimension has more than one
// chunk.
func chunkKey(j, ndim int) string {
	return fmt.Sprintf("c/%d", j) + strings.Repeat("/0", ndim-1)
}

// shardBufferSize is the write buffer in front of each shard file; images
// larger than it go straight to the file.
const shardBufferSize = 1 << 20

var shardBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, shardBufferSize) }}

// writeShard writes shard j of column c: its samples' inner chunks in
// sample order, then the index.
func (w *storeWriter) writeShard(ctx context.Context, c *column, j int, encoders *encoderPool) (err error) {
	lo := int64(j) * int64(w.perShard)
	hi := min(lo+int64(w.perShard), w.m.Samples)
	key := chunkKey(j, len(c.shape)+1)
	path := filepath.Join(w.tmp, c.name, filepath.FromSlash(key))
	defer func() {
		if err != nil {
			err = fmt.Errorf("zarr: array %s shard %s: %w", c.name, key, err)
		}
	}()
	refs, err := w.src.acquire(lo, hi)
	if err != nil {
		return err
	}
	defer w.src.release(refs)
	if err := w.mkdir(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := w.fs.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	bw := shardBuffers.Get().(*bufio.Writer)
	bw.Reset(f)
	defer func() {
		bw.Reset(nil)
		shardBuffers.Put(bw)
	}()
	var enc *zstd.Encoder
	if encoders != nil {
		enc = encoders.get()
		defer encoders.put(enc)
	}

	entries := make([]IndexEntry, w.perShard)
	want := c.chunkBytes()
	var buf, packed []byte
	var offset uint64
	for i := lo; i < hi; i++ {
		if (i-lo)%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if enc == nil && c.section != nil {
			// Uncompressed inner chunks of a contiguous column are the
			// shard's bytes as they are: copy the run file to file.
			sr, local, count := refs.span(i, hi)
			size := count * int64(want)
			if err := copyRange(bw, refs.path(sr), int64(c.section(sr.Header()))+int64(local)*int64(want), size); err != nil {
				return err
			}
			for k := range count {
				entries[i-lo+k] = IndexEntry{Offset: offset, NBytes: uint64(want)}
				offset += uint64(want)
			}
			i += count - 1
			continue
		}
		sr, local := refs.locate(i)
		raw := c.sample(buf, sr, local)
		if len(raw) != want {
			return fmt.Errorf("sample %d: %d bytes, want %d", i, len(raw), want)
		}
		if c.section == nil {
			buf = raw // keep the grown buffer; a view is read-only shard memory
		}
		if enc != nil {
			packed = enc.EncodeAll(raw, packed[:0])
			raw = packed
		}
		if _, err := bw.Write(raw); err != nil {
			return err
		}
		entries[i-lo] = IndexEntry{Offset: offset, NBytes: uint64(len(raw))}
		offset += uint64(len(raw))
	}
	for k := hi - lo; k < int64(w.perShard); k++ {
		entries[k] = IndexEntry{Offset: EmptyChunk, NBytes: EmptyChunk}
	}
	index := appendIndex(make([]byte, 0, IndexSize(w.perShard)), entries)
	if _, err := bw.Write(index); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	w.bytes.Add(int64(offset) + int64(len(index)))
	progress.Add(w.progress, 0, (hi-lo)*int64(want))
	w.mu.Lock()
	w.files++
	w.mu.Unlock()
	return nil
}

// copyRange appends bytes [off, off+n) of file path to bw. With bw empty
// and writing to an *os.File, bufio hands the copy to the file, and Linux
// copies in the kernel (copy_file_range) without a pass through memory.
func copyRange(bw *bufio.Writer, path string, off, n int64) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := src.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	copied, err := bw.ReadFrom(io.LimitReader(src, n))
	if err == nil && copied != n {
		err = fmt.Errorf("%s: %d bytes at %d, the file ends after %d", path, n, off, copied)
	}
	return err
}

// encoderPool hands out single-threaded zstd encoders of one level; each
// shard task uses one at a time.
type encoderPool struct {
	level zstd.EncoderLevel
	pool  sync.Pool
}

// newEncoderPool returns nil for level 0 (no compression).
func newEncoderPool(level int) *encoderPool {
	if level == 0 {
		return nil
	}
	return &encoderPool{level: zstd.EncoderLevelFromZstd(level)}
}

func (p *encoderPool) get() *zstd.Encoder {
	if e, ok := p.pool.Get().(*zstd.Encoder); ok {
		return e
	}
	// The codec's "checksum": false: frames carry no content checksum.
	// Options are constants, so NewWriter cannot fail.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(p.level), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	if err != nil {
		panic("zarr: zstd encoder: " + err.Error())
	}
	return e
}

func (p *encoderPool) put(e *zstd.Encoder) { p.pool.Put(e) }
