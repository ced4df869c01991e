package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// versionName is the shape of a version's name.
var versionName = regexp.MustCompile(`^v[0-9a-f]{16}$`)

// IsVersionName reports whether s is shaped like a version's name.
func IsVersionName(s string) bool { return versionName.MatchString(s) }

// isPointerName: "latest" or "latest-<config>".
func isPointerName(s string) bool {
	if s == warehouse.LatestName {
		return true
	}
	c, ok := strings.CutPrefix(s, warehouse.LatestName+"-")
	return ok && warehouse.ValidConfigName(c)
}

// Object names under an output root's prefix (docs/format/s3.md).
const (
	manifestName  = "manifest.json"
	digestName    = "manifest.json.sha256"
	stagingPrefix = ".staging/"
	leasesPrefix  = ".leases/"
	// metaSuffix marks, in a Mirror's local root, a version directory
	// that holds only the metadata of a version published in the store
	// (".<version>.s3meta", holding the sha256 of that manifest): its
	// manifest, digest and fingerprint, which are all a rerun's
	// up-to-date and stale checks read. A local build that replaces it
	// (WAREHOUSE_CLEAR=1) has another manifest: it is pushed.
	metaSuffix = ".s3meta"
)

// ErrPointerMoved means another publisher moved a pointer since this one
// read it: the conditional write lost, the other publisher won.
var ErrPointerMoved = errors.New("another publisher moved the pointer since this build read it")

// Mirror is a local output root that stands for an output root in the
// store: a build, partition or commit runs on it with every local promise
// (flock, fsync, rename), between Pull, which brings in what those read of
// the store (pointers, owner records, each version's metadata, with
// staging the partitions' uploads), and Push, which publishes what they
// made.
type Mirror struct {
	S    *Store
	Root string
	// Holder names this process in lock objects: host:pid:random.
	Holder string
	// LockTTL is how long a version lock object holds without renewal.
	LockTTL time.Duration
	// LockWait is how long Push waits for another publisher's lock on a
	// version (build --lock-wait); 0 fails at once (outputroot.ErrLocked).
	LockWait time.Duration
	// pulled is each pointer's value and ETag as Pull read it.
	pulled map[string]pointerState
	// published is the versions the store had when Pull read it.
	published map[string]bool
}

type pointerState struct{ target, etag string }

// NewMirror is the mirror of s at the local directory root.
func NewMirror(s *Store, root string, holder string, lockTTL time.Duration) *Mirror {
	return &Mirror{S: s, Root: root, Holder: holder, LockTTL: lockTTL, pulled: map[string]pointerState{}, published: map[string]bool{}}
}

