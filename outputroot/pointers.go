package outputroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/warehouse"
)

// Versions of several configs in one output root are kept apart by name:
//
//	<output_root>/
//	  latest-<config> -> v<16 hex>  the newest version of that config
//	  latest          -> v<16 hex>  the newest version of the config that owns it
//	  .v<16 hex>.config             the name of the config that published the version
//
// A build of config C points latest-C at its version, and moves latest only
// when latest names nothing, a version no config owns (an output root from
// before config names: its only config takes it over), or a version of C.
// So `--tensor-warehouse ROOT` keeps reading the first config's versions
// while another config publishes beside it, and ROOT/latest-<config> names
// each config's newest. GC keeps the newest --keep versions of each config
// (versions without a .config file form one group, as before) and every
// version a pointer names.

// configSuffix names the file that records which config published a
// version: ".<version>.config".
const configSuffix = ".config"

// inputsSuffix names a version's input cache (pipeline/reuse_inputs.go):
// ".<version>.inputs". It goes with the version's owner record.
const inputsSuffix = ".inputs"

var configFileName = regexp.MustCompile(`^\.(v[0-9a-f]{16})(` + regexp.QuoteMeta(configSuffix) + `|` + regexp.QuoteMeta(inputsSuffix) + `)$`)

// ownerFile is the name of version name's owner record.
func ownerFile(name string) string { return "." + name + configSuffix }

// InputCacheFile is the name, in its output root, of version name's input
// cache.
func InputCacheFile(name string) string { return "." + name + inputsSuffix }

// ForConfig names the config whose version the lock publishes: Publish and
// RepairLatest then move the pointers by the rule above. Without it (an
// unnamed config) only latest moves, as it always did.
func (v *VersionLock) ForConfig(config string) error {
	if config != "" && !warehouse.ValidConfigName(config) {
		return fmt.Errorf("config name %q: %s", config, warehouse.ConfigNameRule)
	}
	v.config = config
	return nil
}

// owner is the config that published version name ("" when none is
// recorded: a version from before config names, or of an unnamed config).
func (d Dir) owner(name string) string {
	b, err := os.ReadFile(d.Path(ownerFile(name)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Owner is the config that published version name, "" when unknown.
func (d Dir) Owner(name string) string { return d.owner(name) }

// SetOwner records config as the publisher of version name, durably.
func (d Dir) SetOwner(name, config string) error {
	// Replaced whole by a rename: the record lives in the root, not in a
	// version directory published whole, and a kill mid-write must not
	// leave it empty (TestCrashSIGKILLBuilds).
	return atomicfile.Write(d.Path(ownerFile(name)), []byte(config+"\n"), 0o644)
}

// Pointer reads the pointer symlink called pointer ("latest",
// "latest-<config>"). A pointer that is not a symbolic link is a
// *NotFollowedError naming it.
func (d Dir) Pointer(pointer string) (string, error) {
	if err := refuseUnless(d.Path(pointer), fs.ModeSymlink); err != nil {
		return "", err
	}
	return os.Readlink(d.Path(pointer))
}

// movePointers points latest-<config> at v's version when it names
// nothing or, with onlyNewer, a version created before created, and latest
// by the rule of this file (onlyNewer: and only over an older version).
// It reports whether it moved latest.
func (v *VersionLock) movePointers(created int64, onlyNewer bool) (bool, error) {
	older := func(target string) bool {
		if target == v.name {
			return false
		}
		if !onlyNewer {
			return true
		}
		m, err := v.s.ReadManifest(target)
		return err != nil || m.CreatedAtMs < created
	}
	if v.config != "" {
		p := warehouse.LatestNameFor(v.config)
		if target, err := v.s.Pointer(p); err != nil || older(target) {
			if err := v.s.SetPointer(p, v.name); err != nil {
				return false, err
			}
		}
	}
	target, err := v.s.Pointer(warehouse.LatestName)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid):
		return false, err
	case err == nil && target == v.name:
		return false, nil
	case err == nil && v.s.Exists(target):
		if owner := v.s.Owner(target); owner != "" && owner != v.config {
			return false, nil // another config's latest
		}
		if !older(target) {
			return false, nil
		}
	}
	return true, v.s.SetPointer(warehouse.LatestName, v.name)
}

// cleanOwners removes the owner records and input caches of versions
// that are gone.
func cleanOwners(s Storage, entries []Entry, dryRun bool) error {
	if dryRun {
		return nil
	}
	for _, e := range entries {
		m := configFileName.FindStringSubmatch(e.Name)
		if m == nil || s.Exists(m[1]) {
			continue
		}
		if err := s.Remove(e.Name); err != nil {
			return err
		}
	}
	return nil
}
