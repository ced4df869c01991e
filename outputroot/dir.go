package outputroot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/internal/fsfault"
	"warehouse-etl/internal/lockfile"
	"warehouse-etl/warehouse"
)

// Dir is the Storage of an output root on a local (or network) filesystem:
// the root is the directory, its entries are files, directories and the
// "latest" symlink.
//
// Publish follows the usual crash-safe recipe: every file of the temporary
// directory is fsynced, then the directory itself, and it is renamed to the
// version's name in one step (an existing version is swapped out with
// renameat2(RENAME_EXCHANGE), so readers see either the old complete
// version or the new one, never neither); the root is fsynced. "latest" is
// a symlink replaced by rename. Locks are flock(2) on lock files
// (internal/lockfile).
type Dir string

func (d Dir) root() string { return string(d) }

// Path is the entry's path.
func (d Dir) Path(name string) string { return filepath.Join(d.root(), name) }

// List lists the directory (symlinks as links, never followed).
func (d Dir) List() ([]Entry, error) {
	des, err := os.ReadDir(d.root())
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(des))
	for i, e := range des {
		out[i] = Entry{Name: e.Name(), Dir: e.IsDir()}
	}
	return out, nil
}

// Lock flocks the lock file name, creating the root when needed.
func (d Dir) Lock(ctx context.Context, name string, opts lockfile.Options) (Lock, error) {
	if err := os.MkdirAll(d.root(), 0o755); err != nil {
		return nil, err
	}
	l, err := lockfile.Acquire(ctx, d.Path(name), opts)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// CreateTemp creates the directory prefix<random> with mode 0777 as the
// umask allows (0755 under the usual 022), unlike os.MkdirTemp, whose 0700
// would make a published version unreadable to a training job of another
// user.
func (d Dir) CreateTemp(prefix string) (name, dir string, err error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", "", err
		}
		name := prefix + hex.EncodeToString(b[:])
		p := d.Path(name)
		err := os.Mkdir(p, 0o777)
		if err == nil {
			return name, p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", "", err
		}
	}
	return "", "", errors.New("outputroot: no unused temporary directory name in " + d.root())
}

// Publish fsyncs the temporary directory's tree and renames it to name,
// exchanging it with an existing version; where the filesystem has no
// RENAME_EXCHANGE the old version is moved aside first
// (".<name>.tmp-old-<random>", which the next build removes if a crash
// leaves it). The replaced version is removed unless a reader has it open
// (removeUnread); then the next build of the version or GC removes it. It then creates the
// version's readers lock file, so that readers without write access to
// the root (another user, a read-only mount) can still take it
// (warehouse.LockForReading).
func (d Dir) Publish(temp, name string) error {
	tmp, final := d.Path(temp), d.Path(name)
	if err := syncTree(tmp); err != nil {
		return err
	}
	err := fsfault.Check(fsfault.Rename, final)
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
	}
	switch {
	case err == nil:
		// tmp now holds the replaced version: durable first, then removed
		// unless a reader still has it open (removeUnread).
		if err := atomicfile.Sync(d.root()); err != nil {
			return &PublishedError{Version: final, Err: err}
		}
		if err := removeUnread(tmp); err != nil && !errors.Is(err, ErrInUse) {
			return &PublishedError{Version: final, Err: fmt.Errorf("remove replaced version %s: %w", tmp, err)}
		}
	case errors.Is(err, unix.ENOENT):
		if err := fsfault.RenameFile(tmp, final); err != nil {
			return err
		}
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		// A unique aside name: an earlier one may still be open by a
		// reader (removeUnread leaves it).
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return err
		}
		old := d.Path("." + name + tmpInfix + "old-" + hex.EncodeToString(rnd[:]))
		if err := fsfault.RenameFile(final, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := fsfault.RenameFile(tmp, final); err != nil {
			return err
		}
		if err := removeUnread(old); err != nil && !errors.Is(err, ErrInUse) {
			return &PublishedError{Version: final, Err: err}
		}
	default:
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := atomicfile.Sync(d.root()); err != nil {
		return &PublishedError{Version: final, Err: err}
	}
	if f, err := os.OpenFile(d.Path(warehouse.ReadersLockName(name)), os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o644); err == nil {
		f.Close()
	}
	return nil
}

// ErrInUse means a directory is open by a reader (it holds the
// directory's flock shared, as warehouse.Open does): it is not removed.
var ErrInUse = errors.New("open by a reader")

// removeUnread removes the directory tree at p unless a reader has it
// open: it locks the directory itself exclusively without waiting (a
// reader holds it shared from Open to Close) and removes the tree under
// that lock, so a reader that opened it before reads it whole, and one
// that opens the name meanwhile waits and then finds it gone. A held lock
// gives an error wrapping ErrInUse and removes nothing: the directory
// stays under its temporary name, and the next build of its version or
// gc removes it once the readers are gone. A symbolic link or a file at p
// is removed itself, never followed.
func removeUnread(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		// A file or a link, which another remover (a second gc) may
		// have removed since: gone is what was asked.
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%s: %w", p, ErrInUse)
	}
	// Another error: a filesystem without flock on directories; nothing
	// a reader could hold there either.
	return os.RemoveAll(p)
}

