package warehouse

import (
	"os"
	"path/filepath"
)

// RemoveOwnTemporaries removes the temporary directories that earlier,
// unfinished builds of this version left (safe: the caller holds the
// version's lock), for a build that finds its version up to date and so
// never calls Begin.
func (b *Build) RemoveOwnTemporaries() ([]Removed, error) {
	stale, err := filepath.Glob(filepath.Join(b.root, "."+b.name+tmpInfix+"*"))
	if err != nil {
		return nil, err
	}
	var out []Removed
	for _, dir := range stale {
		if dir == b.tmp {
			continue
		}
		r := Removed{Path: dir, Bytes: treeBytes(dir), Why: "left by an earlier build of " + b.name + " that did not finish"}
		if err := os.RemoveAll(dir); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	if len(out) > 0 {
		return out, syncDir(b.root)
	}
	return nil, nil
}

// RepairLatest points "latest" at this (published) version when latest is
// missing, names no readable version, or names one created before this one
// (created is this version's manifest created_at_ms). A build killed
// between publishing its directory and swapping latest leaves exactly that;
// the rerun that finds the version up to date repairs it. latest keeps
// naming a newer version: rerunning an older config does not move it back.
func (b *Build) RepairLatest(created int64) (bool, error) {
	target, err := os.Readlink(filepath.Join(b.root, LatestName))
	if err == nil && target == b.name {
		return false, nil
	}
	if err == nil {
		if m, merr := ReadManifest(filepath.Join(b.root, target)); merr == nil && m.CreatedAtMs >= created {
			return false, nil
		}
	}
	return true, b.pointLatest()
}
