package outputroot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"warehouse-etl/internal/lockfile"
	"warehouse-etl/warehouse"
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

// versionOfTemporary returns the version whose lock covers a temporary
// entry name of an output root, or "" when name is not one.
func versionOfTemporary(name string) string {
	if rest, ok := strings.CutPrefix(name, "."+warehouse.LatestName); ok && (strings.HasPrefix(rest, tmpInfix) || strings.HasPrefix(rest, "-")) {
		// the next latest or latest-<config> link: ".latest[-<config>].tmp-<version>"
		if _, v, ok := strings.Cut(rest, tmpInfix); ok {
			return v
		}
		return ""
	}
	if !strings.HasPrefix(name, ".") {
		return ""
	}
	v, _, ok := strings.Cut(name[1:], tmpInfix)
	if !ok || v == "" {
		return ""
	}
	// The temporary file of a version's owner record or input cache,
	// replaced whole by a rename (atomicfile.Write: "..<version>.config.tmp-*")
	// by a build that holds the version's lock.
	if m := configFileName.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	if strings.HasPrefix(v, ".") {
		return "" // another dotfile's temporary: not a build's
	}
	return v
}

// tryLock takes the lock called name exclusively without waiting. ok is
// false when another process holds it (shared or exclusive).
func tryLock(s Storage, name string) (l Lock, ok bool, err error) {
	l, err = s.Lock(context.Background(), name, lockfile.Options{})
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return l, true, nil
}

// CleanTemporary removes the temporary directories and links under root
// that no running build owns: each belongs to a version, and it is removed
// only while that version's build lock can be taken (a running build holds
// it, so its directory is never touched). skip names the version whose
// lock the caller already holds, if any (its own build cleans its own
// temporaries). With dryRun nothing is removed.
func CleanTemporary(root, skip string, dryRun bool) ([]Removed, error) {
	if err := localOnly(root); err != nil {
		return nil, err
	}
	return cleanTemporary(storageFor(root), skip, dryRun)
}

