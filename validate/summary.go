package validate

import (
	"fmt"
	"maps"
	"sort"
)

// Counts are the sample counts of one run or of a whole build. The package
// documentation defines every field.
type Counts struct {
	Total        int64            `json:"total"`
	NonEmpty     int64            `json:"non_empty"`
	Empty        int64            `json:"empty"`
	MissingImage int64            `json:"missing_image"`
	MissingFile  int64            `json:"missing_file"`
	Invalid      int64            `json:"invalid"`
	Kept         int64            `json:"kept"`
	Skipped      int64            `json:"skipped"`
	ByReason     map[Reason]int64 `json:"by_reason,omitempty"`
}

// Add counts one sample: nonEmpty says whether it has at least one valid
// box, reasons are everything validation found, kept whether it goes into
// the warehouse (normally !Skip(reasons, skipEmpty)).
func (c *Counts) Add(nonEmpty bool, reasons []Reason, kept bool) {
	c.Total++
	if nonEmpty {
		c.NonEmpty++
	} else {
		c.Empty++
	}
	if kept {
		c.Kept++
	} else {
		c.Skipped++
	}
	reasons = Normalize(reasons)
	var invalid, missingImage, missingFile bool
	for _, r := range reasons {
		switch {
		case r == ReasonMissingFile:
			missingFile = true
		case r.Class() == ClassMissing: // missing_image, camera_missing
			missingImage = true
		case r.Class() == ClassInvalid:
			invalid = true
		}
		c.addReason(r)
	}
	if invalid {
		c.Invalid++
	}
	switch {
	case missingImage:
		c.MissingImage++
	case missingFile:
		c.MissingFile++
	}
}

func (c *Counts) addReason(r Reason) {
	if c.ByReason == nil {
		c.ByReason = map[Reason]int64{}
	}
	c.ByReason[r]++
}

// Missing is the number of samples without an image: MissingImage +
// MissingFile, each sample once.
func (c Counts) Missing() int64 { return c.MissingImage + c.MissingFile }

// recordLate applies a reason found after the sample was counted as kept
// (see Summary.RecordLate).
func (c *Counts) recordLate(r Reason) error {
	class := r.Class()
	switch class {
	case ClassWarning:
		c.addReason(r)
		return nil
	case ClassEmpty:
		return fmt.Errorf("validate: reason %s is decided at scan time, not late", r)
	}
	if c.Kept <= 0 {
		return fmt.Errorf("validate: late reason %s but no kept sample to move", r)
	}
	c.Kept--
	c.Skipped++
	switch {
	case r == ReasonMissingFile:
		c.MissingFile++
	case class == ClassMissing: // missing_image, camera_missing
		c.MissingImage++
	default:
		c.Invalid++
	}
	c.addReason(r)
	return nil
}

// RunSummary is the counts of one source (capture run, episode) in scan
// order.
type RunSummary struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Counts
}

// Summary is the per-run and total counts of a build.
type Summary struct {
	Runs  []RunSummary `json:"runs"`
	Total Counts       `json:"total"`
}

// RecordLate records reason r for a sample of source sourceIndex that was
// already counted as kept, found after the scan (a decode error at
// transform time). A reason of class Invalid or Missing moves the sample
// from Kept to Skipped and counts it under Invalid or MissingImage/
// MissingFile and ByReason, in its run and in the total; a Warning reason
// (boxes_truncated, degenerate_box_dropped) only counts
// under ByReason. ByReason counts samples, so call it once per reason per
// sample, and at most once per sample with a skipping reason: a kept
// sample had no skipping reason, so the first one moves it. Empty is
// decided at scan time and is an error here, as is an unknown source index.
func (s *Summary) RecordLate(sourceIndex int, r Reason) error {
	i := sort.Search(len(s.Runs), func(i int) bool { return s.Runs[i].Index >= sourceIndex })
	if i == len(s.Runs) || s.Runs[i].Index != sourceIndex {
		return fmt.Errorf("validate: late reason %s for unknown source index %d", r, sourceIndex)
	}
	if err := s.Runs[i].recordLate(r); err != nil {
		return fmt.Errorf("run %s: %w", s.Runs[i].Name, err)
	}
	return s.Total.recordLate(r)
}

// SummaryBuilder accumulates a Summary from samples in scan order; its
// memory grows with the number of runs, not of samples. The zero value is
// ready to use.
type SummaryBuilder struct {
	s Summary
}

// Add counts one sample of source sourceIndex named name (see Counts.Add).
// Samples arrive in scan order: sourceIndex never decreases, and a new
// index starts a new run. A smaller index, or another name for the current
// index, is an error.
func (b *SummaryBuilder) Add(sourceIndex int, name string, nonEmpty bool, reasons []Reason, kept bool) error {
	n := len(b.s.Runs)
	switch {
	case n > 0 && b.s.Runs[n-1].Index == sourceIndex:
		if b.s.Runs[n-1].Name != name {
			return fmt.Errorf("validate: source index %d is run %s, not %s", sourceIndex, b.s.Runs[n-1].Name, name)
		}
	case n > 0 && sourceIndex < b.s.Runs[n-1].Index:
		return fmt.Errorf("validate: sample of source %d (%s) after source %d: not in scan order", sourceIndex, name, b.s.Runs[n-1].Index)
	default:
		b.s.Runs = append(b.s.Runs, RunSummary{Name: name, Index: sourceIndex})
		n++
	}
	b.s.Runs[n-1].Add(nonEmpty, reasons, kept)
	b.s.Total.Add(nonEmpty, reasons, kept)
	return nil
}

// RecordLate is Summary.RecordLate on the summary being built, for late
// reasons that arrive while the scan is still running.
func (b *SummaryBuilder) RecordLate(sourceIndex int, r Reason) error {
	return b.s.RecordLate(sourceIndex, r)
}

// Result returns the summary so far. Runs are in scan order. The result
// shares nothing with the builder.
func (b *SummaryBuilder) Result() Summary {
	out := Summary{Runs: make([]RunSummary, len(b.s.Runs)), Total: b.s.Total.clone()}
	for i, r := range b.s.Runs {
		out.Runs[i] = RunSummary{Name: r.Name, Index: r.Index, Counts: r.clone()}
	}
	return out
}

func (c Counts) clone() Counts {
	c.ByReason = maps.Clone(c.ByReason)
	return c
}