// Holder names a process in lock and lease objects: host:pid:random hex.
func Holder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Pull makes the local root agree with the store on what a build reads:
// the pointers (as symlinks), the owner records and every published
// version's manifest, digest and fingerprint (a local version the store
// does not have is kept only when it is a complete build not yet pushed);
// with staging also the partitions' staged shards and records.
func (m *Mirror) Pull(ctx context.Context, staging bool) error {
	if err := os.MkdirAll(m.Root, 0o755); err != nil {
		return err
	}
	objs, err := m.S.List(ctx, "")
	if err != nil {
		return err
	}
	remote := map[string]Object{}
	for _, o := range objs {
		remote[o.Name] = o
	}
	// Pointers.
	m.pulled = map[string]pointerState{}
	for _, o := range objs {
		if strings.Contains(o.Name, "/") || !isPointerName(o.Name) {
			continue
		}
		target, etag, err := m.S.ReadPointer(ctx, o.Name)
		if err != nil {
			return err
		}
		m.pulled[o.Name] = pointerState{target, etag}
		if err := setSymlink(m.Root, o.Name, target); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(m.Root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if isPointerName(e.Name()) && e.Type() == fs.ModeSymlink {
			if _, ok := m.pulled[e.Name()]; !ok {
				if err := os.Remove(filepath.Join(m.Root, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	// Owner records.
	for _, o := range objs {
		if strings.Contains(o.Name, "/") || !strings.HasSuffix(o.Name, ".config") || !strings.HasPrefix(o.Name, ".v") {
			continue
		}
		body, _, err := m.S.Get(ctx, o.Name, 4096)
		if err != nil {
			return err
		}
		local, _ := os.ReadFile(filepath.Join(m.Root, o.Name))
		if !bytes.Equal(local, body) {
			if err := os.WriteFile(filepath.Join(m.Root, o.Name), body, 0o644); err != nil {
				return err
			}
		}
	}
	// Versions: each published one's metadata.
	published := map[string]bool{}
	m.published = published
	for _, o := range objs {
		v, ok := strings.CutSuffix(o.Name, "/"+manifestName)
		if !ok || !IsVersionName(v) {
			continue
		}
		published[v] = true
		if err := m.pullMeta(ctx, v); err != nil {
			return err
		}
	}
	for _, e := range entries {
		v, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "."), metaSuffix)
		if !ok || !IsVersionName(v) || published[v] {
			continue
		}
		if !m.metaOnly(v) {
			// A local build not pushed yet: the next Push publishes it.
			if err := os.Remove(filepath.Join(m.Root, e.Name())); err != nil {
				return err
			}
			continue
		}
		// Metadata of a version the store no longer has (gc removed it).
		if err := os.RemoveAll(filepath.Join(m.Root, v)); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(m.Root, e.Name())); err != nil {
			return err
		}
	}
	if staging {
		return m.pullStaging(ctx, objs)
	}
	return nil
}

// pullMeta brings version v's metadata in unless the local directory has
// the same manifest already.
func (m *Mirror) pullMeta(ctx context.Context, v string) error {
	raw, _, err := m.S.Get(ctx, v+"/"+manifestName, maxManifest)
	if err != nil {
		return err
	}
	dir := filepath.Join(m.Root, v)
	if local, err := os.ReadFile(filepath.Join(dir, manifestName)); err == nil && bytes.Equal(local, raw) {
		return nil
	}
	tmp := filepath.Join(m.Root, "."+v+".tmp-s3pull")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, manifestName), raw, 0o644); err != nil {
		return err
	}
	if dg, _, err := m.S.Get(ctx, v+"/"+digestName, 4096); err == nil {
		if err := os.WriteFile(filepath.Join(tmp, digestName), dg, 0o644); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	man, err := warehouse.ReadManifest(tmp)
	if err != nil {
		return fmt.Errorf("%s: %w", m.S.URL(v), err)
	}
	if fp := man.Files.Fingerprint; fp != "" {
		want := man.Files.Checksums[fp]
		if _, err := m.S.Download(ctx, v+"/"+fp, filepath.Join(tmp, fp), want.Bytes, want.SHA256); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := m.markMeta(v, raw); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// pullStaging downloads the staged shards (each with its record: a shard
// without one is not complete), their records and the partition records
// that the local staging directories lack.
func (m *Mirror) pullStaging(ctx context.Context, objs []Object) error {
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Name] = true
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, m.S.Parallel))
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, stagingPrefix)
		if !ok {
			continue
		}
		v, rel, ok := strings.Cut(rest, "/")
		if !ok || !IsVersionName(v) || !stagedFile(rel) || strings.HasSuffix(rel, ".twh") {
			continue
		}
		dir := filepath.Join(m.Root, "."+v+outputroot.StagingSuffix)
		g.Go(func() error {
			// A record, then (shard records) its shard when the local
			// record is another: the shard first, the record last, as a
			// partition writes them.
			body, _, err := m.S.Get(gctx, o.Name, maxRecord)
			if err != nil {
				return err
			}
			local := filepath.Join(dir, filepath.FromSlash(rel))
			if cur, err := os.ReadFile(local); err == nil && bytes.Equal(cur, body) {
				return nil
			}
			if strings.HasPrefix(rel, "shards/") {
				shard := strings.TrimSuffix(o.Name, ".json") + ".twh"
				if have[shard] {
					if _, err := m.S.Download(gctx, shard, strings.TrimSuffix(local, ".json")+".twh", 0, ""); err != nil {
						return err
					}
				}
			}
			if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
				return err
			}
			return os.WriteFile(local, body, 0o644)
		})
	}
	return g.Wait()
}

