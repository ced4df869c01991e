package main

// Output roots in an S3-compatible object store (docs/format/s3.md): a
// build, partition or commit to output_root "s3://bucket/prefix" runs on
// a local mirror of the root between objstore's Pull and Push; a reader
// given --tensor-warehouse s3://... downloads the version, checked, into
// a local directory under a lease and reads that; gc --output-root
// s3://... decides as on disk and removes in the store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"warehouse-etl/config"
	"warehouse-etl/internal/lockfile"
	"warehouse-etl/objstore"
	"warehouse-etl/outputroot"
	"warehouse-etl/pipeline"
)

// s3Settings are what object store roots read from the environment:
//
//	WAREHOUSE_ETL_S3_WORK       where builds keep the local mirror of an s3:// output root
//	                            (default <user cache dir>/warehouse-etl/s3-work)
//	WAREHOUSE_ETL_S3_CACHE      where readers download a version (default <user cache dir>/warehouse-etl/s3-cache)
//	WAREHOUSE_ETL_LEASE_TTL_S   a reader's lease, and a publisher's lock object, in seconds (default 600)
//
// The endpoint, region and credentials are the AWS SDK's own (AWS_*,
// shared config and credentials files: objstore.Open).
type s3Settings struct {
	work, cache string
	leaseTTL    time.Duration
}

func s3SettingsFrom(getenv func(string) string) (s3Settings, error) {
	var st s3Settings
	base := ""
	if d, err := os.UserCacheDir(); err == nil {
		base = filepath.Join(d, "warehouse-etl")
	} else {
		base = filepath.Join(os.TempDir(), "warehouse-etl")
	}
	st.work = filepath.Join(base, "s3-work")
	if v, ok := envValue(getenv, "WAREHOUSE_ETL_S3_WORK"); ok {
		st.work = v
	}
	st.cache = filepath.Join(base, "s3-cache")
	if v, ok := envValue(getenv, "WAREHOUSE_ETL_S3_CACHE"); ok {
		st.cache = v
	}
	st.leaseTTL = 600 * time.Second
	if v, ok := envValue(getenv, "WAREHOUSE_ETL_LEASE_TTL_S"); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 3 {
			return st, usageError{fmt.Errorf("WAREHOUSE_ETL_LEASE_TTL_S=%q: want a number of seconds >= 3", v)}
		}
		st.leaseTTL = time.Duration(n * float64(time.Second))
	}
	return st, nil
}

// s3Root is an s3:// output root a build, partition, commit or gc runs
// on, through its local mirror (held exclusively on this machine from
// Pull to Push).
type s3Root struct {
	mirror *objstore.Mirror
	lock   *lockfile.Lock
	loc    objstore.Location
}

// openS3Root opens the store of an s3:// output root and pulls it into
// its mirror (with staging: the partitions' uploads too). It returns nil
// for a local output root.
func openS3Root(ctx context.Context, root string, getenv func(string) string, wait time.Duration, staging bool) (*s3Root, error) {
	if !objstore.IsLocation(root) {
		return nil, nil
	}
	loc, err := objstore.ParseLocation(root)
	if err != nil {
		return nil, usageError{err}
	}
	st, err := s3SettingsFrom(getenv)
	if err != nil {
		return nil, err
	}
	store, err := objstore.Open(ctx, loc)
	if err != nil {
		return nil, err
	}
	work := filepath.Join(st.work, loc.Bucket, filepath.FromSlash(loc.Prefix), "root")
	if err := os.MkdirAll(filepath.Dir(work), 0o755); err != nil {
		return nil, err
	}
	l, err := lockfile.Acquire(ctx, work+".lock", lockfile.Options{Wait: wait, Owner: "s3 mirror of " + loc.String()})
	if held := (*lockfile.HeldError)(nil); errors.As(err, &held) {
		return nil, fmt.Errorf("%v: another process on this machine works on %s: %w", held, loc, outputroot.ErrLocked)
	}
	if err != nil {
		return nil, err
	}
	r := &s3Root{mirror: objstore.NewMirror(store, work, objstore.Holder(), st.leaseTTL), lock: l, loc: loc}
	r.mirror.LockWait = wait
	if err := r.mirror.Pull(ctx, staging); err != nil {
		l.Release()
		return nil, fmt.Errorf("read %s: %w", loc, err)
	}
	return r, nil
}

