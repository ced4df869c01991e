package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"warehouse-etl/internal/lockfile"
)

// LatestName is the symlink under the output root that names the newest
// published version.
const LatestName = "latest"

// LatestNameFor is the pointer that names the newest version of the
// config called config, beside latest: "latest-<config>" (package
// outputroot says when each pointer moves).
func LatestNameFor(config string) string { return LatestName + "-" + config }

// ConfigNameRule says what ValidConfigName accepts.
const ConfigNameRule = "1 to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-'"

var configName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// ValidConfigName reports whether name can name a config's pointer.
func ValidConfigName(name string) bool { return configName.MatchString(name) }

// isPointerName reports whether name is latest or latest-<config>.
func isPointerName(name string) bool {
	rest, ok := strings.CutPrefix(name, LatestName)
	return ok && (rest == "" || (rest[0] == '-' && ValidConfigName(rest[1:])))
}

// ReadersLockName is the name, in its output root, of version name's
// readers lock file, ".<name>.readers": readers hold it shared while the
// version is open (LockForReading), and GC takes it exclusively before
// removing the version (package outputroot).
func ReadersLockName(name string) string { return "." + name + ".readers" }

// ResolveDir turns a --tensor-warehouse argument into a version directory:
// a version directory itself (it has a manifest.json), an output root
// whose "latest" symlink names one, or such a pointer itself
// (ROOT/latest, ROOT/latest-<config>).
func ResolveDir(p string) (string, error) {
	// A pointer itself (ROOT/latest, ROOT/latest-<config>) names the
	// version beside it, by its own name.
	if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSymlink != 0 && isPointerName(filepath.Base(p)) {
		return resolvePointer(filepath.Dir(p), filepath.Base(p))
	}
	if _, err := os.Stat(filepath.Join(p, ManifestName)); err == nil {
		return p, nil
	}
	return resolvePointer(p, LatestName)
}

// resolvePointer is the version directory the pointer called name under
// root names.
func resolvePointer(p, name string) (string, error) {
	target, err := os.Readlink(filepath.Join(p, name))
	if err != nil && name != LatestName {
		return "", fmt.Errorf("%s/%s: %w", p, name, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s: neither a warehouse version (no %s) nor a root with a %q pointer", p, ManifestName, LatestName)
	}
	if filepath.IsAbs(target) || strings.Contains(target, "/") || strings.HasPrefix(target, ".") {
		return "", fmt.Errorf("%s/%s -> %q: the pointer must name a version directory beside it", p, name, target)
	}
	return filepath.Join(p, target), nil
}

// LockForReading takes the shared readers lock of the version directory
// dir (root/.<name>.readers), which GC needs exclusively to remove the
// version: while the returned lock is held, GC leaves the version alone.
// A root the reader cannot create the lock file in (another user's
// warehouse that no build or GC has locked yet) gives a nil lock and no
// error: the version is read unprotected, as before locks existed.
func LockForReading(dir string) (*lockfile.Lock, error) {
	p := filepath.Join(filepath.Dir(dir), ReadersLockName(filepath.Base(dir)))
	l, err := lockfile.Acquire(context.Background(), p, lockfile.Options{Shared: true, ReadOnly: true, Wait: lockfile.Forever})
	var pathErr *fs.PathError
	switch {
	case err == nil:
		return l, nil
	case errors.As(err, &pathErr) && (errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS)):
		return nil, nil // opening the file: not ours to create
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("readers lock %s: %w", p, err)
	}
	return nil, err
}

// pinnedDir is a version directory as a reader holds it from Open to
// Close: a handle on the directory itself (not its name), through which
// the manifest and every shard are opened, and a shared flock(2) on that
// directory. A forced rebuild swaps a new directory in under the name
// (renameat2 RENAME_EXCHANGE) and GC renames a version aside before
// removing it; both remove the old directory only once they can lock it
// exclusively (package outputroot), so a reader reads the version it
// opened, whole, however long it keeps it open, and never a shard of
// another build that took the name since.
type pinnedDir struct {
	dir  string
	root *os.Root // the directory, opened once; files open relative to it
	lock *os.File // the same directory, flocked shared; nil where flock is unsupported
}

// pinAttempts bounds how often pinVersion retries when the name is
// swapped to another directory between its two opens.
const pinAttempts = 10

// pinVersion pins the version directory dir: it opens and flocks the
// directory shared (waiting while a remover holds it), then opens it as
// an os.Root and checks that both are the same directory, so that the
// lock covers what is read. A directory removed meanwhile is an error
// wrapping fs.ErrNotExist; one swapped for another is retried.
func pinVersion(dir string) (*pinnedDir, error) {
	for range pinAttempts {
		f, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			// A filesystem without flock on directories: read unpinned
			// by lock (the handle still pins what is opened through it).
			f.Close()
			f = nil
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			if f != nil {
				f.Close()
			}
			return nil, err
		}
		if f == nil {
			return &pinnedDir{dir: dir, root: root}, nil
		}
		fi, err1 := f.Stat()
		ri, err2 := root.Stat(".")
		if err1 == nil && err2 == nil && os.SameFile(fi, ri) {
			return &pinnedDir{dir: dir, root: root, lock: f}, nil
		}
		root.Close()
		f.Close()
	}
	return nil, fmt.Errorf("%s: replaced %d times while being opened", dir, pinAttempts)
}

// open opens the file name of the pinned directory; errors name its path.
func (p *pinnedDir) open(name string) (*os.File, error) {
	f, err := p.root.Open(name)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		pe.Path = filepath.Join(p.dir, name)
	}
	return f, err
}

// close drops the handles and the lock; it is safe on nil and twice.
func (p *pinnedDir) close() {
	if p == nil {
		return
	}
	if p.root != nil {
		p.root.Close()
		p.root = nil
	}
	if p.lock != nil {
		p.lock.Close()
		p.lock = nil
	}
}

// PinnedVersion is a version directory held the way Open holds it, for a
// reader of its files that is not a Reader (verify): every file read
// through it is of the directory it pinned, and a forced rebuild or gc
// removes that directory only once it is closed (pinnedDir).
type PinnedVersion struct{ pin *pinnedDir }

// PinVersion pins the version directory dir (a ResolveDir result).
func PinVersion(dir string) (*PinnedVersion, error) {
	p, err := pinVersion(dir)
	if err != nil {
		return nil, err
	}
	return &PinnedVersion{pin: p}, nil
}

// Root is the pinned directory: files opened through it stay inside it.
func (v *PinnedVersion) Root() *os.Root { return v.pin.root }

// ReadManifestBytes is ReadManifestBytes of the pinned directory.
func (v *PinnedVersion) ReadManifestBytes() ([]byte, error) {
	return readManifestBytesIn(v.pin.dir, v.pin.open)
}

// CheckManifestDigest is CheckManifestDigest of the pinned directory.
func (v *PinnedVersion) CheckManifestDigest(raw []byte) (sealed bool, p *DigestError) {
	return checkManifestDigestIn(v.pin.dir, v.pin.open, raw)
}

// Close drops the pin; it is safe to call twice.
func (v *PinnedVersion) Close() { v.pin.close() }