// stagedFile reports whether rel (under a staging directory) is uploaded:
// shards, their records and the partition records; never locks or a
// partition's scan spill.
func stagedFile(rel string) bool {
	dir, name := filepathSplit(rel)
	switch dir {
	case "shards":
		return strings.HasPrefix(name, "shard-") && (strings.HasSuffix(name, ".twh") || strings.HasSuffix(name, ".json"))
	case "partitions":
		return strings.HasSuffix(name, ".json")
	}
	return false
}

func filepathSplit(rel string) (dir, name string) {
	i := strings.LastIndex(rel, "/")
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// maxManifest bounds a manifest object read whole: what a local reader loads.
const maxManifest = warehouse.MaxManifestBytes

// ReadPointer reads pointer object name: the version it names (checked
// for shape) and its ETag.
func (s *Store) ReadPointer(ctx context.Context, name string) (target, etag string, err error) {
	body, etag, err := s.Get(ctx, name, maxPointer)
	if err != nil {
		return "", "", err
	}
	target, err = ParsePointer(body)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", s.URL(name), err)
	}
	return target, etag, nil
}

// maxPointer bounds a pointer object read whole.
const maxPointer = 4096

// ParsePointer parses a pointer object's body: a version name and
// whitespace (a writer puts one "\n" after it).
func ParsePointer(body []byte) (string, error) {
	if len(body) > maxPointer {
		return "", fmt.Errorf("pointer: %d bytes, more than %d", len(body), maxPointer)
	}
	target := strings.TrimSpace(string(body))
	if !IsVersionName(target) {
		return "", fmt.Errorf("names %q, not a version (v<16 hex>)", trimForMessage(target))
	}
	return target, nil
}