// forConfig points cfg's output root at the mirror.
func (r *s3Root) forConfig(cfg *config.Config) { cfg.OutputRoot = r.mirror.Root }

func (r *s3Root) close() {
	if r != nil && r.lock != nil {
		r.lock.Release()
		r.lock = nil
	}
}

// url is the store's URL of a path of the mirror (a version directory,
// a staging directory).
func (r *s3Root) url(local string) string {
	name := filepath.Base(local)
	if v, ok := strings.CutSuffix(strings.TrimPrefix(name, "."), outputroot.StagingSuffix); ok {
		return r.loc.Join(".staging/" + v).String()
	}
	return r.loc.Join(name).String()
}

// push publishes what the build made in the mirror. A pointer another
// publisher moved meanwhile is a *outputroot.PublishedError (exit 9): the
// version is published, the other publisher's pointer stands.
func (r *s3Root) push(ctx context.Context, log *slog.Logger) error {
	rep, err := r.mirror.Push(ctx)
	if rep != nil && len(rep.Versions) > 0 {
		log.Info("uploaded", "root", r.loc.String(), "versions", strings.Join(rep.Versions, ","), "files", rep.Files, "bytes", rep.Bytes,
			"seconds", rep.Seconds, "MBps", float64(rep.Bytes)/1e6/max(rep.Seconds, 1e-9))
	}
	if errors.Is(err, objstore.ErrPointerMoved) {
		return &outputroot.PublishedError{Version: r.loc.String(), Err: err}
	}
	if err != nil {
		return fmt.Errorf("publish to %s: %w", r.loc, err)
	}
	return nil
}

// s3ReaderFlags are, per command, the flags that name a version to read.
var s3ReaderFlags = map[string][]string{
	"verify":  {"tensor-warehouse"},
	"inspect": {"tensor-warehouse"},
	"load":    {"tensor-warehouse", "mix"}, // --mix URL=WEIGHT
	"export":  {"tensor-warehouse"},
	"diff":    {"tensor-warehouse", "against"},
	"serve":   {"tensor-warehouse", "against"},
	"report":  {"tensor-warehouse", "against"},
}

// fetchS3Args replaces each s3:// location a reader command is given
// with the local directory of the version, downloaded and checked
// (objstore.OpenVersion) under a lease; done releases the leases and
// removes the copies. Locations elsewhere are left as they are.
//
// The command's output names the store's URL where it would name the
// local copy (which is gone when it exits): cenv's streams replace it.
func fetchS3Args(ctx context.Context, env *environment, command string, args []string) (out []string, cenv *environment, done func(), err error) {
	flags := s3ReaderFlags[command]
	done = func() {}
	if flags == nil {
		return args, env, done, nil
	}
	out = append([]string(nil), args...)
	var opened []*objstore.Local
	done = func() {
		for _, l := range opened {
			l.Close()
		}
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(flags, name) {
			continue
		}
		idx := i
		if !hasVal {
			if i+1 >= len(out) {
				break
			}
			idx, val = i+1, out[i+1]
			i++
		}
		suffix := "" // --mix PATH=WEIGHT: the location is PATH, split at the last '=' as mixFlag.Set does
		if name == "mix" {
			if j := strings.LastIndexByte(val, '='); j > 0 {
				val, suffix = val[:j], val[j:]
			}
		}
		if !objstore.IsLocation(val) {
			continue
		}
		t0 := time.Now()
		l, err := openS3Version(ctx, env.getenv, val)
		if err != nil {
			done()
			return nil, env, func() {}, err
		}
		opened = append(opened, l)
		secs := time.Since(t0).Seconds()
		fmt.Fprintf(env.stderr, "%s: downloaded into %s, every file checked against its manifest (lease held while reading): %d bytes in %.3fs, %.1f MB/s\n",
			l.URL, l.Dir, l.Bytes, secs, float64(l.Bytes)/1e6/max(secs, 1e-9))
		if hasVal {
			out[idx] = "--" + name + "=" + l.Dir + suffix
		} else {
			out[idx] = l.Dir + suffix
		}
	}
	if len(opened) == 0 {
		return out, env, done, nil
	}
	var pairs []string
	for _, l := range opened {
		pairs = append(pairs, l.Dir, l.URL)
	}
	r := strings.NewReplacer(pairs...)
	cenv = &environment{streams: env.streams, getenv: env.getenv}
	cenv.stdout = replacingWriter{env.stdout, r}
	cenv.stderr = replacingWriter{env.stderr, r}
	return out, cenv, done, nil
}

