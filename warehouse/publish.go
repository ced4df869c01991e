package warehouse

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked means another build of the same version holds its lock.
var ErrLocked = errors.New("another build of this version is running")

// Build is one build of one version under an output root: it holds the
// version's lock from Acquire to Release, owns a temporary directory beside
// the final one, and publishes it with Commit.
//
// Publishing follows the usual crash-safe recipe: every file is written and
// fsynced inside "<root>/.<name>.tmp-*", the manifest last; the directory is
// fsynced and renamed to "<root>/<name>" in one step (an existing version is
// swapped out with renameat2(RENAME_EXCHANGE), so readers see either the old
// complete version or the new one, never neither); the root is fsynced; the
// "latest" symlink is replaced by rename. A crash leaves at worst a stale
// tmp directory, which the next build of that version removes.
type Build struct {
	root, name string
	lock       *os.File
	tmp        string
	committed  bool
}

// Acquire takes the lock of version directory name under root, creating
// root if needed. It fails with ErrLocked when another process holds it.
func Acquire(root, name string) (*Build, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(root, "."+name+".lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", lockPath, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return &Build{root: root, name: name, lock: f}, nil
}

// FinalDir is where the version is (or will be) published.
func (b *Build) FinalDir() string { return filepath.Join(b.root, b.name) }

// Begin removes temporary directories left by crashed builds of this
// version (safe: we hold its lock) and creates a fresh one.
func (b *Build) Begin() (string, error) {
	stale, err := filepath.Glob(filepath.Join(b.root, "."+b.name+".tmp-*"))
	if err != nil {
		return "", err
	}
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("remove stale %s: %w", dir, err)
		}
	}
	tmp, err := mkdirTemp(b.root, "."+b.name+".tmp-")
	if err != nil {
		return "", err
	}
	b.tmp = tmp
	return tmp, nil
}

// Commit publishes the temporary directory as the final one and points
// "latest" at it.
func (b *Build) Commit() error {
	if b.tmp == "" || b.committed {
		return errors.New("warehouse: Commit without Begin, or twice")
	}
	if err := syncTree(b.tmp); err != nil {
		return err
	}
	final := b.FinalDir()
	err := unix.Renameat2(unix.AT_FDCWD, b.tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		// b.tmp now holds the replaced version.
		if err := syncDir(b.root); err != nil {
			return err
		}
		if err := os.RemoveAll(b.tmp); err != nil {
			return fmt.Errorf("remove replaced version %s: %w", b.tmp, err)
		}
	case errors.Is(err, unix.ENOENT):
		if err := os.Rename(b.tmp, final); err != nil {
			return err
		}
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
		// No RENAME_EXCHANGE on this filesystem: move the old version
		// aside, then rename. A crash between the two renames leaves the
		// old version under .<name>.tmp-old-*, which the next build removes.
		old := filepath.Join(b.root, "."+b.name+".tmp-old")
		if err := os.Rename(final, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Rename(b.tmp, final); err != nil {
			return err
		}
		if err := os.RemoveAll(old); err != nil {
			return err
		}
	default:
		return fmt.Errorf("publish %s: %w", final, err)
	}
	b.committed = true
	if err := syncDir(b.root); err != nil {
		return err
	}
	// The readers lock file exists from publication on, so that readers
	// without write access to the root (another user, a read-only mount)
	// can still take it (LockForReading).
	if f, err := os.OpenFile(filepath.Join(b.root, "."+b.name+readersLockSuffix), os.O_RDONLY|os.O_CREATE, 0o644); err == nil {
		f.Close()
	}
	return b.pointLatest()
}

// pointLatest replaces root/latest with a symlink to the version directory.
func (b *Build) pointLatest() error {
	tmpLink := filepath.Join(b.root, ".latest.tmp-"+b.name)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(b.name, tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(b.root, LatestName)); err != nil {
		return err
	}
	return syncDir(b.root)
}

// LatestName is the symlink under the output root that names the newest
// published version.
const LatestName = "latest"

// Release removes an uncommitted temporary directory and drops the lock.
// It is safe to call more than once.
func (b *Build) Release() error {
	var err error
	if b.tmp != "" && !b.committed {
		err = os.RemoveAll(b.tmp)
		b.tmp = ""
	}
	if b.lock != nil {
		b.lock.Close() // closing the descriptor releases the flock
		b.lock = nil
	}
	return err
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
		return syncFile(p)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

func syncFile(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}

func syncDir(p string) error { return syncFile(p) }

// ResolveDir turns a --tensor-warehouse argument into a version directory:
// a version directory itself (it has a manifest.json), or an output root
// whose "latest" symlink names one.
func ResolveDir(p string) (string, error) {
	if _, err := os.Stat(filepath.Join(p, ManifestName)); err == nil {
		return p, nil
	}
	target, err := os.Readlink(filepath.Join(p, LatestName))
	if err != nil {
		return "", fmt.Errorf("%s: neither a warehouse version (no %s) nor a root with a %q pointer", p, ManifestName, LatestName)
	}
	if filepath.IsAbs(target) || strings.Contains(target, "/") || strings.HasPrefix(target, ".") {
		return "", fmt.Errorf("%s/%s -> %q: the pointer must name a version directory beside it", p, LatestName, target)
	}
	return filepath.Join(p, target), nil
}
