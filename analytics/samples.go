package analytics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// maxSampleLineBytes bounds one samples.jsonl line before it is decoded. A
// line holds a few paths, reason codes and at most max_boxes class indices:
// a few hundred bytes in practice.
const maxSampleLineBytes = 1 << 20

// sampleLine is one line of samples.jsonl as docs/format/manifest.md
// defines it (written by pipeline.SampleRecord; this package cannot import
// the pipeline, which imports it).
type sampleLine struct {
	Seq         int64      `json:"seq"`
	Source      string     `json:"source"`
	SourceIndex int64      `json:"source_index"`
	Frame       uint64     `json:"frame"`
	UnixTimeNs  int64      `json:"unix_time_ns"`
	SimTime     float64    `json:"sim_time"`
	LabelPath   string     `json:"label_path"`
	ImagePath   string     `json:"image_path"`
	Width       int64      `json:"width"`
	Height      int64      `json:"height"`
	Kept        bool       `json:"kept"`
	Reasons     []string   `json:"reasons"`
	Error       string     `json:"error"`
	Index       int64      `json:"index"`
	Shard       string     `json:"shard"`
	ShardIndex  int64      `json:"shard_index"`
	BoxCount    int64      `json:"box_count"`
	ClassIndex  []int64    `json:"class_index"`
	Letterbox   *letterbox `json:"letterbox"`
}

type letterbox struct {
	ScaleX        float64 `json:"scale_x"`
	ScaleY        float64 `json:"scale_y"`
	ResizedWidth  int64   `json:"resized_width"`
	ResizedHeight int64   `json:"resized_height"`
	PadX          int64   `json:"pad_x"`
	PadY          int64   `json:"pad_y"`
}

// decodeSampleLine decodes one line and checks what does not depend on
// its neighbours: field ranges and the kept/skipped shape.
func decodeSampleLine(raw []byte) (*sampleLine, error) {
	if len(raw) > maxSampleLineBytes {
		return nil, fmt.Errorf("line is %d bytes, more than %d", len(raw), maxSampleLineBytes)
	}
	// index and shard_index are -1 when absent, as for a skipped sample.
	s := &sampleLine{Index: -1, ShardIndex: -1}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	switch {
	case s.Seq < 0:
		return nil, fmt.Errorf("seq %d", s.Seq)
	case s.Frame > math.MaxInt64:
		return nil, fmt.Errorf("frame %d does not fit int64", s.Frame)
	case s.SourceIndex < 0:
		return nil, fmt.Errorf("source_index %d", s.SourceIndex)
	case s.Width < 0 || s.Height < 0:
		return nil, fmt.Errorf("size %dx%d", s.Width, s.Height)
	case s.BoxCount != int64(len(s.ClassIndex)):
		return nil, fmt.Errorf("box_count %d but %d class indices", s.BoxCount, len(s.ClassIndex))
	}
	for _, c := range s.ClassIndex {
		if c < 0 {
			return nil, fmt.Errorf("class_index %d", c)
		}
	}
	for _, r := range s.Reasons {
		if r == "" {
			return nil, errors.New("an empty reason code")
		}
	}
	if s.Kept {
		if s.Index < 0 || s.Shard == "" || s.ShardIndex < 0 || s.Letterbox == nil {
			return nil, fmt.Errorf("kept sample without index, shard, shard_index or letterbox")
		}
	} else if s.Index != -1 || s.Shard != "" || s.ShardIndex != -1 || s.BoxCount != 0 || s.Letterbox != nil {
		return nil, fmt.Errorf("skipped sample with a shard position, boxes or letterbox")
	}
	if s.Reasons == nil {
		s.Reasons = []string{}
	}
	return s, nil
}

// sampleReader reads samples.jsonl line by line and checks the sequence:
// seq counts lines from 0 and kept samples' index counts kept lines.
type sampleReader struct {
	name string // for errors
	r    *bufio.Reader
	line int64
	kept int64
}

func newSampleReader(name string, r io.Reader) *sampleReader {
	return &sampleReader{name: name, r: bufio.NewReaderSize(r, maxSampleLineBytes)}
}

// next returns the next sample, or io.EOF after the last one.
func (sr *sampleReader) next() (*sampleLine, error) {
	raw, err := sr.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, corruptf("%s line %d: longer than %d bytes", sr.name, sr.line+1, maxSampleLineBytes)
	case err == io.EOF && len(raw) == 0:
		return nil, io.EOF
	case err == io.EOF:
		return nil, corruptf("%s line %d: no final newline (truncated file?)", sr.name, sr.line+1)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", sr.name, err)
	}
	s, err := decodeSampleLine(raw)
	if err != nil {
		return nil, corruptf("%s line %d: %v", sr.name, sr.line+1, err)
	}
	if s.Seq != sr.line {
		return nil, corruptf("%s line %d: seq %d, want %d", sr.name, sr.line+1, s.Seq, sr.line)
	}
	if s.Kept {
		if s.Index != sr.kept {
			return nil, corruptf("%s line %d: kept sample has index %d, want %d", sr.name, sr.line+1, s.Index, sr.kept)
		}
		sr.kept++
	}
	sr.line++
	return s, nil
}
