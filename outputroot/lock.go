// Package outputroot is the lifecycle of an output root: the versions a
// build publishes there, their locks, "latest", the temporary and staging
// directories of builds in progress, and their removal (GC). The version
// format and the read API are package warehouse; this package changes what
// is under the root, through a Storage (Dir: the local filesystem).
//
// Besides what warehouse documents (the version directories, "latest" and
// each version's ".<version>.readers" lock), an output root holds:
//
//	<output_root>/
//	  .v<16 hex>.lock               a version's build lock: held exclusively by a build or commit, shared by partitions
//	  .v<16 hex>.tmp-<random>       a build in progress (or a crashed one, removed by the next build or GC)
//	                                (or a replaced version a reader still has open: removed once it closes)
//	  .v<16 hex>.tmp-old-<random>   the old version during a swap without RENAME_EXCHANGE
//	  .v<16 hex>.tmp-gc             a version GC is removing
//	  .latest.tmp-v<16 hex>         the next "latest" symlink (".latest-<config>.tmp-...": the next latest-<config>)
//	  .v<16 hex>.staging/           where a version's shards are built (docs/format/staging.md)
//	  latest-<config>               the newest version of a config (pointers.go)
//	  .v<16 hex>.config             the config that published a version (pointers.go)
//	  .v<16 hex>.failed/            the report of a build that failed its thresholds (failed.go)
package outputroot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"warehouse-etl/internal/lockfile"
	"warehouse-etl/warehouse"
)

// ErrLocked means another build of the same version holds its lock.
var ErrLocked = errors.New("another build of this version is running")

// buildLockSuffix names a version's build lock in its output root:
// ".<name>.lock".
const buildLockSuffix = ".lock"

// tmpInfix marks the temporary entries of an output root (see the package
// comment).
const tmpInfix = ".tmp-"

// TempPrefix starts the names of version name's temporary entries under
// its output root (".<name>.tmp-"): a build that takes the version's lock
// exclusively, and gc, remove the ones left behind.
func TempPrefix(name string) string { return "." + name + tmpInfix }

// VersionLock is the exclusive hold of one version's build lock under an
// output root, from LockVersion to Release: a build or a commit of the
// version. Under it the holder creates a temporary directory beside the
// version (CreateTemp), writes the version there, the manifest last, and
// publishes it (Publish): the Storage swaps it into place and "latest"
// is pointed at it. A crash leaves at worst a stale temporary directory,
// which the next build of that version (or GC) removes.
type VersionLock struct {
	s         Storage
	name      string
	lock      Lock
	tmpName   string
	tmpDir    string
	published bool
	config    string // the config whose version this is (ForConfig); "" unnamed
}

// LockVersion takes the build lock of version name under the output root
// root, creating root if needed. It fails with ErrLocked when another
// process holds it for longer than a probe does (probeGrace).
func LockVersion(root, name string) (*VersionLock, error) {
	return LockVersionWait(context.Background(), root, name, 0)
}

// LockVersionWait is LockVersion that, while another build holds the
// version's lock, retries for up to wait before failing with ErrLocked
// (wait 0: LockVersion). It stops early when ctx is done.
func LockVersionWait(ctx context.Context, root, name string, wait time.Duration) (*VersionLock, error) {
	if err := localOnly(root); err != nil {
		return nil, err
	}
	s := storageFor(root)
	l, err := lockBuild(ctx, s, name, lockfile.Options{Wait: wait}, "")
	if err != nil {
		return nil, err
	}
	return &VersionLock{s: s, name: name, lock: l}, nil
}

// probeGrace is how long lockBuild waits for a build lock, whatever the
// caller's wait: gc and every build's CleanTemporary take each version's
// build lock for a moment to see whether a build runs (tryLock), and a
// build that meets such a probe must not fail as if another build held
// the lock (exit 5).
const probeGrace = time.Second

// lockBuild takes version name's build lock, waiting at least probeGrace;
// a holder that keeps it gives an error that names the lock file, wraps
// ErrLocked and ends with why.
func lockBuild(ctx context.Context, s Storage, name string, opts lockfile.Options, why string) (Lock, error) {
	opts.Wait = max(opts.Wait, probeGrace)
	l, err := s.Lock(ctx, "."+name+buildLockSuffix, opts)
	if held := (*lockfile.HeldError)(nil); errors.As(err, &held) {
		return nil, fmt.Errorf("%s: %w%s", held.Path, ErrLocked, why)
	}
	return l, err
}

// FinalDir is where the version is (or will be) published.
func (v *VersionLock) FinalDir() string { return v.s.Path(v.name) }

// CreateTemp removes the temporaries left by crashed builds of this
// version (safe: we hold its lock): directories, and the temporary files of
// its owner record and input cache (versionOfTemporary); then it creates a
// fresh directory, where the version is written before Publish.
func (v *VersionLock) CreateTemp() (string, error) {
	entries, err := v.s.List()
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name, "."+v.name+tmpInfix) || (strings.HasPrefix(e.Name, "..") && versionOfTemporary(e.Name) == v.name) {
			// A replaced version a reader still has open stays (ErrInUse).
			if err := v.s.Remove(e.Name); err != nil && !errors.Is(err, ErrInUse) {
				return "", fmt.Errorf("remove stale %s: %w", v.s.Path(e.Name), err)
			}
		}
	}
	name, dir, err := v.s.CreateTemp("." + v.name + tmpInfix)
	if err != nil {
		return "", err
	}
	v.tmpName, v.tmpDir = name, dir
	return dir, nil
}

