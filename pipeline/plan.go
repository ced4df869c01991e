package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/internal/lockfile"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// One plan, not N scans. The partitions of a version share its staging
// directory; the first of them to take plan.lock scans the sources and
// writes the plan there (plan/scan.jsonl, the spill, then plan/plan.json,
// which names the spill's sha256 and the source fingerprint it was made
// from). Every other partition, and the commit, lists the sources (the
// fingerprint: names, sizes, mtimes), checks the listing against the
// plan's, and reads the plan instead of scanning every label and image
// header again. Inputs that changed between the plan and a partition are a
// *PlanChangedError. docs/format/staging.md describes the files.
const (
	planDirName  = "plan"
	planFileName = "plan.json"
	planFormat   = 1
)

// planKinds are the source kinds whose ReadImage needs nothing a Scan set
// up (it reads a sample by its path under the root), so a process that
// reads the stored plan instead of scanning can still read the images. The
// others (kdb, roverd, wshard) resolve a sample through tables their scan
// builds: their partitions scan as before, each on its own.
var planKinds = map[string]bool{"capture": true, "coco": true, "yolo": true}

// usePlan sets b up to use the version's stored plan in st, when b's
// source can (planKinds).
func (b *builder) usePlan(st *staging, store bool, who string) {
	if planKinds[b.src.Kind()] {
		b.staged = &planUse{st: st, store: store, who: who}
	}
}

// planUse is how a builder uses the version's stored plan (nil: it scans).
type planUse struct {
	st    *staging
	store bool   // a partition: write the plan when there is none
	who   string // "partition 2/8", "commit"
	// entries are the runs or episodes of the stored plan's scan, for the
	// manifest (the source's Entries() are the last Scan's, and there was
	// none); nil when this process scanned.
	entries []warehouse.SourceEntry
}

// storedPlan is plan/plan.json.
type storedPlan struct {
	Format      int    `json:"format"`
	Version     string `json:"version"`
	PlanSHA256  string `json:"plan_sha256"` // sha256 of plan/scan.jsonl
	Inputs      int64  `json:"inputs"`
	Planned     int64  `json:"planned"`
	Fingerprint struct {
		Files  int64  `json:"files"`
		Bytes  int64  `json:"bytes"`
		SHA256 string `json:"sha256"`
	} `json:"fingerprint"` // of the sources the plan was scanned from
	WrittenBy   string `json:"written_by"`
	WrittenAtMs int64  `json:"written_at_ms"`
	// Runs tallies the scan's samples per source by what the summary
	// counts of them, and Classes lists the class keys the scan found
	// (nil when the classes are pinned): with them a partition rebuilds
	// the summary and the class table without reading the spill.
	Runs    []tallyRun         `json:"runs"`
	Classes []sources.ClassKey `json:"classes,omitempty"`
	// Sources are the source's Entries() after the scan (the manifest's
	// sources table).
	Sources []warehouse.SourceEntry `json:"sources"`
}

// tallyRun is one source's samples, grouped by what the summary counts.
type tallyRun struct {
	Index  int          `json:"index"`
	Name   string       `json:"name"`
	Groups []tallyGroup `json:"groups"`
}

type tallyGroup struct {
	NonEmpty bool              `json:"non_empty"`
	Reasons  []validate.Reason `json:"reasons,omitempty"`
	Kept     bool              `json:"kept"`
	N        int64             `json:"n"`
}

// planTally is the scan's tally of storedPlan.Runs, kept while it scans.
type planTally struct {
	runs  []tallyRun
	index map[string]int // group key -> index into the last run's groups
}

func (t *planTally) add(sourceIndex int, name string, nonEmpty bool, reasons []validate.Reason, kept bool) {
	if n := len(t.runs); n == 0 || t.runs[n-1].Index != sourceIndex {
		t.runs = append(t.runs, tallyRun{Index: sourceIndex, Name: name})
		t.index = map[string]int{}
	}
	r := &t.runs[len(t.runs)-1]
	key := fmt.Sprint(nonEmpty, kept, reasons)
	i, ok := t.index[key]
	if !ok {
		i = len(r.Groups)
		t.index[key] = i
		r.Groups = append(r.Groups, tallyGroup{NonEmpty: nonEmpty, Reasons: reasons, Kept: kept})
	}
	r.Groups[i].N++
}

