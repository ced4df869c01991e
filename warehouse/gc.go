package warehouse

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Removed is a directory a cleanup removed (or, in a dry run, would
// remove): its path, the bytes of the files under it, and why.
type Removed struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Why   string `json:"why"`
}

// Kept is a version GC left in place and why.
type Kept struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// tmpInfix marks the temporary directories of an output root:
// ".<version>.tmp-<random>" (a build in progress or crashed),
// ".<version>.tmp-old" (the old version during a non-atomic swap),
// ".<version>.tmp-gc-<random>" (a version GC is removing) and
// ".latest.tmp-<version>" (the next latest symlink).
const tmpInfix = ".tmp-"

// versionOfTemporary returns the version whose lock covers a temporary
// entry name of an output root, or "" when name is not one.
func versionOfTemporary(name string) string {
	if rest, ok := strings.CutPrefix(name, "."+LatestName+tmpInfix); ok {
		return rest
	}
	if !strings.HasPrefix(name, ".") {
		return ""
	}
	v, _, ok := strings.Cut(name[1:], tmpInfix)
	if !ok || v == "" {
		return ""
	}
	return v
}

// tryLock takes the lock file root/.<name><suffix> exclusively without
// waiting. ok is false when another process holds it (shared or
// exclusive); the caller closes the returned file to release it.
func tryLock(root, name, suffix string) (f *os.File, ok bool, err error) {
	p := filepath.Join(root, "."+name+suffix)
	f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, true, nil
}

// buildLockSuffix and readersLockSuffix name a version's two lock files in
// its output root: builds hold ".<name>.lock" exclusively (Acquire);
// readers hold ".<name>.readers" shared while the version is open
// (LockForReading), and GC takes it exclusively before removing a version.
const (
	buildLockSuffix   = ".lock"
	readersLockSuffix = ".readers"
)

// CleanTemporary removes the temporary directories and links under root
// that no running build owns: each belongs to a version, and it is removed
// only while that version's build lock can be taken (a running build holds
// it, so its directory is never touched). skip names the version whose
// lock the caller already holds, if any (its own build cleans its own
// temporaries). With dryRun nothing is removed.
func CleanTemporary(root, skip string, dryRun bool) ([]Removed, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Removed
	for _, e := range entries {
		v := versionOfTemporary(e.Name())
		if v == "" || v == skip {
			continue
		}
		lock, ok, err := tryLock(root, v, buildLockSuffix)
		if err != nil {
			return out, err
		}
		if !ok {
			continue // a build of v is running: the temporary is its own
		}
		p := filepath.Join(root, e.Name())
		r := Removed{Path: p, Bytes: treeBytes(p), Why: "left by a build of " + v + " that did not finish"}
		if !dryRun {
			err = os.RemoveAll(p)
		}
		lock.Close()
		if err != nil {
			return out, fmt.Errorf("remove %s: %w", p, err)
		}
		out = append(out, r)
	}
	if len(out) > 0 && !dryRun {
		return out, syncDir(root)
	}
	return out, nil
}

// treeBytes is the size of the regular files under p (0 on errors: it is
// only reported).
func treeBytes(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// GCOptions say which versions GC keeps.
type GCOptions struct {
	// Keep is how many of the newest versions to keep, at least 1.
	Keep int
	// KeepFor also keeps every version younger than this (by its
	// manifest's created_at_ms); 0 keeps none for their age.
	KeepFor time.Duration
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// Now is the time ages are measured from; zero means time.Now().
	Now time.Time
}

// GCReport is what GC did: the versions and temporary directories removed
// (or that would be, in a dry run) and the versions kept, each with why.
type GCReport struct {
	Removed []Removed `json:"removed"`
	Kept    []Kept    `json:"kept"`
}

var versionDirName = regexp.MustCompile(`^v[0-9a-f]{16}$`)

// GC removes old versions under an output root and the temporary
// directories no running build owns (CleanTemporary). It keeps the
// newest opts.Keep versions (newest by the manifest's created_at_ms, then
// name), those younger than opts.KeepFor, the target of "latest", a
// version being built (its build lock is held) and a version a reader has
// open (its readers lock is held shared: Open takes it). A version is
// removed by renaming it to a temporary name first, under both its locks,
// so no reader finds a half-removed version. Directories that are not
// versions (no manifest) are left alone.
func GC(root string, opts GCOptions) (*GCReport, error) {
	if opts.Keep < 1 {
		return nil, fmt.Errorf("keep %d: must be >= 1", opts.Keep)
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	rep := &GCReport{}
	tmp, err := CleanTemporary(root, "", opts.DryRun)
	rep.Removed = append(rep.Removed, tmp...)
	if err != nil {
		return rep, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return rep, err
	}
	if err := cleanStaging(root, entries, opts, rep); err != nil {
		return rep, err
	}
	latest, _ := os.Readlink(filepath.Join(root, LatestName))
	type version struct {
		name    string
		created time.Time
	}
	var versions []version
	for _, e := range entries {
		if !e.IsDir() || !versionDirName.MatchString(e.Name()) {
			continue
		}
		m, err := ReadManifest(filepath.Join(root, e.Name()))
		if err != nil {
			rep.Kept = append(rep.Kept, Kept{e.Name(), fmt.Sprintf("manifest unreadable, left for a person to look at: %v", err)})
			continue
		}
		versions = append(versions, version{e.Name(), time.UnixMilli(m.CreatedAtMs)})
	}
	slices.SortFunc(versions, func(a, b version) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.name, a.name)
	})
	for i, v := range versions {
		switch {
		case v.name == latest:
			rep.Kept = append(rep.Kept, Kept{v.name, "target of latest"})
			continue
		case i < opts.Keep:
			rep.Kept = append(rep.Kept, Kept{v.name, fmt.Sprintf("among the newest %d", opts.Keep)})
			continue
		case opts.KeepFor > 0 && opts.Now.Sub(v.created) < opts.KeepFor:
			rep.Kept = append(rep.Kept, Kept{v.name, fmt.Sprintf("younger than %s", opts.KeepFor)})
			continue
		}
		bytes := treeBytes(filepath.Join(root, v.name))
		why, err := removeVersion(root, v.name, opts.DryRun)
		if err != nil {
			return rep, err
		}
		if why != "" {
			rep.Kept = append(rep.Kept, Kept{v.name, why})
			continue
		}
		rep.Removed = append(rep.Removed, Removed{Path: filepath.Join(root, v.name), Bytes: bytes,
			Why: fmt.Sprintf("not among the newest %d, created %s", opts.Keep, v.created.UTC().Format(time.RFC3339))})
	}
	if !opts.DryRun {
		return rep, syncDir(root)
	}
	return rep, nil
}

