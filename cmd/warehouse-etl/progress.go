package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"warehouse-etl/internal/progress"
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
	fmt.Fprintf(p.w, "\r[%s%s] scanned %d  written %d/%d (reused %d, decoded %d, fell back %d)  %.1f samples/s  %.1f MiB ",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		p.c.Scanned.Load(), written, planned, p.c.Reused.Load(), p.c.Decoded.Load(), p.c.ReuseFallbacks.Load(), rate, float64(p.c.BytesWritten.Load())/(1<<20))
}

func (p *progressBar) stop() {
	close(p.done)
	p.stopped.Wait()
}

func sortedReasons(m map[validate.Reason]int64) []validate.Reason {
	return slices.Sorted(maps.Keys(m))
}

// progressEvery is how often progress is logged when stderr is not a
// terminal (build's logProgress, and showBytes).
const progressEvery = 10 * time.Second

// showBytes shows the progress of a long read-everything run (verify
// --full, export zarr) that reports into c, as build shows its own: on a
// terminal (text logs, not --quiet) a bar redrawn ten times a second, the
// logs then keeping to warnings; otherwise a "progress" log line every
// progressEvery and one when the run ends. It returns the logger for the
// run and the stop to call when it ends.
func showBytes(s streams, lf logOptions, what string, c *progress.Bytes) (log *slog.Logger, stop func(), err error) {
	if s.stderrIsTTY && !lf.Quiet && lf.Format == "text" {
		lf.Quiet = true
		log, err := lf.logger(s.stderr)
		if err != nil {
			return nil, nil, err
		}
		start := time.Now()
		return log, tick(100*time.Millisecond, func(last bool) {
			drawBytes(s.stderr, what, c, time.Since(start))
			if last {
				fmt.Fprintln(s.stderr)
			}
		}), nil
	}
	log, err = lf.logger(s.stderr)
	if err != nil {
		return nil, nil, err
	}
	return log, tick(progressEvery, func(bool) {
		total, done := c.Load()
		log.Info("progress", "what", what, "bytes_done", done, "bytes_total", total)
	}), nil
}

// drawBytes redraws the one status line of showBytes.
func drawBytes(w io.Writer, what string, c *progress.Bytes, elapsed time.Duration) {
	total, done := c.Load()
	const width = 30
	filled := 0
	if total > 0 {
		filled = int(width * min(done, total) / total)
	}
	rate := 0.0
	if secs := elapsed.Seconds(); secs > 0 {
		rate = float64(done) / 1e6 / secs
	}
	fmt.Fprintf(w, "\r%s [%s%s] %.1f/%.1f MB  %.1f MB/s ", what,
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), float64(done)/1e6, float64(total)/1e6, rate)
}

// tick calls f every interval until the returned stop, and once more
// (last) when stopped.
func tick(every time.Duration, f func(last bool)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				f(true)
				return
			case <-t.C:
				f(false)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait() })
	}
}