// maxPlanBytes bounds plan.json read back (it grows with the sources and
// the classes, not with the samples).
const maxPlanBytes = 64 << 20

func (st *staging) planDir() string       { return filepath.Join(st.dir, planDirName) }
func (st *staging) planSpillPath() string { return filepath.Join(st.planDir(), spillName[1:]) }
func (st *staging) planPath() string      { return filepath.Join(st.planDir(), planFileName) }
func (st *staging) planLockPath() string  { return filepath.Join(st.dir, "locks", "plan.lock") }

// PlanChangedError is a partition (or commit) whose sources differ from
// those the version's stored plan was scanned from.
type PlanChangedError struct {
	Staging   string
	WrittenBy string
	Plan, Now warehouse.Fingerprint
}

func (e *PlanChangedError) Error() string {
	return fmt.Sprintf("the sources changed since %s wrote this version's plan (then %d files, %d bytes; now %d files, %d bytes): "+
		"every partition of a build must see the same inputs; rerun all partitions with WAREHOUSE_CLEAR=1 to plan again, or remove %s",
		e.WrittenBy, e.Plan.Files, e.Plan.Bytes, e.Now.Files, e.Now.Bytes, filepath.Join(e.Staging, planDirName))
}

// readPlan reads plan.json: nil when there is none.
func (st *staging) readPlan() (*storedPlan, error) {
	f, err := os.Open(st.planPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := readAllCapped(f, maxPlanBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.planPath(), err)
	}
	var p storedPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", st.planPath(), err)
	}
	if p.Format != planFormat {
		return nil, fmt.Errorf("%s: format %d, want %d", st.planPath(), p.Format, planFormat)
	}
	return &p, nil
}

func (p *storedPlan) fingerprint() warehouse.Fingerprint {
	return warehouse.Fingerprint{Files: p.Fingerprint.Files, Bytes: p.Fingerprint.Bytes, SHA256: p.Fingerprint.SHA256}
}

