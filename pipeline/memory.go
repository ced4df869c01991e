package pipeline

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"

	"warehouse-etl/internal/membudget"
	"warehouse-etl/transforms"
)

// The memory budget of the transform stage (Options.MemoryLimit). What a
// build holds besides its decodes is measured when the stage starts (the
// Go runtime, the plan, the source's state: a parsed COCO file) and
// reserved in advance for what the stage itself keeps: every worker's
// scratch up to keepBytes, and the reorder window's output buffers. The
// rest is the pool every decode reserves its bytes from before it
// allocates (transforms.Transformer.SetMemory) and the sources' decoded
// blocks come out of (the WShard camera blocks): workers whose images do
// not fit together wait for each other.

// Bounds of the scratch a worker keeps between images.
const (
	minKeepBytes = 4 << 20
	maxKeepBytes = 64 << 20
	// slackBytes covers the garbage collector's own structures, heap
	// fragmentation, the encoded bytes being read and the writer's
	// buffers.
	slackBytes = 32 << 20
	// minPoolBytes is the smallest decode pool a build starts with.
	minPoolBytes = 32 << 20
)

// budgeted is a source that takes its decoded blocks out of the build's
// memory budget (wshard.Source).
type budgeted interface {
	SetMemoryBudget(*membudget.Budget)
}

// stageMemory is the transform stage's share of the memory limit.
type stageMemory struct {
	budget *membudget.Budget // nil: no limit
	keep   int64             // scratch a worker keeps between images
}

// planMemory splits the memory limit for a transform stage of `workers`
// workers and `window` output buffers of outBytes each. It fails, naming
// the numbers, when the limit leaves less than minPoolBytes for decodes.
func (b *builder) planMemory(window, outBytes int) (stageMemory, error) {
	limit := b.opts.MemoryLimit
	if limit <= 0 {
		return stageMemory{}, nil
	}
	runtime.GC()
	held := runtimeHeldBytes()
	w := int64(b.workers)
	keep := min(max((limit-held)/(8*w), minKeepBytes), maxKeepBytes)
	fixed := held + w*keep + int64(window)*int64(outBytes) + slackBytes
	pool := limit - fixed
	if pool < minPoolBytes {
		return stageMemory{}, &ConfigError{fmt.Errorf("memory limit %s is too small for %d workers: the build holds %s before it decodes (the runtime and the plan, %s kept per worker, the reorder window) and needs at least %s more for decodes; raise --memory-limit to %s or use fewer workers",
			membudget.FormatBytes(limit), b.workers, membudget.FormatBytes(fixed), membudget.FormatBytes(keep), membudget.FormatBytes(minPoolBytes), membudget.FormatBytes(fixed+minPoolBytes))}
	}
	m := stageMemory{budget: membudget.New(pool), keep: keep}
	b.log.Info("memory budget", "limit_bytes", limit, "held_bytes", held, "decode_pool_bytes", pool, "keep_per_worker_bytes", keep)
	return m, nil
}

// runtimeHeldBytes is what the process holds now: its resident set where
// the system says (Linux /proc/self/statm: the binary's pages count
// too), at least the memory the Go runtime holds from the operating
// system (everything it mapped less what it released).
func runtimeHeldBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	var held int64
	if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 {
		held = int64(s[0].Value.Uint64() - s[1].Value.Uint64())
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				held = max(held, pages*int64(os.Getpagesize()))
			}
		}
	}
	return held
}

// attach gives a worker's Transformer the stage's budget: it reserves
// each decode's bytes, waiting under ctx.
func (m stageMemory) attach(ctx context.Context, tr *transforms.Transformer) {
	if m.budget == nil {
		return
	}
	release := func(n int64, garbage bool) {
		if garbage {
			m.budget.ReleaseGarbage(n)
		} else {
			m.budget.Release(n)
		}
	}
	tr.SetMemory(func(n int64) error { return m.budget.Acquire(ctx, n) }, release, m.keep)
}