// Latest reads the "latest" symlink.
func (d Dir) Latest() (string, error) { return d.Pointer(warehouse.LatestName) }

// SetLatest points "latest" at name (SetPointer).
func (d Dir) SetLatest(name string) error { return d.SetPointer(warehouse.LatestName, name) }

// SetPointer makes a symlink ".<pointer>.tmp-<name>" -> name and renames it
// over pointer ("latest", "latest-<config>"). A pointer that is not a
// symbolic link is refused, never replaced.
func (d Dir) SetPointer(pointer, name string) error {
	if err := refuseUnless(d.Path(pointer), fs.ModeSymlink); err != nil {
		return err
	}
	tmpLink := d.Path("." + pointer + tmpInfix + name)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(name, tmpLink); err != nil {
		return err
	}
	if err := fsfault.RenameFile(tmpLink, d.Path(pointer)); err != nil {
		os.Remove(tmpLink)
		return err
	}
	if err := atomicfile.Sync(d.root()); err != nil {
		// Only "latest" itself counts as latest moved: a config's pointer
		// moves before it (movePointers), and latest has not yet.
		return &PublishedError{Version: d.Path(name), LatestMoved: pointer == warehouse.LatestName, Err: err}
	}
	return nil
}

// Withdraw locks the version directory exclusively without waiting (an
// error wrapping ErrInUse while a reader has it open; fs.ErrNotExist when
// it is gone, or is not a directory), renames it to aside, fsyncs the root
// and removes it, still under the lock.
func (d Dir) Withdraw(name, aside string) error {
	f, err := os.OpenFile(d.Path(name), os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s: not a directory: %w", d.Path(name), fs.ErrNotExist)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%s: %w", d.Path(name), ErrInUse)
	}
	gone := d.Path(aside)
	if err := fsfault.RenameFile(d.Path(name), gone); err != nil {
		return err
	}
	if err := atomicfile.Sync(d.root()); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// Remove removes the entry's tree (unless a reader has it open: an error
// wrapping ErrInUse) and fsyncs the root.
func (d Dir) Remove(name string) error {
	if err := removeUnread(d.Path(name)); err != nil {
		return err
	}
	return atomicfile.Sync(d.root())
}

// refuseUnless checks, without following it, that the entry at p is
// absent or of type want (fs.ModeDir, fs.ModeSymlink or 0 for a regular
// file): anything else is refused with an error naming it, so that
// nothing under the output root is followed out of it.
func refuseUnless(p string, want fs.FileMode) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if got := fi.Mode().Type(); got != want {
		return &NotFollowedError{Path: p, Got: got, Want: want}
	}
	return nil
}

// CheckEntry checks, without following links, that path (an entry of an
// output root: a version, a staging directory) is absent or a directory;
// a symbolic link or anything else is a *NotFollowedError naming it.
func CheckEntry(path string) error { return refuseUnless(path, fs.ModeDir) }

// NotFollowedError is an entry of an output root that is not what it
// should be (a symbolic link where a directory belongs, a file where
// "latest" belongs): refused, never followed.
type NotFollowedError struct {
	Path      string
	Got, Want fs.FileMode
}

func (e *NotFollowedError) Error() string {
	return fmt.Sprintf("%s: is %s, not %s: refused (nothing under the output root is followed out of it; move it away)",
		e.Path, typeName(e.Got), typeName(e.Want))
}

func typeName(t fs.FileMode) string {
	switch t {
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case 0:
		return "a regular file"
	}
	return "a special file (" + t.String() + ")"
}

// PublishedError is a failure after the version became visible under its
// name: the version is published, complete and durable as far as the
// rename goes, but what follows (the root's fsync, removing the replaced
// version, moving "latest") failed. A rerun finds the version up to date
// and finishes the rest.
type PublishedError struct {
	Version     string // the version directory
	LatestMoved bool   // latest names it, but that may not survive a crash
	Err         error
}

func (e *PublishedError) Error() string {
	if e.LatestMoved {
		return fmt.Sprintf("%s: published and latest moved, but not durably: %v (rerun the build to finish)", e.Version, e.Err)
	}
	return fmt.Sprintf("%s: published, but latest was not moved: %v (rerun the build to finish)", e.Version, e.Err)
}

func (e *PublishedError) Unwrap() error { return e.Err }

// Usage walks the entry without following links: the bytes removing it
// frees (a file also linked elsewhere, such as a shard a rebuild took
// whole into a newer version, frees nothing) and its newest mtime.
func (d Dir) Usage(name string) (bytes int64, newest time.Time) {
	_ = filepath.WalkDir(d.Path(name), func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		if e.Type().IsRegular() && !linkedElsewhere(fi) {
			bytes += fi.Size()
		}
		if fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		return nil
	})
	return bytes, newest
}

// Exists lstats the path.
func (d Dir) Exists(name string) bool {
	_, err := os.Lstat(d.Path(filepath.FromSlash(name)))
	return err == nil
}

// ReadManifest is warehouse.ReadManifest of the version directory.
func (d Dir) ReadManifest(name string) (*warehouse.Manifest, error) {
	return warehouse.ReadManifest(d.Path(name))
}

// syncTree fsyncs every file and directory under dir, directories after
// their contents.
func syncTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return atomicfile.Sync(p)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := atomicfile.Sync(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
