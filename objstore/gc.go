package objstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"warehouse-etl/outputroot"
)

// GC applies to the store what outputroot.GC decided on a Mirror (run on
// the mirror's local root as a dry run, after Pull: the same rules, by
// the manifests' created_at, the pointers and the owner records): each
// version it would remove is removed from the store, its manifest first
// (so it stops being a version in one step) and then every other object
// under it and its owner record, unless a reader holds a lease on it that
// has not expired (kept, and said so). Uploads that never finished (a
// version's objects without a manifest) are removed too once no lock
// object of a live publisher covers them. With dryRun nothing is removed.
//
// Staging uploads (.staging/<version>/) go as on disk: those of a
// published version (a commit that died before removing them), and with
// keepFor those untouched for keepFor (a partitioned build nobody reran).
func (m *Mirror) GC(ctx context.Context, local *outputroot.GCReport, now time.Time, keepFor time.Duration, dryRun bool) (*outputroot.GCReport, error) {
	leases, err := m.S.LiveLeases(ctx, now)
	if err != nil {
		return nil, err
	}
	objs, err := m.S.List(ctx, "")
	if err != nil {
		return nil, err
	}
	size := map[string]int64{}
	hasManifest := map[string]bool{}
	for _, o := range objs {
		if v, rel, ok := strings.Cut(o.Name, "/"); ok && IsVersionName(v) {
			size[v] += o.Size
			if rel == manifestName {
				hasManifest[v] = true
			}
		}
	}
	rep := &outputroot.GCReport{}
	for _, k := range local.Kept {
		rep.Kept = append(rep.Kept, k)
	}
	var remove []string
	for _, r := range local.Removed {
		v := filepath.Base(r.Path)
		if !IsVersionName(v) || filepath.Dir(r.Path) != filepath.Clean(m.Root) {
			continue // the mirror's own temporaries: nothing in the store
		}
		if h := leases[v]; len(h) > 0 {
			rep.Kept = append(rep.Kept, outputroot.Kept{Name: v, Why: fmt.Sprintf("%s; but a reader holds a lease on it (%s)", r.Why, strings.Join(h, ", "))})
			continue
		}
		rep.Removed = append(rep.Removed, outputroot.Removed{Path: m.S.URL(v), Bytes: size[v], Why: r.Why})
		remove = append(remove, v)
	}
	for v, n := range size {
		if hasManifest[v] || len(leases[v]) > 0 {
			continue
		}
		if held, err := m.lockLive(ctx, v, now); err != nil {
			return nil, err
		} else if held {
			rep.Kept = append(rep.Kept, outputroot.Kept{Name: v, Why: "an upload in progress (its lock object is live)"})
			continue
		}
		rep.Removed = append(rep.Removed, outputroot.Removed{Path: m.S.URL(v), Bytes: n, Why: "an upload that did not finish (no manifest object, no live lock)"})
		remove = append(remove, v)
	}
	staged := map[string][]Object{}
	var stagedOrder []string
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, stagingPrefix)
		v, _, _ := strings.Cut(rest, "/")
		if !ok || !IsVersionName(v) {
			continue
		}
		if staged[v] == nil {
			stagedOrder = append(stagedOrder, v)
		}
		staged[v] = append(staged[v], o)
	}
	var removeStaged []string
	for _, v := range stagedOrder {
		var bytes int64
		var newest time.Time
		for _, o := range staged[v] {
			bytes += o.Size
			if o.Modified.After(newest) {
				newest = o.Modified
			}
		}
		why := ""
		switch {
		case hasManifest[v]:
			why = "staging uploads of " + v + ", which is published"
		case keepFor > 0 && now.Sub(newest) >= keepFor:
			why = fmt.Sprintf("unfinished partitioned build of %s, untouched since %s", v, newest.UTC().Format(time.RFC3339))
		default:
			rep.Kept = append(rep.Kept, outputroot.Kept{Name: stagingPrefix + v, Why: "unfinished partitioned build of " + v + ": rerun it (its uploaded shards are kept) or wait for --keep-days"})
			continue
		}
		rep.Removed = append(rep.Removed, outputroot.Removed{Path: m.S.URL(stagingPrefix + v), Bytes: bytes, Why: why})
		removeStaged = append(removeStaged, v)
	}
	if dryRun {
		return rep, nil
	}
	for _, v := range removeStaged {
		for _, o := range staged[v] {
			if err := m.S.Delete(ctx, o.Name); err != nil {
				return rep, err
			}
		}
	}
	for i, v := range remove {
		// A reader may have taken a lease since the first look.
		if again, err := m.S.LiveLeases(ctx, time.Now()); err != nil {
			return rep, err
		} else if h := again[v]; len(h) > 0 {
			rep.Kept = append(rep.Kept, outputroot.Kept{Name: v, Why: fmt.Sprintf("a reader took a lease on it while gc ran (%s)", strings.Join(h, ", "))})
			rep.Removed = slices.DeleteFunc(rep.Removed, func(r outputroot.Removed) bool { return r.Path == m.S.URL(v) })
			remove[i] = ""
			continue
		}
		if err := m.S.Delete(ctx, v+"/"+manifestName); err != nil {
			return rep, err
		}
		for _, o := range objs {
			if strings.HasPrefix(o.Name, v+"/") && o.Name != v+"/"+manifestName {
				if err := m.S.Delete(ctx, o.Name); err != nil {
					return rep, err
				}
			}
		}
		if err := m.S.Delete(ctx, "."+v+".config"); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// lockLive reports whether version v's lock object exists and has not
// expired, and its holder is not a dead process of this host.
func (m *Mirror) lockLive(ctx context.Context, v string, now time.Time) (bool, error) {
	body, _, err := m.S.Get(ctx, "."+v+".lock", 4096)
	if err != nil {
		return false, nil
	}
	var lb lockBody
	if json.Unmarshal(body, &lb) != nil {
		return false, nil
	}
	return now.Before(time.UnixMilli(lb.ExpiresUnixMs).Add(ClockSkew)) && !deadHere(lb.Holder), nil
}
