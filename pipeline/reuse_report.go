package pipeline

import (
	"context"
	"os"
	"strconv"
)

// reuseOutcome is what became of one planned sample's image.
type reuseOutcome uint8

const (
	outcomeDecoded  reuseOutcome = iota // no match: decoded
	outcomeReused                       // copied from a published version
	outcomeFellBack                     // matched, but the old sample failed its check: decoded
)

// reuseCounts are a shard's (a receipt's) or a version's reuse counts.
type reuseCounts struct {
	Reused      int64 `json:"reused"`       // images copied from a published version
	Decoded     int64 `json:"decoded"`      // images decoded (fell_back included)
	FellBack    int64 `json:"fell_back"`    // matched samples whose old copy failed its CRC-32C or could not be read
	BytesCopied int64 `json:"bytes_copied"` // image bytes copied, or taken with a whole shard
	// ShardsLinked counts the shards taken whole from a published version
	// (reuse_link.go): hard-linked (copied where the filesystem refuses
	// links), their samples counted in Reused and their images in
	// BytesCopied.
	ShardsLinked int64 `json:"shards_linked"`
}

// count adds job j's outcome.
func (c *reuseCounts) count(j *job) {
	switch j.reuse {
	case outcomeReused:
		c.Reused++
		c.BytesCopied += int64(len(j.image))
		return
	case outcomeFellBack:
		c.FellBack++
	}
	c.Decoded++
}

func (c *reuseCounts) add(o reuseCounts) {
	c.Reused += o.Reused
	c.Decoded += o.Decoded
	c.FellBack += o.FellBack
	c.BytesCopied += o.BytesCopied
	c.ShardsLinked += o.ShardsLinked
}

// ReuseReport is build_report.json's "reuse": what the version's shards
// took from published versions. The counts are summed over the shard
// receipts, so a commit reports what its partitions did; sources and
// match_seconds are this process's (empty for a commit).
type ReuseReport struct {
	Enabled bool     `json:"enabled"`
	Sources []string `json:"sources"` // the version directories samples were copied from
	reuseCounts
	MatchSeconds float64 `json:"match_seconds"` // reading the old samples.jsonl files against the plan
	// InputsHashed and InputsFromCache are the image files this process's
	// scan hashed for their identity, and those whose identity it took
	// from the input cache (reuse_inputs.go); 0 for a process that did
	// not scan, and for sources whose images are not files.
	InputsHashed    int64 `json:"inputs_hashed"`
	InputsFromCache int64 `json:"inputs_from_cache"`
}

// reuseReport is the report's reuse section.
func (b *builder) reuseReport(w *writeResult) ReuseReport {
	r := ReuseReport{Enabled: !b.opts.Reuse.Off, Sources: []string{}, reuseCounts: w.reuse}
	if s := b.reuse; s != nil {
		r.Sources = append(r.Sources, s.Sources...)
		r.MatchSeconds = s.Seconds
	}
	if c := b.inputs; c != nil {
		r.InputsHashed, r.InputsFromCache = c.hashed.Load(), c.hits.Load()
	}
	return r
}

// estimateStale fills in se how many of the new build's planned samples
// would be decoded: it scans the changed sources into a temporary
// directory of the version (the scan and the identities, as the rebuild
// would) and matches them against the published versions. It removes tmp
// in every case, estimate or not. Failures leave se as it was: the estimate
// is a courtesy.
func (b *builder) estimateStale(ctx context.Context, tmp string, se *StaleError) {
	defer os.RemoveAll(tmp)
	if b.opts.Reuse.Off || b.opts.NoStaleEstimate {
		return
	}
	scan, sp, err := b.prepare(ctx, tmp, newReport(b, b.now()))
	if err != nil || scan == nil {
		b.log.Debug("no reuse estimate", "err", err)
		return
	}
	todo := map[int]bool{}
	for k := range sp.shards() {
		todo[k] = true
	}
	x, err := b.openReuse(ctx, scan, sp, todo)
	if err != nil {
		return
	}
	x.close()
	se.Planned = scan.planned
	se.Changed = scan.planned
	if b.reuse != nil {
		se.Changed -= b.reuse.Matched
	}
	se.Estimated = true
}

// thousands writes n with comma separators: 10,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
