package analytics

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"warehouse-etl/analytics/records"
)

// sampleReader reads samples.jsonl line by line and checks the sequence:
// seq counts lines from 0 and kept samples' index counts kept lines.
type sampleReader struct {
	name string // for errors
	r    *bufio.Reader
	line int64
	kept int64
}

func newSampleReader(name string, r io.Reader) *sampleReader {
	return &sampleReader{name: name, r: bufio.NewReaderSize(r, records.MaxSampleLineBytes)}
}

// next returns the next sample, or io.EOF after the last one.
func (sr *sampleReader) next() (*records.SampleLine, error) {
	raw, err := sr.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, corruptf("%s line %d: longer than %d bytes", sr.name, sr.line+1, records.MaxSampleLineBytes)
	case err == io.EOF && len(raw) == 0:
		return nil, io.EOF
	case err == io.EOF:
		return nil, corruptf("%s line %d: no final newline (truncated file?)", sr.name, sr.line+1)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", sr.name, err)
	}
	s, err := records.DecodeSampleLine(raw)
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