// stagedScan is scanPass for partitions and commits: under plan.lock it
// lists the sources into tmp (the fingerprint), then reads the version's
// stored plan when the listing matches it, or scans and stores the plan
// when there is none (a partition; a commit without a plan scans into tmp
// as before). With Options.Clear a plan of other sources is replaced.
func (b *builder) stagedScan(ctx context.Context, tmp string, rep *Report) (*scanResult, error) {
	st, store := b.staged.st, b.staged.store
	t0 := b.now()
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s on %s pid %d", b.staged.who, host, os.Getpid())
	if store {
		// The first partition here scans and writes the plan; the others
		// wait for it (they would otherwise spend as long scanning).
		lock, err := lockfile.Acquire(ctx, st.planLockPath(), lockfile.Options{Owner: owner, Wait: 1 << 62})
		if err != nil {
			return nil, err
		}
		defer lock.Release()
	} // a commit holds the version lock exclusively: no partition runs
	fp, err := writeFingerprint(ctx, b, filepath.Join(tmp, warehouse.FingerprintName))
	if err != nil {
		return nil, err
	}
	sp, err := st.readPlan()
	if err != nil {
		return nil, fmt.Errorf("%w (remove %s to plan again)", err, st.planDir())
	}
	if sp != nil && sp.Version == b.id.String() && sp.fingerprint() == fp {
		res, err := b.replayPlan(ctx, st.planSpillPath(), sp, fp)
		if err != nil {
			return nil, err
		}
		if !store {
			// The commit's assemble removes its spill: a link of its own
			// keeps the plan whole for a rerun if the commit fails.
			own := filepath.Join(tmp, spillName)
			if err := linkOrCopy(res.spill, own); err != nil {
				return nil, err
			}
			res.spill = own
		}
		rep.Phases.Scan = b.now().Sub(t0).Seconds()
		b.log.Info("plan read", "inputs", res.inputs, "planned", res.planned, "written_by", sp.WrittenBy,
			"seconds", rep.Phases.Scan)
		return res, nil
	}
	if sp != nil && sp.Version == b.id.String() && !b.opts.Clear {
		return nil, &PlanChangedError{Staging: st.dir, WrittenBy: sp.WrittenBy, Plan: sp.fingerprint(), Now: fp}
	}
	if !store {
		return b.scanSources(ctx, filepath.Join(tmp, spillName), fp, rep, nil)
	}
	// Scan into a fresh directory and rename it into place: a plan
	// directory with a plan.json is complete.
	if err := os.RemoveAll(st.planDir()); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(st.dir, "plan-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	tally := &planTally{}
	res, err := b.scanSources(ctx, filepath.Join(work, filepath.Base(st.planSpillPath())), fp, rep, tally)
	if err != nil {
		return nil, err
	}
	p := storedPlan{Format: planFormat, Version: b.id.String(), PlanSHA256: res.planSHA, Inputs: res.inputs, Planned: res.planned,
		WrittenBy: owner, WrittenAtMs: b.now().UnixMilli(), Runs: tally.runs, Sources: b.src.Entries()}
	if p.Sources == nil {
		p.Sources = []warehouse.SourceEntry{}
	}
	if !res.classes.pinned {
		p.Classes = classKeys(res.classes)
	}
	p.Fingerprint.Files, p.Fingerprint.Bytes, p.Fingerprint.SHA256 = fp.Files, fp.Bytes, fp.SHA256
	raw, err := json.MarshalIndent(&p, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(work, planFileName), append(raw, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(work, st.planDir()); err != nil {
		return nil, err
	}
	res.spill = st.planSpillPath()
	return res, nil
}

// replayPlan rebuilds the scan's result from the stored plan, exactly as
// scanSources made it: the summary from the tally (Counts only count, so
// adding each group's samples n times gives the same summary), the class
// table from the same keys. The spill must hash to the plan's plan_sha256;
// pass 2 reads it as it reads a spill it scanned itself.
func (b *builder) replayPlan(ctx context.Context, spill string, sp *storedPlan, fp warehouse.Fingerprint) (*scanResult, error) {
	sum, err := fileSHA256(spill)
	if err != nil {
		return nil, err
	}
	if sum != sp.PlanSHA256 {
		return nil, fmt.Errorf("%s: sha256 %s, the plan says %s (remove %s to plan again)", spill, sum, sp.PlanSHA256, filepath.Dir(spill))
	}
	res := &scanResult{spill: spill, summary: &validate.SummaryBuilder{}, fingerprint: fp, planSHA: sum}
	for _, r := range sp.Runs {
		for _, g := range r.Groups {
			for range g.N {
				if err := res.summary.Add(r.Index, r.Name, g.NonEmpty, g.Reasons, g.Kept); err != nil {
					return nil, fmt.Errorf("%s: %w", filepath.Join(filepath.Dir(spill), planFileName), err)
				}
				res.inputs++
				if g.Kept {
					res.planned++
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if res.inputs != sp.Inputs || res.planned != sp.Planned {
		return nil, fmt.Errorf("%s: runs tally %d inputs, %d planned; the plan says %d, %d", filepath.Join(filepath.Dir(spill), planFileName),
			res.inputs, res.planned, sp.Inputs, sp.Planned)
	}
	if pinned := b.pinnedClasses(); pinned != nil {
		res.classes = pinned
	} else {
		keys := map[sources.ClassKey]bool{}
		for _, k := range sp.Classes {
			keys[k] = true
		}
		res.classes = discoveredClasses(keys)
	}
	if sp.Sources == nil {
		return nil, fmt.Errorf("%s: no sources table (remove %s to plan again)", filepath.Join(filepath.Dir(spill), planFileName), filepath.Dir(spill))
	}
	b.staged.entries = sp.Sources
	b.counters.Scanned.Add(res.inputs)
	b.counters.Planned.Store(res.planned)
	return res, nil
}

// pinnedClasses is the class table fixed before the scan (the config's
// classes, or the ones the source declares), nil when the scan discovers
// them.
func (b *builder) pinnedClasses() *classTable {
	if len(b.cfg.Classes) > 0 {
		return newPinnedClasses(b.cfg.Classes)
	} else if cl, ok := b.src.(sources.ClassLister); ok {
		return newDeclaredClasses(cl.Classes())
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// classKeys lists the keys of a discovered class table in index order.
func classKeys(t *classTable) []sources.ClassKey {
	keys := make([]sources.ClassKey, 0, len(t.index))
	for k := range t.index {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sources.ClassKey) int { return t.index[a] - t.index[b] })
	return keys
}