// Publish makes the temporary directory the version (Storage.Publish) and
// points "latest" at it.
func (v *VersionLock) Publish() error {
	if v.tmpName == "" || v.published {
		return errors.New("outputroot: Publish without CreateTemp, or twice")
	}
	// The owner record goes first, so a published version always has it;
	// a version another config published first keeps its owner.
	if v.config != "" && v.s.Owner(v.name) == "" {
		if err := v.s.SetOwner(v.name, v.config); err != nil {
			return err
		}
	}
	if err := v.s.Publish(v.tmpName, v.name); err != nil {
		return err
	}
	v.published = true
	// The version is visible from here on: a failure to move the pointers
	// says so (exit 9), it does not undo the publication.
	if _, err := v.movePointers(0, false); err != nil {
		if pe := (*PublishedError)(nil); errors.As(err, &pe) {
			return err
		}
		return &PublishedError{Version: v.s.Path(v.name), Err: err}
	}
	return nil
}

// RemoveOwnTemporaries removes the temporary directories that earlier,
// unfinished builds of this version left (safe: the caller holds the
// version's lock), for a build that finds its version up to date and so
// never calls CreateTemp.
func (v *VersionLock) RemoveOwnTemporaries() ([]Removed, error) {
	entries, err := v.s.List()
	if err != nil {
		return nil, err
	}
	var out []Removed
	for _, e := range entries {
		own := strings.HasPrefix(e.Name, "."+v.name+tmpInfix) || e.Name == "."+warehouse.LatestName+tmpInfix+v.name
		if !own || e.Name == v.tmpName {
			continue
		}
		bytes, _ := v.s.Usage(e.Name)
		r := Removed{Path: v.s.Path(e.Name), Bytes: bytes, Why: "left by an earlier build of " + v.name + " that did not finish"}
		if err := v.s.Remove(e.Name); errors.Is(err, ErrInUse) {
			continue // a replaced version a reader still has open
		} else if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RepairLatest points "latest" at this (published) version when latest is
// missing, names no readable version, or names one created before this one
// (created is this version's manifest created_at_ms), and latest-<config>
// likewise; latest only where this config may move it (pointers.go). A
// build killed between publishing its directory and swapping the pointers
// leaves exactly that; the rerun that finds the version up to date repairs
// it. A pointer keeps naming a newer version: rerunning an older config
// does not move it back.
func (v *VersionLock) RepairLatest(created int64) (bool, error) {
	return v.movePointers(created, true)
}

// Release removes an unpublished temporary directory and drops the lock.
// It is safe to call more than once.
func (v *VersionLock) Release() error {
	var err error
	if v.tmpName != "" && !v.published {
		err = v.s.Remove(v.tmpName)
		v.tmpName, v.tmpDir = "", ""
	}
	if v.lock != nil {
		v.lock.Release()
		v.lock = nil
	}
	return err
}

// SharedVersionLock is a partition's hold on a version's build lock:
// shared, so the partitions of one partitioned build run together, while a
// single-machine build or a commit of the same version (which take it
// exclusively with LockVersion) waits or is refused, and the cleanup of
// other builds' temporaries leaves this version's alone.
type SharedVersionLock struct {
	s    Storage
	name string
	lock Lock
}

// LockVersionShared takes the build lock of version name under root
// shared, retrying for up to wait while an exclusive holder (a
// single-machine build or a commit) has it; then it fails with ErrLocked.
func LockVersionShared(ctx context.Context, root, name string, wait time.Duration) (*SharedVersionLock, error) {
	if err := localOnly(root); err != nil {
		return nil, err
	}
	s := storageFor(root)
	l, err := lockBuild(ctx, s, name, lockfile.Options{Shared: true, Wait: wait}, " (a single-machine build or a commit holds it)")
	if err != nil {
		return nil, err
	}
	return &SharedVersionLock{s: s, name: name, lock: l}, nil
}

// FinalDir is where the version is (or will be) published.
func (v *SharedVersionLock) FinalDir() string { return v.s.Path(v.name) }

// Release drops the lock. It is safe to call more than once.
func (v *SharedVersionLock) Release() {
	if v.lock != nil {
		v.lock.Release()
		v.lock = nil
	}
}

// LockOwned takes the lock file at path (a shard's lock in a staging
// directory) exclusively without waiting and writes owner (one line:
// host, pid, what it is doing) into it. When another process holds it,
// the error wraps ErrLocked and quotes that process's owner line. On a
// filesystem without flock the error says so.
func LockOwned(path, owner string) (*lockfile.Lock, error) {
	l, err := lockfile.Acquire(context.Background(), path, lockfile.Options{Owner: owner})
	if held := (*lockfile.HeldError)(nil); errors.As(err, &held) {
		return nil, fmt.Errorf("%v: %w", held, ErrLocked)
	}
	return l, err
}
