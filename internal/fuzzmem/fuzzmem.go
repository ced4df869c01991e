// Package fuzzmem bounds the memory one fuzz input makes a decoder
// allocate. Every decoder of this module checks sizes before allocating
// ("decoders check sizes before allocating", DESIGN.md); a fuzz target
// wraps its call in Check with the bound its decoder documents, so an input
// that makes the decoder allocate from a size it claims, rather than from
// bytes it has, fails the target like a panic would.
//
// The measure is the Go heap's cumulative allocation counter
// (runtime/metrics /gc/heap/allocs:bytes, the same as MemStats.TotalAlloc)
// read before and after the call; it counts every byte allocated during the
// call, freed or not, in any goroutine. Reading it does not stop the world,
// so a target can check every input. It is exact for allocations over 32
// KiB (the hostile ones) and may lag by at most a span per size class for
// small ones, which the bounds leave room for.
//
// The fuzzing engine runs a target's inputs one at a time in each worker
// process, so the delta is the input's own. When FUZZMEM_DIR is set
// (bench/fuzz.sh sets it), each worker process writes the most bytes one
// input allocated to $FUZZMEM_DIR/<Target>.<pid> whenever that maximum
// grows, and the campaign prints the worst over all workers.
//
// The package also holds the two seed helpers every target shares: AddFiles
// seeds a target with real files from testdata, ReadCorpusFile reads a
// checked-in seed back.
package fuzzmem

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// MiB is a mebibyte, for writing bounds.
const MiB = 1 << 20

const allocsMetric = "/gc/heap/allocs:bytes"

// Allocated returns the bytes the heap has allocated since the process
// started.
func Allocated() uint64 {
	s := []metrics.Sample{{Name: allocsMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Measure runs fn and returns the bytes it allocated.
func Measure(fn func()) uint64 {
	before := Allocated()
	fn()
	return Allocated() - before
}

// Check runs fn, one fuzz input's work, and fails t when fn allocated more
// than bound bytes. It records the worst input per target (see the package
// doc) before failing, so the campaign shows the offending size.
func Check(t testing.TB, bound uint64, fn func()) {
	t.Helper()
	n := Measure(fn)
	record(t.Name(), n)
	if n > bound {
		t.Fatalf("fuzzmem: one input allocated %d bytes (%.1f MiB), more than the target's bound of %d (%.1f MiB)",
			n, float64(n)/MiB, bound, float64(bound)/MiB)
	}
}

var worst struct {
	sync.Mutex
	bytes map[string]uint64
}

// record keeps the per-process maximum of target and writes it to
// FUZZMEM_DIR when it grows.
func record(name string, n uint64) {
	target, _, _ := strings.Cut(name, "/") // "FuzzX/seed#0" -> "FuzzX"
	worst.Lock()
	defer worst.Unlock()
	if worst.bytes == nil {
		worst.bytes = map[string]uint64{}
	}
	if old, ok := worst.bytes[target]; ok && n <= old {
		return
	}
	worst.bytes[target] = n
	dir := os.Getenv("FUZZMEM_DIR")
	if dir == "" {
		return
	}
	p := filepath.Join(dir, target+"."+strconv.Itoa(os.Getpid()))
	// Best effort: a campaign without the file prints "-".
	_ = os.WriteFile(p, []byte(fmt.Sprintln(n)), 0o644)
}

// Call is Check for a decoder call with two results, so that a target
// measures the decoder alone and not its own oracle:
//
//	m, err := fuzzmem.Call(t, bound, func() (*Meta, error) { return ParseMeta(data) })
func Call[A, B any](t testing.TB, bound uint64, fn func() (A, B)) (a A, b B) {
	t.Helper()
	Check(t, bound, func() { a, b = fn() })
	return a, b
}
