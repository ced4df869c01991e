package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// The staging directory of a version is where its shards are built before
// a commit publishes them (docs/format/staging.md). It lives beside the
// versions under output_root, so commit links the shards into the version
// instead of copying them, and it survives a crash: a rerun keeps every
// shard whose receipt checks out and builds only the others.
//
//	.<version>.staging/
//	  shards/shard-NNNNN.twh    a shard, complete once its receipt exists
//	  shards/shard-NNNNN.json   its receipt, written after the shard is fsynced
//	  locks/shard-NNNNN.lock    held by the process building that shard
//	  partitions/I-of-N.json    who ran partition I of N, and whether it finished
//	  scan-*/                   a partition's private scan spill
//
// Shard k always holds the planned samples k*spp .. (k+1)*spp-1 (plan
// order: the kept samples of the scan), whatever process builds it; a
// sample that fails to decode after the scan planned it leaves its shard
// one sample short instead of moving later samples. So shard bytes do not
// depend on how many partitions built them.
const receiptFormat = 1

// staging is one version's staging directory.
type staging struct{ dir string }

func stagingDir(outRoot, name string) string {
	return filepath.Join(outRoot, "."+name+outputroot.StagingSuffix)
}

// openStaging creates the staging directory of version name (clear: empty
// it first, for WAREHOUSE_CLEAR=1 on a single-machine build).
func openStaging(outRoot, name string, clear bool) (*staging, error) {
	st := &staging{dir: stagingDir(outRoot, name)}
	// A staging name that is a symbolic link (or a file) is refused, never
	// followed: the build would write, and remove, outside the root.
	if err := outputroot.CheckEntry(st.dir); err != nil {
		return nil, err
	}
	if clear {
		if err := os.RemoveAll(st.dir); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"shards", "locks", "partitions"} {
		p := filepath.Join(st.dir, sub)
		if err := outputroot.CheckEntry(p); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func shardID(k int) string { return fmt.Sprintf("shard-%05d", k) }

func (st *staging) shardPath(k int) string {
	return filepath.Join(st.dir, "shards", shardID(k)+".twh")
}
func (st *staging) receiptPath(k int) string {
	return filepath.Join(st.dir, "shards", shardID(k)+".json")
}
func (st *staging) lockPath(k int) string {
	return filepath.Join(st.dir, "locks", shardID(k)+".lock")
}
func (st *staging) partitionPath(p Partition) string {
	return filepath.Join(st.dir, "partitions", fmt.Sprintf("%d-of-%d.json", p.Index, p.Count))
}

// shardReceipt is shards/shard-NNNNN.json: what the process that built
// shard k found, written only after the shard file is fsynced. Commit
// assembles samples.jsonl, the summary and the image statistics from the
// receipts, so it never decodes an image.
type shardReceipt struct {
	Format       int           `json:"format"`
	Version      string        `json:"version"`
	PlanSHA256   string        `json:"plan_sha256"`
	Shard        int           `json:"shard"`
	FirstPlanned int64         `json:"first_planned"`
	Planned      int64         `json:"planned"`
	Samples      int64         `json:"samples"` // written: Planned less the late failures
	Bytes        int64         `json:"bytes"`
	SHA256       string        `json:"sha256"`
	Late         []lateFailure `json:"late"`
	Sums         imageSums     `json:"sums"`
	// JPEGFallbacks counts the shard's samples that the JPEG decoder left
	// to image/jpeg (build_report.json's jpeg_fallbacks).
	JPEGFallbacks int64  `json:"jpeg_fallbacks"`
	BuiltBy       string `json:"built_by"`
	// Reuse counts the shard's samples copied from a published version
	// (reuse.go); absent when none was.
	Reuse reuseCounts `json:"reuse,omitzero"`
}

// lateFailure is a planned sample whose full decode failed.
type lateFailure struct {
	Seq   int64  `json:"seq"`
	Error string `json:"error"`
}

// maxReceiptBytes bounds a receipt read back (a receipt lists at most spp
// late failures with their messages).
const maxReceiptBytes = 64 << 20

// planOf is what a shard must hold under a plan of planned samples.
type shardPlan struct {
	version, planSHA string
	spp, planned     int64
}

func (sp shardPlan) shards() int {
	if sp.planned == 0 {
		return 0
	}
	return int((sp.planned + sp.spp - 1) / sp.spp)
}

func (sp shardPlan) span(k int) (first, n int64) {
	first = int64(k) * sp.spp
	return first, min(sp.spp, sp.planned-first)
}

// readReceipt reads and checks shard k's receipt against the plan: an error
// says why the shard cannot be used (fs.ErrNotExist when it was never
// finished).
func (st *staging) readReceipt(k int, sp shardPlan) (*shardReceipt, error) {
	f, err := os.Open(st.receiptPath(k))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := readAllCapped(f, maxReceiptBytes)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var r shardReceipt
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	first, n := sp.span(k)
	switch {
	case r.Format != receiptFormat:
		return nil, fmt.Errorf("record format %d, want %d", r.Format, receiptFormat)
	case r.Version != sp.version:
		return nil, fmt.Errorf("record of version %s, want %s", r.Version, sp.version)
	case r.PlanSHA256 != sp.planSHA:
		return nil, errors.New("built from another plan (the sources changed since, or another binary scanned them)")
	case r.Shard != k || r.FirstPlanned != first || r.Planned != n:
		return nil, fmt.Errorf("record says shard %d, planned %d from %d; want shard %d, planned %d from %d",
			r.Shard, r.Planned, r.FirstPlanned, k, n, first)
	case r.Samples+int64(len(r.Late)) != r.Planned || r.Samples < 0:
		return nil, fmt.Errorf("record counts %d written and %d late of %d planned", r.Samples, len(r.Late), r.Planned)
	case r.Samples == 0 && (r.Bytes != 0 || r.SHA256 != ""):
		return nil, errors.New("record of an empty shard names a file")
	}
	return &r, nil
}

// checkShardFile compares shard k's file with its receipt: size, and with
// hash, the sha256 of every byte.
func (st *staging) checkShardFile(ctx context.Context, k int, r *shardReceipt, hash bool) error {
	p := st.shardPath(k)
	if r.Samples == 0 {
		return nil // every planned sample failed late: no file
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.Size() != r.Bytes {
		return fmt.Errorf("%s is %d bytes, its record says %d", filepath.Base(p), fi.Size(), r.Bytes)
	}
	if !hash {
		return nil
	}
	sum, err := warehouse.FileSHA256(ctx, p)
	if err != nil {
		return err
	}
	if sum.SHA256 != r.SHA256 {
		return fmt.Errorf("%s has sha256 %s, its record says %s", filepath.Base(p), sum.SHA256, r.SHA256)
	}
	return nil
}

// checkShards reads and checks the receipts and files of shards ks in
// parallel (workers at a time). done holds the good ones by shard;
// problems says why each other one cannot be used.
func (st *staging) checkShards(ctx context.Context, ks []int, sp shardPlan, hash bool, workers int) (done map[int]*shardReceipt, problems map[int]error, err error) {
	done, problems = map[int]*shardReceipt{}, map[int]error{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, workers))
	for _, k := range ks {
		g.Go(func() error {
			r, err := st.readReceipt(k, sp)
			if err == nil {
				err = st.checkShardFile(gctx, k, r, hash)
			}
			if cerr := gctx.Err(); cerr != nil {
				return cerr
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				problems[k] = err
			} else {
				done[k] = r
			}
			return nil
		})
	}
	return done, problems, g.Wait()
}

// readAllCapped reads r to its end, refusing more than limit bytes: the
// records a build reads back (receipts, the plan, shard sums) are checked
// for size before they are decoded.
func readAllCapped(r io.Reader, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return raw, nil
}

// writeReceipt publishes shard k's receipt: written to a temporary name,
// fsynced and renamed, so a receipt is whole or absent.
func (st *staging) writeReceipt(r *shardReceipt) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return atomicfile.Write(st.receiptPath(r.Shard), raw, 0o644)
}

// forget removes shard k's receipt and file, so it is built again.
func (st *staging) forget(k int) error {
	for _, p := range []string{st.receiptPath(k), st.shardPath(k)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// partitionRun is partitions/I-of-N.json.
type partitionRun struct {
	Partition    string `json:"partition"` // "I/N"
	Index        int    `json:"index"`
	Count        int    `json:"count"`
	Version      string `json:"version"`
	PlanSHA256   string `json:"plan_sha256"`
	ShardsTotal  int    `json:"shards_total"`
	ShardFirst   int    `json:"shard_first"`
	ShardEnd     int    `json:"shard_end"` // exclusive
	Host         string `json:"host"`
	PID          int    `json:"pid"`
	StartedAtMs  int64  `json:"started_at_ms"`
	FinishedAtMs int64  `json:"finished_at_ms,omitempty"`
	Built        int    `json:"shards_built"`
	Kept         int    `json:"shards_kept"` // complete from an earlier run, checked and kept
}

func (st *staging) writePartition(r *partitionRun) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(st.partitionPath(Partition{r.Index, r.Count}), append(raw, '\n'), 0o644)
}

// partitions reads every partition run (unreadable ones are skipped:
// they only name who ran what).
func (st *staging) partitions() []partitionRun {
	entries, _ := os.ReadDir(filepath.Join(st.dir, "partitions"))
	var out []partitionRun
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(st.dir, "partitions", e.Name()))
		if err != nil || len(raw) > 1<<20 {
			continue
		}
		var r partitionRun
		if json.Unmarshal(raw, &r) == nil && r.Count > 0 {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b partitionRun) int {
		if a.Count != b.Count {
			return a.Count - b.Count
		}
		return a.Index - b.Index
	})
	return out
}

