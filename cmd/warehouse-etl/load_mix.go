package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"warehouse-etl/warehouse"
)

// mixFlag is load's repeatable --mix PATH=WEIGHT.
type mixFlag []mixPart

type mixPart struct {
	Path   string  `json:"path"`
	Weight float64 `json:"weight"`
}

func (m *mixFlag) String() string {
	var parts []string
	for _, p := range *m {
		parts = append(parts, fmt.Sprintf("%s=%g", p.Path, p.Weight))
	}
	return strings.Join(parts, ",")
}

// Set parses PATH=WEIGHT, split at the last '=' (a path may hold one).
func (m *mixFlag) Set(s string) error {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return fmt.Errorf("%q: want PATH=WEIGHT", s)
	}
	w, err := strconv.ParseFloat(s[i+1:], 64)
	if err != nil {
		return fmt.Errorf("%q: weight: %v", s, err)
	}
	*m = append(*m, mixPart{Path: s[:i], Weight: w})
	return nil
}

// openMixture opens every --mix warehouse and mixes them; close closes what
// was opened, also after an error.
func openMixture(parts mixFlag, epochSamples int, open func(dir string) (*warehouse.Reader, error)) (m *warehouse.Mixture, readers []*warehouse.Reader, err error) {
	defer func() {
		if err != nil {
			for _, r := range readers {
				r.Close()
			}
			readers = nil
		}
	}()
	var srcs []warehouse.BatchSource
	var weights []float64
	for _, p := range parts {
		dir, err := warehouse.ResolveDir(p.Path)
		if err != nil {
			return nil, readers, fmt.Errorf("--mix %s: %w", p.Path, err)
		}
		r, err := open(dir)
		if err != nil {
			return nil, readers, err
		}
		readers = append(readers, r)
		srcs, weights = append(srcs, r), append(weights, p.Weight)
	}
	m, err = warehouse.NewMixture(srcs, weights, epochSamples)
	if err != nil {
		return nil, readers, usageError{err}
	}
	return m, readers, nil
}

// indicesWriter writes load --indices FILE: one line per batch handed out,
// "epoch batch i0 i1 ... r" with r the batch's repeats (for a mixture the
// indices are mixture indices: warehouse m's sample i is offset_m + i).
type indicesWriter struct {
	f *os.File
	w *bufio.Writer
}

func createIndices(path string) (*indicesWriter, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &indicesWriter{f: f, w: bufio.NewWriter(f)}, nil
}

func (x *indicesWriter) batch(b *warehouse.Batch) {
	if x == nil {
		return
	}
	fmt.Fprintf(x.w, "%d %d", b.Epoch, b.Number)
	for _, i := range b.Indices {
		fmt.Fprintf(x.w, " %d", i)
	}
	fmt.Fprintf(x.w, " r%d\n", b.Repeats)
}

func (x *indicesWriter) close() error {
	if x == nil {
		return nil
	}
	return errors.Join(x.w.Flush(), x.f.Close())
}
