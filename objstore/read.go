package objstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/warehouse"
)

// Lease is a reader's hold on a version: the object
// ".leases/<version>/<holder>.json" (docs/format/s3.md), re-written every
// TTL/3 until Release deletes it. gc removes no version with a lease that
// has not expired (ClockSkew past its expiry).
type Lease struct {
	s       *Store
	name    string
	stop    chan struct{}
	done    chan struct{}
	release sync.Once
}

type leaseBody struct {
	Version       string `json:"version"`
	Holder        string `json:"holder"`
	ExpiresUnixMs int64  `json:"expires_unix_ms"`
}

// TakeLease writes holder's lease on version v, valid for ttl and renewed
// every ttl/3 until Release.
func (s *Store) TakeLease(ctx context.Context, v, holder string, ttl time.Duration) (*Lease, error) {
	name := leasesPrefix + v + "/" + strings.ReplaceAll(holder, "/", "_") + ".json"
	body := func() []byte {
		b, _ := json.Marshal(leaseBody{v, holder, time.Now().Add(ttl).UnixMilli()})
		return b
	}
	if _, err := s.Put(ctx, name, body(), Cond{}); err != nil {
		return nil, err
	}
	l := &Lease{s: s, name: name, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(max(ttl/3, time.Second))
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				_, _ = s.Put(context.Background(), name, body(), Cond{})
			}
		}
	}()
	return l, nil
}

// Release stops renewing the lease and deletes it; safe to call twice.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.release.Do(func() {
		close(l.stop)
		<-l.done
		_ = l.s.Delete(context.Background(), l.name)
	})
}

// LiveLeases returns, per version, the holders of leases that have not
// expired (expiry plus ClockSkew after now).
func (s *Store) LiveLeases(ctx context.Context, now time.Time) (map[string][]string, error) {
	objs, err := s.List(ctx, leasesPrefix)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, o := range objs {
		body, _, err := s.Get(ctx, o.Name, maxLease)
		if errors.Is(err, fs.ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, err
		}
		lb, ok := parseLease(body)
		if !ok {
			continue // not a lease: protects nothing
		}
		if now.Before(time.UnixMilli(lb.ExpiresUnixMs).Add(ClockSkew)) {
			out[lb.Version] = append(out[lb.Version], lb.Holder)
		}
	}
	return out, nil
}

// Local is a version downloaded from the store into a local directory,
// every file checked against its manifest, with the lease that keeps gc
// from removing it while it is read.
type Local struct {
	Dir     string // the local version directory
	Version string
	URL     string // s3://bucket/prefix/<version>
	Bytes   int64  // the bytes downloaded
	lease   *Lease
	tmp     string
}

// Close releases the lease and removes the local copy.
func (l *Local) Close() {
	l.lease.Release()
	if l.tmp != "" {
		os.RemoveAll(l.tmp)
	}
}

// ReadOptions are how OpenVersion reads.
type ReadOptions struct {
	CacheDir string        // where the local copy goes (a new directory under it, removed by Close)
	Holder   string        // the lease's holder
	LeaseTTL time.Duration // the lease's TTL
}

// OpenVersion resolves ref (a version name, a pointer name, or "" for
// "latest") in the store, takes a lease on the version, and downloads it
// into a fresh directory under opts.CacheDir: the manifest and digest
// first (checked as warehouse.ReadManifest checks them), then every file
// the version holds, each checked against the size and sha256 its
// manifest records as it streams in. A version without a manifest object
// is not a version (fs.ErrNotExist): an interrupted upload is never read.
// The caller opens Dir with the local readers, which check it again as
// they always do.
func (s *Store) OpenVersion(ctx context.Context, ref string, opts ReadOptions) (*Local, error) {
	v := ref
	if v == "" {
		v = warehouse.LatestName
	}
	if isPointerName(v) {
		target, _, err := s.ReadPointer(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("%s is neither a version nor an output root with a readable %s: %w", s.loc, v, err)
		}
		v = target
	}
	if !IsVersionName(v) {
		return nil, fmt.Errorf("%s: %q is neither a version (v<16 hex>) nor a pointer", s.loc, ref)
	}
	lease, err := s.TakeLease(ctx, v, opts.Holder, opts.LeaseTTL)
	if err != nil {
		return nil, err
	}
	l := &Local{Version: v, URL: s.URL(v), lease: lease}
	ok := false
	defer func() {
		if !ok {
			l.Close()
		}
	}()
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return nil, err
	}
	l.tmp, err = os.MkdirTemp(opts.CacheDir, "s3-"+v+"-")
	if err != nil {
		return nil, err
	}
	l.Dir = filepath.Join(l.tmp, v)
	if err := os.Mkdir(l.Dir, 0o755); err != nil {
		return nil, err
	}
	raw, _, err := s.Get(ctx, v+"/"+manifestName, maxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no %s object: not a published version (an upload that did not finish is never read): %w", s.URL(v), manifestName, err)
	}
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(l.Dir, manifestName), raw, 0o644); err != nil {
		return nil, err
	}
	if dg, _, err := s.Get(ctx, v+"/"+digestName, 4096); err == nil {
		if err := os.WriteFile(filepath.Join(l.Dir, digestName), dg, 0o644); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	m, err := warehouse.ReadManifest(l.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.URL, err)
	}
	type want struct {
		bytes  int64
		sha256 string
	}
	wants := map[string]want{}
	for _, sh := range m.Shards {
		wants[sh.RelativePath] = want{sh.Bytes, sh.ChecksumSHA256}
	}
	for rel, c := range m.Files.Checksums {
		wants[rel] = want{c.Bytes, c.SHA256}
	}
	objs, err := s.List(ctx, v+"/")
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, s.Parallel))
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Name, v+"/")
		if rel == manifestName || rel == digestName {
			continue
		}
		if err := checkRel(rel); err != nil {
			return nil, fmt.Errorf("%s: %w", s.URL(o.Name), err)
		}
		listed[rel] = true
		l.Bytes += o.Size
		w, known := wants[rel]
		g.Go(func() error {
			if !known {
				// Not recorded in the manifest (a manifest from before
				// files.checksums): the local readers check what they can.
				_, err := s.Download(gctx, o.Name, filepath.Join(l.Dir, filepath.FromSlash(rel)), 0, "")
				return err
			}
			_, err := s.Download(gctx, o.Name, filepath.Join(l.Dir, filepath.FromSlash(rel)), w.bytes, w.sha256)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for rel := range wants {
		if !listed[rel] {
			return nil, fmt.Errorf("%s/%s: missing: the manifest records it, the store has no such object", l.URL, rel)
		}
	}
	ok = true
	return l, nil
}

// checkRel refuses an object name that would leave the version directory.
func checkRel(rel string) error {
	if rel == "" || strings.HasPrefix(rel, "/") {
		return fmt.Errorf("object name %q: refused", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("object name %q: an empty, . or .. segment: refused", rel)
		}
	}
	return nil
}

// maxLease bounds a lease object read whole.
const maxLease = 64 << 10

// parseLease parses a lease object's body (docs/format/s3.md): JSON with
// a version name, a holder and an expiry; anything else is not a lease.
func parseLease(body []byte) (leaseBody, bool) {
	var lb leaseBody
	if len(body) > maxLease || json.Unmarshal(body, &lb) != nil || !IsVersionName(lb.Version) {
		return leaseBody{}, false
	}
	return lb, true
}
