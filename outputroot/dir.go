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
// RENAME_EXCHANGE the old version is moved aside first (".<name>.tmp-old",
// which the next build removes if a crash leaves it). It then creates the
// version's readers lock file, so that readers without write access to
// the root (another user, a read-only mount) can still take it
// (warehouse.LockForReading).
func (d Dir) Publish(temp, name string) error {
	tmp, final := d.Path(temp), d.Path(name)
	if err := syncTree(tmp); err != nil {
		return err
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		// tmp now holds the replaced version.
		if err := atomicfile.Sync(d.root()); err != nil {
			return err
		}
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove replaced version %s: %w", tmp, err)
		}
	case errors.Is(err, unix.ENOENT):
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		old := d.Path("." + name + tmpInfix + "old")
		if err := os.Rename(final, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	default:
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := atomicfile.Sync(d.root()); err != nil {
		return err
	}
	if f, err := os.OpenFile(d.Path(warehouse.ReadersLockName(name)), os.O_RDONLY|os.O_CREATE, 0o644); err == nil {
		f.Close()
	}
	return nil
}

// Latest reads the "latest" symlink.
func (d Dir) Latest() (string, error) { return d.Pointer(warehouse.LatestName) }

// SetLatest points "latest" at name (SetPointer).
func (d Dir) SetLatest(name string) error { return d.SetPointer(warehouse.LatestName, name) }

// SetPointer makes a symlink ".<pointer>.tmp-<name>" -> name and renames it
// over pointer ("latest", "latest-<config>").
func (d Dir) SetPointer(pointer, name string) error {
	tmpLink := d.Path("." + pointer + tmpInfix + name)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(name, tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, d.Path(pointer)); err != nil {
		return err
	}
	return atomicfile.Sync(d.root())
}

// Withdraw renames the version to aside, fsyncs the root and removes it.
func (d Dir) Withdraw(name, aside string) error {
	gone := d.Path(aside)
	if err := os.Rename(d.Path(name), gone); err != nil {
		return err
	}
	if err := atomicfile.Sync(d.root()); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// Remove removes the entry's tree and fsyncs the root.
func (d Dir) Remove(name string) error {
	if err := os.RemoveAll(d.Path(name)); err != nil {
		return err
	}
	return atomicfile.Sync(d.root())
}

// Usage walks the entry without following links.
func (d Dir) Usage(name string) (bytes int64, newest time.Time) {
	_ = filepath.WalkDir(d.Path(name), func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		if e.Type().IsRegular() {
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