// StagingSuffix names a version's staging directory in its output root,
// ".<version>.staging": where its shards are built before publication
// (partitioned builds, and every build's shard-level resume).
const StagingSuffix = ".staging"

var stagingDirName = regexp.MustCompile(`^\.(v[0-9a-f]{16})\.staging$`)

// cleanStaging removes the staging directories no build is using that are
// spent (their version is published: a commit died before removing it) or
// older than opts.KeepFor (an unfinished build nobody reran). Others are
// kept: their complete shards make a rerun cheaper.
func cleanStaging(root string, entries []os.DirEntry, opts GCOptions, rep *GCReport) error {
	for _, e := range entries {
		m := stagingDirName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		v, p := m[1], filepath.Join(root, e.Name())
		lock, ok, err := tryLock(root, v, buildLockSuffix)
		if err != nil {
			return err
		}
		if !ok {
			rep.Kept = append(rep.Kept, Kept{e.Name(), "a build, partition or commit of " + v + " is running"})
			continue
		}
		why := ""
		if _, err := os.Stat(filepath.Join(root, v, ManifestName)); err == nil {
			why = "staging directory of " + v + ", which is published"
		} else if newest := treeNewest(p); opts.KeepFor > 0 && opts.Now.Sub(newest) >= opts.KeepFor {
			why = fmt.Sprintf("unfinished build of %s, untouched since %s", v, newest.UTC().Format(time.RFC3339))
		}
		if why == "" {
			lock.Close()
			rep.Kept = append(rep.Kept, Kept{e.Name(), "unfinished build of " + v + ": rerun it (its complete shards are kept) or wait for --keep-days"})
			continue
		}
		r := Removed{Path: p, Bytes: treeBytes(p), Why: why}
		if !opts.DryRun {
			err = os.RemoveAll(p)
		}
		lock.Close()
		if err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		rep.Removed = append(rep.Removed, r)
	}
	return nil
}

// treeNewest is the newest modification time of p and everything under it.
func treeNewest(p string) time.Time {
	var t time.Time
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
		return nil
	})
	return t
}

// removeVersion takes a version's build and readers locks without waiting
// and renames it out of the way (root/.<name>.tmp-gc, removed by the
// caller). It returns why it did not when a lock is held.
func removeVersion(root, name string, dryRun bool) (notRemoved string, err error) {
	build, ok, err := tryLock(root, name, buildLockSuffix)
	if err != nil || !ok {
		return "being built (its build lock is held)", err
	}
	defer build.Close()
	readers, ok, err := tryLock(root, name, readersLockSuffix)
	if err != nil || !ok {
		return "open by a reader (its readers lock is held)", err
	}
	defer readers.Close()
	if dryRun {
		return "", nil
	}
	// Renamed first, under both locks, so the version disappears in one
	// step; the rest is removed after (a crash leaves a temporary that the
	// next build or GC removes).
	gone := filepath.Join(root, "."+name+tmpInfix+"gc")
	if err := os.Rename(filepath.Join(root, name), gone); err != nil {
		return "", err
	}
	if err := syncDir(root); err != nil {
		return "", err
	}
	return "", os.RemoveAll(gone)
}

// LockForReading takes the shared readers lock of the version directory
// dir (root/.<name>.readers), which GC needs exclusively to remove the
// version: while the returned file is open, GC leaves the version alone.
// A root the reader cannot create the lock file in (another user's
// warehouse that no build or GC has locked yet) gives a nil file and no
// error: the version is read unprotected, as before locks existed.
func LockForReading(dir string) (*os.File, error) {
	root, name := filepath.Dir(dir), filepath.Base(dir)
	p := filepath.Join(root, "."+name+readersLockSuffix)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
			return nil, nil
		}
		return nil, fmt.Errorf("readers lock %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("readers lock %s: %w", p, err)
	}
	return f, nil
}