// replacingWriter writes what it is given with r's replacements.
type replacingWriter struct {
	w io.Writer
	r *strings.Replacer
}

func (w replacingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.r.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// openS3Version downloads the version loc names: s3://bucket/prefix (its
// latest), s3://bucket/prefix/v<16 hex> or s3://bucket/prefix/latest-<config>.
func openS3Version(ctx context.Context, getenv func(string) string, location string) (*objstore.Local, error) {
	loc, err := objstore.ParseLocation(location)
	if err != nil {
		return nil, usageError{err}
	}
	st, err := s3SettingsFrom(getenv)
	if err != nil {
		return nil, err
	}
	ref := ""
	if dir, last := filepath.Split(loc.Prefix); objstore.IsVersionName(last) || last == "latest" || strings.HasPrefix(last, "latest-") {
		ref, loc.Prefix = last, strings.TrimSuffix(dir, "/")
	}
	store, err := objstore.Open(ctx, loc)
	if err != nil {
		return nil, err
	}
	return store.OpenVersion(ctx, ref, objstore.ReadOptions{CacheDir: st.cache, Holder: objstore.Holder(), LeaseTTL: st.leaseTTL})
}

// commitS3 commits the partitions' uploads pulled into the mirror and
// publishes the version; with wait, while some partitions have not
// uploaded yet (exit 8), it pulls again every few seconds until wait has
// passed.
func commitS3(ctx context.Context, r *s3Root, copts pipeline.CommitOptions, wait time.Duration, log *slog.Logger) (*pipeline.Result, error) {
	deadline := time.Now().Add(wait)
	for {
		res, err := pipeline.Commit(ctx, copts)
		partial := (*pipeline.IncompleteError)(nil)
		if errors.As(err, &partial) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(min(5*time.Second, time.Until(deadline))):
			}
			if err := r.mirror.Pull(ctx, true); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return res, r.push(ctx, log)
	}
}

// gcS3 is gc of an s3:// output root: outputroot.GC decides on the
// mirror (a dry run: the same rules as on disk), the store removes, and
// versions with a live reader's lease are kept (objstore.Mirror.GC).
func gcS3(ctx context.Context, root string, getenv func(string) string, opts outputroot.GCOptions) (*outputroot.GCReport, error) {
	r, err := openS3Root(ctx, root, getenv, 0, false)
	if err != nil {
		return nil, err
	}
	defer r.close()
	dry := opts
	dry.DryRun = true
	local, err := outputroot.GC(r.mirror.Root, dry)
	if err != nil {
		return nil, err
	}
	rep, err := r.mirror.GC(ctx, local, time.Now(), opts.KeepFor, opts.DryRun)
	if err != nil || opts.DryRun {
		return rep, err
	}
	return rep, r.mirror.Pull(ctx, false)
}