func cleanTemporary(s Storage, skip string, dryRun bool) ([]Removed, error) {
	entries, err := s.List()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Removed
	for _, e := range entries {
		v := versionOfTemporary(e.Name)
		if v == "" || v == skip {
			continue
		}
		lock, ok, err := tryLock(s, "."+v+buildLockSuffix)
		if err != nil {
			return out, err
		}
		if !ok {
			continue // a build of v is running: the temporary is its own
		}
		bytes, _ := s.Usage(e.Name)
		r := Removed{Path: s.Path(e.Name), Bytes: bytes, Why: "left by a build of " + v + " that did not finish"}
		if !dryRun {
			err = s.Remove(e.Name)
		}
		lock.Release()
		if errors.Is(err, ErrInUse) {
			continue // a replaced version a reader still has open: removed once it closes
		}
		if err != nil {
			return out, fmt.Errorf("remove %s: %w", r.Path, err)
		}
		out = append(out, r)
	}
	return out, nil
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

// GC removes old versions under an output root, the temporary
// directories no running build owns (CleanTemporary) and the reports of
// failed builds (FailedDir). It keeps the
// newest opts.Keep versions of each config (newest by the manifest's
// created_at_ms, then name; versions without an owner record, from before
// config names, count as one config: pointers.go), those younger than
// opts.KeepFor, the target of "latest" and of every "latest-<config>", a
// version being built (its build lock is held) and a version a reader has
// open (its readers lock is held shared: warehouse.Open takes it). A
// version is withdrawn in one step (Storage.Withdraw), under both its
// locks, so no reader finds a half-removed version. Directories that are
// not versions (no manifest) are left alone.
func GC(root string, opts GCOptions) (*GCReport, error) {
	if err := localOnly(root); err != nil {
		return nil, err
	}
	if opts.Keep < 1 {
		return nil, fmt.Errorf("keep %d: must be >= 1", opts.Keep)
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	s := storageFor(root)
	rep := &GCReport{}
	tmp, err := cleanTemporary(s, "", opts.DryRun)
	rep.Removed = append(rep.Removed, tmp...)
	if err != nil {
		return rep, err
	}
	entries, err := s.List()
	if err != nil {
		return rep, err
	}
	if err := cleanStaging(s, entries, opts, rep); err != nil {
		return rep, err
	}
	if err := cleanFailed(s, entries, opts.DryRun, rep); err != nil {
		return rep, err
	}
	// Every pointer's target is kept: latest and each config's latest-<config>.
	pointed := map[string]string{}
	for _, e := range entries {
		if e.Name == warehouse.LatestName || strings.HasPrefix(e.Name, warehouse.LatestName+"-") {
			if target, err := s.Pointer(e.Name); err == nil && (pointed[target] == "" || e.Name == warehouse.LatestName) {
				pointed[target] = e.Name // latest first: it names what readers of the root read
			}
		}
	}
	type version struct {
		name    string
		created time.Time
		config  string // the config that published it; "" unknown
	}
	var versions []version
	for _, e := range entries {
		if !e.Dir || !versionDirName.MatchString(e.Name) {
			continue
		}
		m, err := s.ReadManifest(e.Name)
		if err != nil {
			rep.Kept = append(rep.Kept, Kept{e.Name, fmt.Sprintf("manifest unreadable, left for a person to look at: %v", err)})
			continue
		}
		versions = append(versions, version{e.Name, time.UnixMilli(m.CreatedAtMs), s.Owner(e.Name)})
	}
	slices.SortFunc(versions, func(a, b version) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(b.name, a.name)
	})
	seen := map[string]int{} // versions of each config so far, newest first
	for _, v := range versions {
		seen[v.config]++
		of := ""
		if v.config != "" {
			of = " of config " + v.config
		}
		switch {
		case pointed[v.name] == warehouse.LatestName:
			rep.Kept = append(rep.Kept, Kept{v.name, "target of latest"})
			continue
		case seen[v.config] <= opts.Keep:
			rep.Kept = append(rep.Kept, Kept{v.name, fmt.Sprintf("among the newest %d%s", opts.Keep, of)})
			continue
		case pointed[v.name] != "":
			rep.Kept = append(rep.Kept, Kept{v.name, "target of " + pointed[v.name]})
			continue
		case opts.KeepFor > 0 && opts.Now.Sub(v.created) < opts.KeepFor:
			rep.Kept = append(rep.Kept, Kept{v.name, fmt.Sprintf("younger than %s", opts.KeepFor)})
			continue
		}
		bytes, _ := s.Usage(v.name)
		why, err := removeVersion(s, v.name, opts.DryRun)
		if errors.Is(err, fs.ErrNotExist) {
			continue // another gc removed it since the listing
		}
		if err != nil {
			return rep, err
		}
		if why != "" {
			rep.Kept = append(rep.Kept, Kept{v.name, why})
			continue
		}
		rep.Removed = append(rep.Removed, Removed{Path: s.Path(v.name), Bytes: bytes,
			Why: fmt.Sprintf("not among the newest %d%s, created %s", opts.Keep, of, v.created.UTC().Format(time.RFC3339))})
	}
	if len(rep.Removed) > 0 {
		if entries, err = s.List(); err != nil {
			return rep, err
		}
	}
	if err := cleanOwners(s, entries, opts.DryRun); err != nil {
		return rep, err
	}
	if opts.DryRun {
		return rep, nil
	}
	return rep, removeOrphanLocks(s)
}

var lockFileName = regexp.MustCompile(`^\.(v[0-9a-f]{16})\.(lock|readers)$`)

// removeOrphanLocks removes the lock files of versions that have nothing
// else under the root (collected before gc removed them with the version,
// or a build that never got as far as its temporary directory), each
// under both locks and only while the version is still absent: a build
// or reader that takes one meanwhile holds it, and one waiting on a
// removed file finds it stale (lockfile.Acquire) and takes a fresh one.
func removeOrphanLocks(s Storage) error {
	entries, err := s.List()
	if err != nil {
		return err
	}
	live := map[string]bool{}
	var orphans []string
	for _, e := range entries {
		if m := lockFileName.FindStringSubmatch(e.Name); m != nil {
			orphans = append(orphans, m[1])
			continue
		}
		if versionDirName.MatchString(e.Name) {
			live[e.Name] = true
		} else if v := versionOfTemporary(e.Name); v != "" {
			live[v] = true
		} else if m := stagingDirName.FindStringSubmatch(e.Name); m != nil {
			live[m[1]] = true
		}
	}
	slices.Sort(orphans)
	for _, v := range slices.Compact(orphans) {
		if live[v] {
			continue
		}
		build, ok, err := tryLock(s, "."+v+buildLockSuffix)
		if err != nil {
			return err
		}
		if !ok {
			continue // a build of v has started
		}
		readers, ok, err := tryLock(s, warehouse.ReadersLockName(v))
		if err == nil && ok && !s.Exists(v) && !s.Exists("."+v+StagingSuffix) {
			for _, l := range []string{warehouse.ReadersLockName(v), "." + v + buildLockSuffix} {
				if err = s.Remove(l); err != nil {
					break
				}
			}
		}
		if readers != nil {
			readers.Release()
		}
		build.Release()
		if err != nil {
			return err
		}
	}
	return nil
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
func cleanStaging(s Storage, entries []Entry, opts GCOptions, rep *GCReport) error {
	for _, e := range entries {
		m := stagingDirName.FindStringSubmatch(e.Name)
		if m == nil || !e.Dir {
			continue
		}
		v := m[1]
		err := removeIdle(s, e.Name, v, opts.DryRun, rep, "a build, partition or commit of "+v+" is running",
			func(newest time.Time) (remove, keep string) {
				if s.Exists(v + "/" + warehouse.ManifestName) {
					return "staging directory of " + v + ", which is published", ""
				} else if opts.KeepFor > 0 && opts.Now.Sub(newest) >= opts.KeepFor {
					return fmt.Sprintf("unfinished build of %s, untouched since %s", v, newest.UTC().Format(time.RFC3339)), ""
				}
				return "", "unfinished build of " + v + ": rerun it (its complete shards are kept) or wait for --keep-days"
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// removeIdle removes entry name, which belongs to version v, when no
// build of v runs (its build lock is free; else it is kept as running
// says) and decide, given the newest modification time under it, gives
// why (else it is kept for decide's keep). It records either in rep.
func removeIdle(s Storage, name, v string, dryRun bool, rep *GCReport, running string, decide func(newest time.Time) (remove, keep string)) error {
	lock, ok, err := tryLock(s, "."+v+buildLockSuffix)
	if err != nil {
		return err
	}
	if !ok {
		rep.Kept = append(rep.Kept, Kept{name, running})
		return nil
	}
	defer lock.Release()
	bytes, newest := s.Usage(name)
	why, keep := decide(newest)
	if why == "" {
		rep.Kept = append(rep.Kept, Kept{name, keep})
		return nil
	}
	r := Removed{Path: s.Path(name), Bytes: bytes, Why: why}
	if !dryRun {
		if err := s.Remove(name); err != nil {
			return fmt.Errorf("remove %s: %w", r.Path, err)
		}
	}
	rep.Removed = append(rep.Removed, r)
	return nil
}

// removeVersion takes a version's build and readers locks without waiting
// and withdraws it (".<name>.tmp-gc" while its files are removed). It
// returns why it did not when a lock is held.
func removeVersion(s Storage, name string, dryRun bool) (notRemoved string, err error) {
	build, ok, err := tryLock(s, "."+name+buildLockSuffix)
	if err != nil || !ok {
		return "being built (its build lock is held)", err
	}
	defer build.Release()
	readers, ok, err := tryLock(s, warehouse.ReadersLockName(name))
	if err != nil || !ok {
		return "open by a reader (its readers lock is held)", err
	}
	defer readers.Release()
	if dryRun {
		return "", nil
	}
	err = s.Withdraw(name, "."+name+tmpInfix+"gc")
	if errors.Is(err, ErrInUse) {
		return "open by a reader (its directory is locked)", nil
	}
	gone := errors.Is(err, fs.ErrNotExist) // another gc removed it
	if err != nil && !gone {
		return "", err
	}
	// The version is gone: its lock files go too, removed while held, so
	// a process waiting on one finds it stale and takes a fresh file
	// (lockfile.Acquire checks the file it locked is still the path's).
	for _, l := range []string{warehouse.ReadersLockName(name), "." + name + buildLockSuffix} {
		if err := s.Remove(l); err != nil {
			return "", err
		}
	}
	if gone {
		return "", fmt.Errorf("%s: %w", s.Path(name), fs.ErrNotExist)
	}
	return "", nil
}
