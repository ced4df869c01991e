package viewer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"

	"warehouse-etl/analytics/records"
	"warehouse-etl/warehouse"
)

// sampleIndex is what the grid filters on, one entry per input sample (by
// seq), built by one pass over samples.jsonl: the line's offset, its run,
// whether it was kept, and posting lists of the samples carrying each
// reason and each class. The records themselves stay in the file.
type sampleIndex struct {
	offsets  []int64 // line seq starts at offsets[seq]; one more for the end
	source   []int32 // source_index
	index    []int32 // global sample index, -1 when not kept
	reasons  map[string][]int32
	classes  map[int64][]int32
	bySource map[int32][]int32 // seqs of each run, in order (episode neighbours)
	kept     int
}

// buildIndex reads samples.jsonl once, checking what analytics checks:
// seq counts lines from 0, kept samples' index counts kept lines.
func buildIndex(f io.ReaderAt, m *warehouse.Manifest) (*sampleIndex, error) {
	n := m.InputSamples
	ix := &sampleIndex{
		offsets: make([]int64, 0, n+1), source: make([]int32, 0, n), index: make([]int32, 0, n),
		reasons: map[string][]int32{}, classes: map[int64][]int32{}, bySource: map[int32][]int32{},
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), records.MaxSampleLineBytes)
	var off int64
	for seq := int32(0); ; seq++ {
		raw, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, fmt.Errorf("%s line %d: longer than %d bytes", warehouse.SamplesName, seq+1, records.MaxSampleLineBytes)
		case err == io.EOF && len(raw) == 0:
			ix.offsets = append(ix.offsets, off)
			if int64(len(ix.source)) != m.InputSamples || int64(ix.kept) != m.Samples {
				return nil, fmt.Errorf("%s: %d lines, %d kept; the manifest says %d and %d", warehouse.SamplesName, len(ix.source), ix.kept, m.InputSamples, m.Samples)
			}
			return ix, nil
		case err == io.EOF:
			return nil, fmt.Errorf("%s line %d: no final newline (truncated file?)", warehouse.SamplesName, seq+1)
		case err != nil:
			return nil, err
		}
		s, err := records.DecodeSampleLine(raw)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", warehouse.SamplesName, seq+1, err)
		}
		if s.Seq != int64(seq) || (s.Kept && s.Index != int64(ix.kept)) || s.SourceIndex > 1<<31-1 {
			return nil, fmt.Errorf("%s line %d: seq %d, index %d out of order", warehouse.SamplesName, seq+1, s.Seq, s.Index)
		}
		ix.offsets = append(ix.offsets, off)
		off += int64(len(raw))
		src := int32(s.SourceIndex)
		ix.source = append(ix.source, src)
		ix.bySource[src] = append(ix.bySource[src], seq)
		ix.index = append(ix.index, int32(s.Index))
		if s.Kept {
			ix.kept++
		}
		for _, r := range s.Reasons {
			if l := ix.reasons[r]; len(l) == 0 || l[len(l)-1] != seq {
				ix.reasons[r] = append(l, seq)
			}
		}
		for _, c := range s.ClassIndex {
			if l := ix.classes[c]; len(l) == 0 || l[len(l)-1] != seq {
				ix.classes[c] = append(l, seq)
			}
		}
	}
}

// len is the number of input samples.
func (ix *sampleIndex) len() int { return len(ix.source) }

// record reads sample seq's line back.
func (ix *sampleIndex) record(f io.ReaderAt, seq int) (*records.SampleLine, error) {
	if seq < 0 || seq >= ix.len() {
		return nil, fmt.Errorf("no sample %d", seq)
	}
	buf := make([]byte, ix.offsets[seq+1]-ix.offsets[seq])
	if _, err := f.ReadAt(buf, ix.offsets[seq]); err != nil {
		return nil, fmt.Errorf("%s line %d: %w", warehouse.SamplesName, seq+1, err)
	}
	return records.DecodeSampleLine(buf)
}

// Filter selects samples for the grid; a zero field selects everything.
type Filter struct {
	Run    int    // source index + 1; 0: any run
	Reason string // a reason code; "": any
	Class  int    // class index + 1; 0: any class
	Status string // "kept", "rejected" or "": both
}

// match lists the seqs the filter selects, in scan order.
func (ix *sampleIndex) match(f Filter) []int32 {
	var candidates []int32
	all := true
	pick := func(l []int32) {
		if all || len(l) < len(candidates) {
			candidates, all = l, false
		}
	}
	if f.Reason != "" {
		pick(ix.reasons[f.Reason])
	}
	if f.Class > 0 {
		pick(ix.classes[int64(f.Class-1)])
	}
	if f.Run > 0 {
		pick(ix.bySource[int32(f.Run-1)])
	}
	test := func(seq int32) bool {
		switch {
		case f.Run > 0 && ix.source[seq] != int32(f.Run-1):
		case f.Status == "kept" && ix.index[seq] < 0:
		case f.Status == "rejected" && ix.index[seq] >= 0:
		case f.Reason != "" && !has(ix.reasons[f.Reason], seq):
		case f.Class > 0 && !has(ix.classes[int64(f.Class-1)], seq):
		default:
			return true
		}
		return false
	}
	var out []int32
	if all {
		for seq := range int32(ix.len()) {
			if test(seq) {
				out = append(out, seq)
			}
		}
		return out
	}
	for _, seq := range candidates {
		if test(seq) {
			out = append(out, seq)
		}
	}
	return out
}

func has(sorted []int32, v int32) bool {
	_, ok := slices.BinarySearch(sorted, v)
	return ok
}
