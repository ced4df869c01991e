package pipeline

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
	BytesCopied int64 `json:"bytes_copied"` // image bytes copied
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
}

// reuseReport is the report's reuse section.
func (b *builder) reuseReport(w *writeResult) ReuseReport {
	r := ReuseReport{Enabled: !b.opts.Reuse.Off, Sources: []string{}, reuseCounts: w.reuse}
	if s := b.reuse; s != nil {
		r.Sources = append(r.Sources, s.Sources...)
		r.MatchSeconds = s.Seconds
	}
	return r
}