// finishedPlan reports whether some partition count N has a finished
// receipt for every partition 0..N-1, all of one plan: what commit --wait
// waits for.
func (st *staging) finishedPlan() bool {
	byCount := map[int]map[int]partitionRun{}
	for _, r := range st.partitions() {
		if byCount[r.Count] == nil {
			byCount[r.Count] = map[int]partitionRun{}
		}
		byCount[r.Count][r.Index] = r
	}
	for n, rs := range byCount {
		ok, plan := true, ""
		for i := range n {
			r, found := rs[i]
			if !found || r.FinishedAtMs == 0 || (plan != "" && r.PlanSHA256 != plan) {
				ok = false
				break
			}
			plan = r.PlanSHA256
		}
		if ok {
			return true
		}
	}
	return false
}

// describeMissing names, for each shard in ks, the partition that should
// have built it by the partition runs, and what is known of that
// partition's run.
func (st *staging) describeMissing(ks []int, total int) []string {
	recs := st.partitions()
	type key struct{ i, n int }
	by := map[key]partitionRun{}
	counts := map[int]bool{}
	for _, r := range recs {
		by[key{r.Index, r.Count}] = r
		counts[r.Count] = true
	}
	var out []string
	seen := map[key]bool{}
	for n := range counts {
		for _, k := range ks {
			i := partitionOfShard(k, total, n)
			if seen[key{i, n}] {
				continue
			}
			seen[key{i, n}] = true
			p := Partition{i, n}
			lo, hi := p.shards(total)
			what := "has not started"
			if r, ok := by[key{i, n}]; ok {
				what = fmt.Sprintf("started on %s (pid %d) and has not finished", r.Host, r.PID)
				if r.FinishedAtMs != 0 {
					what = fmt.Sprintf("finished on %s, but its shards do not check out", r.Host)
				}
			}
			out = append(out, fmt.Sprintf("partition %s (%s) %s", p, shardSpan(lo, hi), what))
		}
	}
	slices.Sort(out)
	return out
}

// partitionOfShard is the partition of n that builds shard k of total.
func partitionOfShard(k, total, n int) int {
	for i := range n {
		if lo, hi := (Partition{i, n}).shards(total); k >= lo && k < hi {
			return i
		}
	}
	return n - 1
}

// shardSpan names the shards [lo, hi): "shard 4" or "shards 4-7".
func shardSpan(lo, hi int) string {
	if hi-lo == 1 {
		return fmt.Sprintf("shard %d", lo)
	}
	return fmt.Sprintf("shards %d-%d", lo, hi-1)
}

// shardRanges formats sorted shard numbers as "3-5, 9".
func shardRanges(ks []int) string {
	var parts []string
	for i := 0; i < len(ks); {
		j := i
		for j+1 < len(ks) && ks[j+1] == ks[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ks[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ks[i], ks[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
