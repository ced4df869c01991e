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

// Storage is where an output root's entries live: the versions, "latest",
// the lock of each version, the temporary entries of builds in progress and
// the staging directories. The lifecycle (LockVersion, VersionLock.Publish,
// CleanTemporary, GC) does everything through it, so another place for
// versions (an object store) is one more implementation and no caller
// changes. Dir is the local filesystem's.
//
// Entries are named by their name in the root, never a path: "v<16 hex>",
// ".v<16 hex>.lock", ".v<16 hex>.tmp-<random>", "latest". A name, and a
// "<version>/<file>" path, never leaves the root: an implementation
// follows no symbolic link under the root out of it (it lists, removes,
// renames and measures links as links).
//
// What each method must guarantee:
//   - Path(name) is how the entry is named to people (reports, errors).
//   - List returns the root's entries, sorted by name; a root that does not
//     exist gives an error wrapping fs.ErrNotExist.
//   - Lock takes the lock called name, creating the root when needed,
//     exclusive or shared, with opts.Owner recorded for a refused caller
//     to quote. A lock another holder keeps (after opts.Wait) gives an
//     error wrapping lockfile.ErrHeld, as a *lockfile.HeldError naming the
//     lock. A holder that dies must not keep the lock (flock: the kernel
//     drops it; a lease: it expires).
//   - CreateTemp makes a new empty entry named prefix+<random> that nothing
//     else uses, and returns its name and the local directory to write a
//     version's files into.
//   - Publish makes the temporary entry temp (every file written, the
//     manifest last) the version name, atomically: a reader sees the old
//     complete version or the new one, never a mix and never neither
//     (where the storage can only remove then create, the window is
//     documented by the implementation), and it is durable when Publish
//     returns (every file and directory fsynced). The version is visible
//     to readers from then on.
//   - Latest returns the version "latest" names (the raw pointer, which the
//     caller checks); SetLatest points it at name, atomically (the old
//     value or the new, never none) and durably.
//   - Pointer and SetPointer are Latest and SetLatest for any pointer
//     ("latest", "latest-<config>").
//   - Owner returns the config recorded as the publisher of version name
//     ("" when none); SetOwner records it durably (pointers.go).
//   - Withdraw makes the published version name disappear in one step,
//     then removes what it held; a crash in between leaves a temporary
//     entry named aside, which CleanTemporary removes later. A version a
//     reader has open is left (an error wrapping ErrInUse); one that is
//     gone is an error wrapping fs.ErrNotExist.
//   - Remove removes entry name and everything under it (no error when it
//     does not exist), durably when it returns; a directory a reader has
//     open is not removed (an error wrapping ErrInUse), and a link is
//     removed as a link.
//   - Usage is the bytes of the regular files under name and the newest
//     modification time of anything under it (zeros when unreadable: it is
//     only reported).
//   - Exists reports whether name (an entry, or "<version>/<file>") exists.
//   - ReadManifest reads and checks the manifest of version name as
//     warehouse.ReadManifest does.
type Storage interface {
	Path(name string) string
	List() ([]Entry, error)
	Lock(ctx context.Context, name string, opts lockfile.Options) (Lock, error)
	CreateTemp(prefix string) (name, dir string, err error)
	Publish(temp, name string) error
	Latest() (string, error)
	SetLatest(name string) error
	Pointer(pointer string) (string, error)
	SetPointer(pointer, name string) error
	Owner(name string) string
	SetOwner(name, config string) error
	Withdraw(name, aside string) error
	Remove(name string) error
	Usage(name string) (bytes int64, newest time.Time)
	Exists(name string) bool
	ReadManifest(name string) (*warehouse.Manifest, error)
}

// Entry is one entry of an output root.
type Entry struct {
	Name string
	Dir  bool // a directory (a version, temporary or staging directory), not a link or a file
}

// Lock is a held lock of a Storage. Release drops it; it is safe to call
// more than once.
type Lock interface{ Release() }

// storageFor is the Storage of the output root at location: a local
// directory. An object store's location ("s3://bucket/p") is published by
// the CLI through a local mirror (package objstore, docs/format/s3.md);
// here it is refused (localOnly), never taken for a directory named "s3:".
func storageFor(location string) Storage { return Dir(location) }

// ErrObjectStore is an s3:// location given where a local output root is
// needed.
var ErrObjectStore = errors.New("an s3:// output root is built on a local mirror by the warehouse-etl CLI (docs/format/s3.md), not by this package directly")

// localOnly refuses an object store location.
func localOnly(location string) error {
	if strings.HasPrefix(location, "s3://") {
		return fmt.Errorf("%s: %w", location, ErrObjectStore)
	}
	return nil
}

var _ Storage = Dir("")
