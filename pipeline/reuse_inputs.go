package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/outputroot"
	"warehouse-etl/sources"
)

// The input cache: the identity of every image file a build hashed, keyed
// by the file's status, so that the next build of the version hashes only
// the files that changed. It is what git's index and rsync do, with
// git's guard against a file changed within the clock tick it was read
// in:
//
//   - the key is a digest of the path, device, inode, size, modification
//     time and status change time (ctime) of the file, as fstat gives
//     them on the descriptor the file was hashed from, before and after
//     hashing (a file that changed while it was read is not kept);
//   - an entry is kept only when the file's ctime is at least racyWindow
//     older than the moment the build opened it. Any later write,
//     rename, chmod or touch sets ctime to the clock at that moment, so
//     the key no longer matches, even on a filesystem that keeps times
//     to 2 seconds, and even when mtime is put back by hand (an image
//     replaced by another of the same size and mtime). Nobody but the
//     kernel sets ctime, short of changing the system clock.
//
// The file is .<version>.inputs in the output root (gc removes it with
// its version): a header, the records sorted by key, and the sha256 of
// everything before it. One that is damaged, of another pixel recipe or
// another format is ignored, and --no-reuse neither reads nor writes it.
// Memory: 48 bytes a kept sample for the records read, as many for those
// written. Only sources whose images are whole files use it
// (sources.ImageFiler); episode containers hash their frames every time.

const (
	inputCacheMagic = "warehouse-etl input identities 1\n"
	inputKeyBytes   = 16
	inputRecord     = inputKeyBytes + sha256.Size
	// racyWindow is how much older than the read a file's ctime must
	// be for its digest to be kept.
	racyWindow = 2 * time.Second
	// maxInputCacheBytes bounds the file read back (10M samples are
	// 480 MB).
	maxInputCacheBytes = 4 << 30
)

// inputRec is one cache record.
type inputRec struct {
	key [inputKeyBytes]byte
	id  [sha256.Size]byte
}

// inputCache is a build's view of its version's input cache.
type inputCache struct {
	path   string
	recipe [sha256.Size]byte // sha256 of IdentityFormat NUL pixelRecipe
	old    []byte            // the records read, sorted by key

	mu    sync.Mutex
	fresh []inputRec // the records to write

	hits, hashed atomic.Int64
}

// openInputCache reads the version's input cache, or returns nil when
// reuse is off or the source's images are not files.
func (b *builder) openInputCache() *inputCache {
	if b.opts.Reuse.Off {
		return nil
	}
	if _, ok := b.src.(sources.ImageFiler); !ok {
		return nil
	}
	c := &inputCache{
		path:   filepath.Join(b.outRoot, outputroot.InputCacheFile(b.id.DirName())),
		recipe: sha256.Sum256([]byte(IdentityFormat + "\x00" + pixelRecipe(b.cfg))),
	}
	old, err := c.load()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		b.log.Warn("ignoring the input cache: every image is hashed again", "file", c.path, "why", err.Error())
	}
	c.old = old
	return c
}

// load reads and checks the cache file; nil records when it is of
// another pixel recipe.
func (c *inputCache) load() ([]byte, error) {
	f, err := os.Open(c.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	head := int64(len(inputCacheMagic) + sha256.Size + 8)
	if fi.Size() < head+sha256.Size || fi.Size() > maxInputCacheBytes {
		return nil, fmt.Errorf("%d bytes", fi.Size())
	}
	raw := make([]byte, fi.Size())
	if _, err := f.ReadAt(raw, 0); err != nil {
		return nil, err
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("its sha256 does not match")
	}
	if string(body[:len(inputCacheMagic)]) != inputCacheMagic {
		return nil, errors.New("not an input cache of this format")
	}
	if !bytes.Equal(body[len(inputCacheMagic):len(inputCacheMagic)+sha256.Size], c.recipe[:]) {
		return nil, nil // another pixel recipe: nothing to use
	}
	n := binary.LittleEndian.Uint64(body[head-8:])
	recs := body[head:]
	if uint64(len(recs)) != n*inputRecord {
		return nil, fmt.Errorf("%d bytes of records for %d", len(recs), n)
	}
	return recs, nil
}

// lookup is the identity kept for key.
func (c *inputCache) lookup(key [inputKeyBytes]byte) (id [sha256.Size]byte, ok bool) {
	rec := func(m int) []byte { return c.old[m*inputRecord : (m+1)*inputRecord] }
	n := len(c.old) / inputRecord
	m := sort.Search(n, func(m int) bool { return bytes.Compare(rec(m)[:inputKeyBytes], key[:]) >= 0 })
	if m == n || !bytes.Equal(rec(m)[:inputKeyBytes], key[:]) {
		return id, false
	}
	copy(id[:], rec(m)[inputKeyBytes:])
	return id, true
}

// keep records key's identity for the next build.
func (c *inputCache) keep(key [inputKeyBytes]byte, id [sha256.Size]byte) {
	c.mu.Lock()
	c.fresh = append(c.fresh, inputRec{key, id})
	c.mu.Unlock()
}

// save replaces the cache file with the records kept by this scan (the
// files that are gone, or changed, drop out), unless they are the
// records read.
func (c *inputCache) save() error {
	if c == nil {
		return nil
	}
	slices.SortFunc(c.fresh, func(a, b inputRec) int { return bytes.Compare(a.key[:], b.key[:]) })
	c.fresh = slices.CompactFunc(c.fresh, func(a, b inputRec) bool { return a.key == b.key })
	body := make([]byte, 0, len(inputCacheMagic)+sha256.Size+8+len(c.fresh)*inputRecord+sha256.Size)
	body = append(body, inputCacheMagic...)
	body = append(body, c.recipe[:]...)
	body = binary.LittleEndian.AppendUint64(body, uint64(len(c.fresh)))
	start := len(body)
	for _, r := range c.fresh {
		body = append(body, r.key[:]...)
		body = append(body, r.id[:]...)
	}
	if bytes.Equal(body[start:], c.old) {
		return nil
	}
	sum := sha256.Sum256(body)
	return atomicfile.Write(c.path, append(body, sum[:]...), 0o644)
}

// fileKey is the cache key of the file at path with status fi, and its
// status change time; ok is false where the status has no inode and
// ctime (reuse_inputs_*.go).
func fileKey(path string, fi os.FileInfo) (key [inputKeyBytes]byte, ctime time.Time, ok bool) {
	dev, ino, ctime, ok := fileIdentityStat(fi)
	if !ok {
		return key, ctime, false
	}
	h := sha256.New()
	h.Write([]byte(path))
	var b [41]byte
	binary.LittleEndian.PutUint64(b[1:], dev)
	binary.LittleEndian.PutUint64(b[9:], ino)
	binary.LittleEndian.PutUint64(b[17:], uint64(fi.Size()))
	binary.LittleEndian.PutUint64(b[25:], uint64(fi.ModTime().UnixNano()))
	binary.LittleEndian.PutUint64(b[33:], uint64(ctime.UnixNano()))
	h.Write(b[:])
	copy(key[:], h.Sum(nil))
	return key, ctime, true
}