func trimForMessage(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// setSymlink points the symlink root/name at target (a rename over it).
func setSymlink(root, name, target string) error {
	p := filepath.Join(root, name)
	if cur, err := os.Readlink(p); err == nil && cur == target {
		return nil
	}
	tmp := filepath.Join(root, "."+name+".tmp-"+target)
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// PushReport is what Push uploaded.
type PushReport struct {
	Versions []string // versions uploaded
	Files    int
	Bytes    int64
	Seconds  float64  // time spent uploading versions' files
	Pointers []string // pointers moved
}

// Push publishes what the local root holds and the store does not: every
// complete local version (each file, then manifest.json.sha256, then
// manifest.json, under the version's lock object), the staged shards and
// records, then the pointers that moved locally, each with a conditional
// PutObject on the ETag Pull read (a pointer another publisher moved
// meanwhile is an error wrapping ErrPointerMoved: its version stays
// published, unnamed by the pointer). A pushed version is reduced to its
// metadata locally.
func (m *Mirror) Push(ctx context.Context) (*PushReport, error) {
	rep := &PushReport{}
	entries, err := os.ReadDir(m.Root)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		v := e.Name()
		if !e.IsDir() || !IsVersionName(v) || m.metaOnly(v) {
			continue
		}
		if err := m.pushVersion(ctx, v, rep); err != nil {
			return rep, err
		}
	}
	for _, e := range entries {
		v, ok := strings.CutSuffix(strings.TrimPrefix(e.Name(), "."), outputroot.StagingSuffix)
		if !e.IsDir() || !ok || !IsVersionName(v) {
			continue
		}
		if err := m.pushStaging(ctx, v); err != nil {
			return rep, err
		}
	}
	if err := m.cleanStaging(ctx, names); err != nil {
		return rep, err
	}
	// Pointers: latest-<config> before latest, as a local publish.
	var ptrs []string
	for _, e := range entries {
		if e.Type() == fs.ModeSymlink && isPointerName(e.Name()) {
			ptrs = append(ptrs, e.Name())
		}
	}
	slices.SortFunc(ptrs, func(a, b string) int {
		if (a == warehouse.LatestName) != (b == warehouse.LatestName) {
			if a == warehouse.LatestName {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, p := range ptrs {
		target, err := os.Readlink(filepath.Join(m.Root, p))
		if err != nil {
			return rep, err
		}
		st, known := m.pulled[p]
		if known && st.target == target {
			continue
		}
		if !IsVersionName(target) {
			continue
		}
		if _, _, err := m.S.Get(ctx, target+"/"+manifestName, maxManifest); err != nil {
			return rep, fmt.Errorf("pointer %s: %w", p, err)
		}
		cond := Cond{IfNoneMatch: true}
		if known {
			cond = Cond{IfMatch: st.etag}
		}
		etag, err := m.S.Put(ctx, p, []byte(target+"\n"), cond)
		if errors.Is(err, ErrPrecondition) {
			// Lost: unless the winner points where this one would.
			if now, netag, rerr := m.S.ReadPointer(ctx, p); rerr == nil && now == target {
				m.pulled[p] = pointerState{target, netag}
				continue
			}
			return rep, fmt.Errorf("%s: %w (%v)", m.S.URL(p), ErrPointerMoved, err)
		}
		if err != nil {
			return rep, err
		}
		m.pulled[p] = pointerState{target, etag}
		rep.Pointers = append(rep.Pointers, p)
	}
	return rep, nil
}

// pushVersion uploads local version v unless the store has it with the
// same manifest, then reduces the local copy to its metadata.
func (m *Mirror) pushVersion(ctx context.Context, v string, rep *PushReport) error {
	dir := filepath.Join(m.Root, v)
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // not a published version
	}
	if err != nil {
		return err
	}
	// remoteNow: the store's manifest of v, nil when it has none.
	remoteNow := func() ([]byte, error) {
		b, _, err := m.S.Get(ctx, v+"/"+manifestName, maxManifest)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	remote, err := remoteNow()
	if err != nil {
		return err
	}
	if remote != nil && bytes.Equal(remote, raw) {
		return m.reduceToMeta(v, dir)
	}
	// Another publisher of the version published it since Pull: its
	// version stands (as a build that waited for the lock on disk finds
	// the version up to date), this copy becomes its metadata. A version
	// the store had at Pull and the build replaced (WAREHOUSE_CLEAR=1) is
	// uploaded over it.
	if remote != nil && !m.published[v] {
		return m.pullMeta(ctx, v)
	}
	deadline := time.Now().Add(m.LockWait)
	lock, err := m.S.LockVersion(ctx, v, m.Holder, m.LockTTL)
	for errors.Is(err, outputroot.ErrLocked) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(2*time.Second, time.Until(deadline))):
		}
		lock, err = m.S.LockVersion(ctx, v, m.Holder, m.LockTTL)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	if remote, err = remoteNow(); err != nil {
		return err
	}
	if remote != nil && !m.published[v] {
		return m.pullMeta(ctx, v)
	}
	if err := m.uploadVersion(ctx, v, dir, raw, remote != nil, rep); err != nil {
		return err
	}
	return m.reduceToMeta(v, dir)
}

// uploadVersion is the publish order of docs/format/s3.md: (a replaced
// version's manifest removed first, so it is absent rather than mixed),
// the owner record, every file but the manifest and its digest (in
// parallel, each checked by the store), the digest, the manifest.
func (m *Mirror) uploadVersion(ctx context.Context, v, dir string, raw []byte, replacing bool, rep *PushReport) error {
	start := time.Now()
	if replacing {
		if err := m.S.Delete(ctx, v+"/"+manifestName); err != nil {
			return err
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Root, "."+v+".config")); err == nil {
		if _, err := m.S.Put(ctx, "."+v+".config", b, Cond{}); err != nil {
			return err
		}
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			if rel != manifestName && rel != digestName {
				files = append(files, filepath.ToSlash(rel))
			}
		} else if !d.IsDir() {
			return fmt.Errorf("%s: not a regular file or directory: refused", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The manifest's sha256 of each file goes with it: the store refuses
	// bytes that are not the ones the manifest records.
	want := map[string]string{}
	if man, err := warehouse.ParseManifest(raw); err == nil {
		for _, sh := range man.Shards {
			want[sh.RelativePath] = sh.ChecksumSHA256
		}
		for rel, c := range man.Files.Checksums {
			want[rel] = c.SHA256
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, m.S.Parallel))
	var sizes = make([]int64, len(files))
	for i, rel := range files {
		g.Go(func() error {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			sizes[i] = fi.Size()
			return m.S.PutFile(gctx, v+"/"+rel, p, want[rel])
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if dg, err := os.ReadFile(filepath.Join(dir, digestName)); err == nil {
		if _, err := m.S.Put(ctx, v+"/"+digestName, dg, Cond{}); err != nil {
			return err
		}
	}
	if _, err := m.S.Put(ctx, v+"/"+manifestName, raw, Cond{}); err != nil {
		return err
	}
	rep.Versions = append(rep.Versions, v)
	rep.Files += len(files) + 2
	for _, n := range sizes {
		rep.Bytes += n
	}
	rep.Bytes += int64(len(raw))
	rep.Seconds += time.Since(start).Seconds()
	return nil
}

// reduceToMeta removes a pushed version's bulk files locally, keeping
// what Pull would bring (manifest, digest, fingerprint), and marks it.
func (m *Mirror) reduceToMeta(v, dir string) error {
	man, err := warehouse.ReadManifest(dir)
	if err != nil {
		return err
	}
	keep := map[string]bool{manifestName: true, digestName: true, man.Files.Fingerprint: true}
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return err
	}
	if err := m.markMeta(v, raw); err != nil {
		return err
	}
	for _, d := range des {
		if !keep[d.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, d.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// pushStaging uploads version v's staged shards that have a record
// (shard first, then its record), and the partition records, that the
// store lacks.
func (m *Mirror) pushStaging(ctx context.Context, v string) error {
	dir := filepath.Join(m.Root, "."+v+outputroot.StagingSuffix)
	base := stagingPrefix + v + "/"
	objs, err := m.S.List(ctx, base)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, o := range objs {
		have[o.Name] = true
	}
	// A shard is uploaded with its record when the store lacks that
	// record or has another one (a partition rebuilt with
	// WAREHOUSE_CLEAR=1): the record names the shard's bytes.
	var shards, records, parts []string
	for _, sub := range []string{"shards", "partitions"} {
		des, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, d := range des {
			rel := sub + "/" + d.Name()
			if !d.Type().IsRegular() || !stagedFile(rel) {
				continue
			}
			switch {
			case sub == "partitions":
				parts = append(parts, rel)
			case strings.HasSuffix(rel, ".json"):
				local, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
				if err != nil {
					return err
				}
				if have[base+rel] {
					if remote, _, err := m.S.Get(ctx, base+rel, maxRecord); err == nil && bytes.Equal(remote, local) {
						continue
					}
				}
				if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(rel, ".json")+".twh")); err == nil {
					shards = append(shards, strings.TrimSuffix(rel, ".json")+".twh")
				}
				records = append(records, rel)
			}
		}
	}
	for _, batch := range [][]string{shards, records, parts} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(1, m.S.Parallel))
		for _, rel := range batch {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			g.Go(func() error { return m.S.PutFile(gctx, base+rel, p, "") })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// maxRecord bounds a staged shard or partition record read whole.
const maxRecord = 1 << 20

// cleanStaging removes the staging uploads of versions the store has
// published and whose local staging directory is gone (commit removed
// it): what the local commit does to the staging directory.
func (m *Mirror) cleanStaging(ctx context.Context, local map[string]bool) error {
	objs, err := m.S.List(ctx, stagingPrefix)
	if err != nil {
		return err
	}
	for _, o := range objs {
		v, _, _ := strings.Cut(strings.TrimPrefix(o.Name, stagingPrefix), "/")
		if !IsVersionName(v) || local["."+v+outputroot.StagingSuffix] {
			continue
		}
		if _, _, err := m.S.Get(ctx, v+"/"+manifestName, maxManifest); err != nil {
			continue
		}
		if err := m.S.Delete(ctx, o.Name); err != nil {
			return err
		}
	}
	return nil
}

// lockBody is a version lock object's body (".v<id>.lock").
type lockBody struct {
	Version       string `json:"version"`
	Holder        string `json:"holder"`
	ExpiresUnixMs int64  `json:"expires_unix_ms"`
}

// ClockSkew is the margin by which an expiry must be past before another
// process takes over a lock or gc ignores a lease.
const ClockSkew = 60 * time.Second

// ObjectLock is a held version lock object.
type ObjectLock struct {
	stop chan struct{}
	done chan struct{}
	s    *Store
	name string
}

// LockVersion creates the lock object ".<v>.lock" with If-None-Match: *
// (so of two publishers of one version one gets it), or takes over one
// whose expiry is more than ClockSkew past with If-Match on its ETag. It
// re-writes it every ttl/3 until Release. A live holder's lock is an error
// wrapping outputroot.ErrLocked.
func (s *Store) LockVersion(ctx context.Context, v, holder string, ttl time.Duration) (*ObjectLock, error) {
	name := "." + v + ".lock"
	body := func() []byte {
		b, _ := json.Marshal(lockBody{v, holder, time.Now().Add(ttl).UnixMilli()})
		return b
	}
	etag, err := s.Put(ctx, name, body(), Cond{IfNoneMatch: true})
	if errors.Is(err, ErrPrecondition) {
		old, oetag, gerr := s.Get(ctx, name, 4096)
		if gerr != nil {
			return nil, gerr
		}
		var lb lockBody
		if json.Unmarshal(old, &lb) == nil && time.Now().Before(time.UnixMilli(lb.ExpiresUnixMs).Add(ClockSkew)) && !deadHere(lb.Holder) {
			return nil, fmt.Errorf("%s: held by %s until %s: %w", s.URL(name), lb.Holder, time.UnixMilli(lb.ExpiresUnixMs).UTC().Format(time.RFC3339), outputroot.ErrLocked)
		}
		etag, err = s.Put(ctx, name, body(), Cond{IfMatch: oetag})
		if errors.Is(err, ErrPrecondition) {
			return nil, fmt.Errorf("%s: taken over by another process: %w", s.URL(name), outputroot.ErrLocked)
		}
	}
	if err != nil {
		return nil, err
	}
	l := &ObjectLock{stop: make(chan struct{}), done: make(chan struct{}), s: s, name: name}
	go func() {
		defer close(l.done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				if e, err := s.Put(context.Background(), name, body(), Cond{IfMatch: etag}); err == nil {
					etag = e
				}
			}
		}
	}()
	return l, nil
}

// Release stops renewing the lock and deletes it.
func (l *ObjectLock) Release() {
	if l == nil || l.stop == nil {
		return
	}
	close(l.stop)
	<-l.done
	l.stop = nil
	_ = l.s.Delete(context.Background(), l.name)
}

// deadHere reports whether holder ("host:pid:random") names a process of
// this host that no longer runs: its lock is taken over before it
// expires (a build killed on this machine and rerun here).
func deadHere(holder string) bool {
	parts := strings.Split(holder, ":")
	if len(parts) != 3 {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(parts[1])
	if parts[0] != host || err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// markMeta records that the local directory of v holds only the metadata
// of the published version whose manifest is raw.
func (m *Mirror) markMeta(v string, raw []byte) error {
	sum := sha256.Sum256(raw)
	return os.WriteFile(filepath.Join(m.Root, "."+v+metaSuffix), []byte(hex.EncodeToString(sum[:])+"\n"), 0o644)
}

// metaOnly reports whether the local directory of v is the metadata of a
// published version (markMeta), not a local build.
func (m *Mirror) metaOnly(v string) bool {
	mark, err := os.ReadFile(filepath.Join(m.Root, "."+v+metaSuffix))
	if err != nil {
		return false
	}
	raw, err := os.ReadFile(filepath.Join(m.Root, v, manifestName))
	if err != nil {
		return false
	}
	sum := sha256.Sum256(raw)
	return strings.TrimSpace(string(mark)) == hex.EncodeToString(sum[:])
}
