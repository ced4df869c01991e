package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// assemble is the stage that turns the receipts of every shard of plan sp
// into the version in tmp: the shard files are linked in from the staging
// directory st, and samples.jsonl, the late failures in the summary and the
// image statistics are derived from the plan and the receipts, in plan
// order; then the thresholds are checked on the final summary, the sources
// re-listed (they must not have changed while the build read them), and the
// manifest made, less what seal adds. The receipts decide everything, so
// the result does not depend on which processes built which shards.
func (b *builder) assemble(ctx context.Context, tmp string, st *staging, scan *scanResult, sp shardPlan, receipts map[int]*shardReceipt) (*warehouse.Manifest, *writeResult, error) {
	out, late, err := b.linkShards(tmp, st, sp, receipts)
	if err != nil {
		return nil, nil, err
	}
	if err := writeSamples(ctx, tmp, scan, sp, out, late); err != nil {
		return nil, nil, err
	}
	if err := writeShardSums(tmp, out.shardSums); err != nil {
		return nil, nil, err
	}
	if err := os.Remove(scan.spill); err != nil {
		return nil, nil, err
	}
	summary := scan.summary.Result()
	if failed, _ := b.thresholds.Check(summary.Total); len(failed) > 0 {
		return nil, nil, &validate.ThresholdError{Findings: failed}
	}
	if err := b.checkSourcesUnchanged(ctx, scan.fingerprint); err != nil {
		return nil, nil, err
	}
	m := b.manifest(scan, out, summary)
	if err := writeEpisodes(ctx, tmp, m, b.extraF32); err != nil { // extras_stats.go
		return nil, nil, err
	}
	return m, out, nil
}

// linkShards links every shard of sp with samples into tmp and adds up
// their receipts; late maps the seq of each sample that failed late to its
// error.
func (b *builder) linkShards(tmp string, st *staging, sp shardPlan, receipts map[int]*shardReceipt) (out *writeResult, late map[int64]string, err error) {
	out, late = &writeResult{spp: int(sp.spp)}, map[int64]string{}
	if err := os.MkdirAll(filepath.Join(tmp, shardDir), 0o755); err != nil {
		return nil, nil, err
	}
	l := shardLayout(b.cfg, b.extraF32)
	for k := range sp.shards() {
		r := receipts[k]
		if r == nil {
			return nil, nil, fmt.Errorf("pipeline: no record of %s", shardID(k))
		}
		for _, f := range r.Late {
			late[f.Seq] = f.Error
		}
		out.sums.merge(&r.Sums)
		out.jpegFallbacks += r.JPEGFallbacks
		out.reuse.add(r.Reuse)
		if r.Samples == 0 {
			continue // every planned sample failed late: no file
		}
		rel := shardDir + "/" + shardID(k) + ".twh"
		if err := linkOrCopy(st.shardPath(k), filepath.Join(tmp, filepath.FromSlash(rel))); err != nil {
			return nil, nil, err
		}
		out.shards = append(out.shards, warehouse.Shard{
			ID: shardID(k), RelativePath: rel, ShardVersion: uint32(l.Version()),
			FirstSample: out.samples, Samples: r.Samples,
			Width: l.Width, Height: l.Height, Channels: l.Channels, MaxBoxes: l.MaxBoxes,
			DType: l.DType.String(), Endianness: "Little", Bytes: r.Bytes, ChecksumSHA256: r.SHA256,
		})
		out.shardSums = append(out.shardSums, shardSumsEntry{ID: shardID(k), Sums: r.Sums})
		out.samples += r.Samples
		out.bytes += r.Bytes
	}
	return out, late, nil
}

// writeSamples writes samples.jsonl from the spill: every input sample in
// scan order, a kept one with its place in the shards of out unless it is
// in late (then it is a decode_error, recorded in the scan's summary).
func writeSamples(ctx context.Context, tmp string, scan *scanResult, sp shardPlan, out *writeResult, late map[int64]string) error {
	f, err := os.Create(filepath.Join(tmp, warehouse.SamplesName))
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(fsfault.File{File: f}, 1<<20)
	enc := json.NewEncoder(bw)
	var planned, index, inShard, lateSeen int64
	err = readSpill(scan.spill, func(p *plannedSample, planIdx int64, _ spillLine) error {
		lateErr, isLate := "", false
		if planIdx >= 0 {
			planned++
			if planIdx%sp.spp == 0 {
				inShard = 0
			}
			lateErr, isLate = late[p.Seq]
		}
		line := planLine(p, planIdx, scan.classes, lateErr)
		switch {
		case isLate:
			lateSeen++
			if err := scan.summary.RecordLate(int(p.SourceIndex), validate.ReasonDecodeError); err != nil {
				return err
			}
		case planIdx >= 0:
			// Built: its place in the shards, and its index among the
			// built samples (late failures have none).
			line.Shard = shardID(int(planIdx / sp.spp))
			line.ShardIndex = inShard
			line.Index = index
			inShard++
			index++
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	if planned != sp.planned || index != out.samples || lateSeen != int64(len(late)) {
		return fmt.Errorf("pipeline: the shard records do not match the plan: %d planned samples (want %d), %d written (records: %d), %d late (records: %d)",
			planned, sp.planned, index, out.samples, lateSeen, len(late))
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// linksRefused reports whether a link failed because the filesystem
// does not link (there, or across the two directories), not because of
// an I/O error, which copying would meet too.
func linksRefused(err error) bool {
	for _, e := range []error{syscall.EXDEV, syscall.EPERM, syscall.EACCES, syscall.EMLINK, syscall.EOPNOTSUPP, syscall.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// linkOrCopy puts the staged shard src at dst: a hard link (the staging
// directory is beside the version, on the same filesystem), or a copy
// where the filesystem refuses links.
func linkOrCopy(src, dst string) error {
	err := fsfault.LinkFile(src, dst)
	if err == nil || !linksRefused(err) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return copyFile(dst, in, false)
}

// copyFile creates dst with the bytes of src, fsynced with sync.
func copyFile(dst string, src io.Reader, sync bool) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fsfault.File{File: out}, src); err != nil {
		out.Close()
		return err
	}
	if sync {
		if err := fsfault.SyncFile(out); err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}
