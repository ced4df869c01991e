package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
)

// progressBar redraws one status line on a terminal from the pipeline's
// counters, ten times a second.
type progressBar struct {
	w       io.Writer
	c       *pipeline.Counters
	start   time.Time
	done    chan struct{}
	stopped sync.WaitGroup
}

func startProgress(w io.Writer, c *pipeline.Counters) *progressBar {
	p := &progressBar{w: w, c: c, start: time.Now(), done: make(chan struct{})}
	p.stopped.Add(1)
	go func() {
		defer p.stopped.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				p.draw()
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progressBar) draw() {
	planned, written := p.c.Planned.Load(), p.c.Written.Load()
	const width = 30
	filled := 0
	if planned > 0 {
		filled = int(width * min(written, planned) / planned)
	}
	secs := time.Since(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(written) / secs
	}
	fmt.Fprintf(p.w, "\r[%s%s] scanned %d  written %d/%d  %.1f samples/s  %.1f MiB ",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.c.Scanned.Load(), written, planned, rate, float64(p.c.BytesWritten.Load())/(1<<20))
}

func (p *progressBar) stop() {
	close(p.done)
	p.stopped.Wait()
}

func sortedReasons(m map[validate.Reason]int64) []validate.Reason {
	return slices.Sorted(maps.Keys(m))
}
