package zarr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"warehouse-etl/internal/lockfile"
	"warehouse-etl/outputroot"
	"warehouse-etl/verify"
	"warehouse-etl/warehouse"
)

// ExportOptions configure Export.
type ExportOptions struct {
	Options
	// VerifyFull makes the verification before the export re-hash every
	// shard and read every value (verify.Options.Full); without
	// it the manifest, thresholds and every shard's size and header are
	// checked.
	VerifyFull bool
}

// ErrTargetLocked means another export to the same target is running.
var ErrTargetLocked = errors.New("another export to this store is running")

// Export writes the warehouse version at path (a version directory, or an
// output root with a "latest" pointer) as a Zarr store at target, as Write
// does. It first verifies the version and refuses one with findings
// (*verify.FindingsError). It holds the version's build lock, so that a
// WAREHOUSE_CLEAR rebuild cannot swap the shards while they are read
// (outputroot.ErrLocked), and a lock beside target, under which it removes
// what crashed exports to target left behind (ErrTargetLocked).
func Export(ctx context.Context, path, target string, opts ExportOptions) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := warehouse.ResolveDir(path)
	if err != nil {
		return nil, err
	}
	lock, err := outputroot.LockVersion(filepath.Dir(dir), filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	findings, err := verify.Check(ctx, dir, verify.Options{Full: opts.VerifyFull, Workers: opts.Workers, Logger: log, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	if len(findings) > 0 {
		return nil, &verify.FindingsError{Dir: dir, Findings: findings}
	}
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	target = filepath.Clean(target)
	unlock, err := lockTarget(target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := removeLeftovers(opts.FS, target, log); err != nil {
		return nil, err
	}
	return Write(ctx, dir, m, target, opts.Options)
}

// lockTarget takes an exclusive flock on ".<name>.lock" beside target.
func lockTarget(target string) (unlock func(), err error) {
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(parent, "."+filepath.Base(target)+".lock")
	l, err := lockfile.Acquire(context.Background(), lockPath, lockfile.Options{})
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, fmt.Errorf("%s: %w", lockPath, ErrTargetLocked)
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// removeLeftovers removes the temporary and replaced stores a crashed
// export to target left beside it. The caller holds target's lock, so none
// of them belongs to a running export.
func removeLeftovers(fsys FS, target string, log *slog.Logger) error {
	if fsys == nil {
		fsys = OSFS{}
	}
	parent, base := filepath.Dir(target), filepath.Base(target)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if isLeftover(name, base) {
			log.Info("removing what a crashed export left", "dir", filepath.Join(parent, name))
			if err := fsys.RemoveAll(filepath.Join(parent, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// isLeftover reports whether name is a temporary or replaced store of
// target base: ".<base>.tmp-<digits>" or ".<base>.old-<digits>" (the
// suffix os.MkdirTemp chose). Requiring digits keeps an export to "a" off
// ".a.tmp-b.tmp-123", which belongs to target "a.tmp-b".
func isLeftover(name, base string) bool {
	for _, infix := range []string{tmpInfix, oldInfix} {
		suffix, ok := strings.CutPrefix(name, "."+base+infix)
		if ok && suffix != "" && strings.Trim(suffix, "0123456789") == "" {
			return true
		}
	}
	return false
}
