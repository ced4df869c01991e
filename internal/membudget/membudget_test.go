package membudget

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWorkersWaitInsteadOfMultiplying runs 8 goroutines that each reserve
// 40 bytes of a 100-byte budget many times and checks that no more than
// 100 bytes are ever held at once (counted by the holders themselves).
func TestWorkersWaitInsteadOfMultiplying(t *testing.T) {
	b := New(100)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if err := b.Acquire(context.Background(), 40); err != nil {
					t.Error(err)
					return
				}
				n := held.Add(40)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				held.Add(-40)
				b.Release(40)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 100 {
		t.Errorf("held %d bytes at once under a budget of 100", p)
	}
	if s := b.Stats(); s.Used != 0 || s.Peak > 100 {
		t.Errorf("stats %+v after every release", s)
	}
}

// TestOverBudgetFailsAtOnce checks that a reservation larger than the
// whole budget fails with ErrOverBudget instead of waiting forever.
func TestOverBudgetFailsAtOnce(t *testing.T) {
	b := New(100)
	err := b.Acquire(context.Background(), 101)
	if !errors.Is(err, ErrOverBudget) {
		t.Fatalf("Acquire(101) of 100 = %v, want ErrOverBudget", err)
	}
	if want := "larger than the whole memory budget: needs 101 B, the budget is 100 B"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestAcquireCancelled checks that a waiting reservation gives up when its
// context ends and leaves the budget as it was.
func TestAcquireCancelled(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Acquire(ctx, 50) }()
	for !b.Waiting() {
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire = %v, want context.Canceled", err)
	}
	b.Release(80)
	if s := b.Stats(); s.Used != 0 || b.Waiting() {
		t.Errorf("stats %+v, waiting %v after cancel and release", s, b.Waiting())
	}
}

// TestPressureReclaims checks that a reservation that does not fit asks
// the registered reclaimers first, and is granted by what they release.
func TestPressureReclaims(t *testing.T) {
	b := New(100)
	cached := int64(90) // a cache entry nobody uses
	if err := b.Acquire(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	calls := 0
	b.OnPressure(func() {
		calls++
		if cached > 0 {
			b.Release(cached)
			cached = 0
		}
	})
	if err := b.Acquire(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || cached != 0 {
		t.Errorf("reclaimer called %d times, cache holds %d", calls, cached)
	}
}

// TestNilBudgetIsUnlimited checks the nil Budget libraries get by default.
func TestNilBudgetIsUnlimited(t *testing.T) {
	var b *Budget
	if err := b.Acquire(context.Background(), 1<<62); err != nil {
		t.Fatal(err)
	}
	b.Release(1 << 62)
	if b.Waiting() || b.Limit() != 0 {
		t.Error("nil budget waits or has a limit")
	}
}

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"2GiB", 2 << 30, false}, {"512MiB", 512 << 20, false}, {"1.5GiB", 3 << 29, false},
		{"2gb", 2e9, false}, {"1000", 1000, false}, {"64 KiB", 64 << 10, false}, {"7B", 7, false},
		{"", 0, true}, {"GiB", 0, true}, {"-1GiB", 0, true}, {"0", 0, true}, {"2XB", 0, true},
		{"1.5", 0, true}, {"9999999TiB", 0, true},
	} {
		got, err := ParseBytes(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

// TestSystemMemory reads made-up cgroup and meminfo files: the smallest
// limit wins, "max" and v1's near-2^63 mean unlimited.
func TestSystemMemory(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2, v1, mi := cgroupV2Max, cgroupV1Max, meminfo
	t.Cleanup(func() { cgroupV2Max, cgroupV1Max, meminfo = v2, v1, mi })
	mem := write("meminfo", "MemTotal:       24576000 kB\nMemFree: 1 kB\n")
	for _, c := range []struct {
		name   string
		v2, v1 string // file contents; "" absent
		want   int64
	}{
		{"v2 limit", "2147483648\n", "", 2 << 30},
		{"v2 max", "max\n", "", 24576000 << 10},
		{"v1 limit", "", "1073741824\n", 1 << 30},
		{"v1 unlimited", "", "9223372036854771712\n", 24576000 << 10},
		{"cgroup above physical", "99999999999999\n", "", 24576000 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			cgroupV2Max, cgroupV1Max, meminfo = filepath.Join(dir, "absent2"), filepath.Join(dir, "absent1"), mem
			if c.v2 != "" {
				cgroupV2Max = write("v2", c.v2)
			}
			if c.v1 != "" {
				cgroupV1Max = write("v1", c.v1)
			}
			if got, from := SystemMemory(); got != c.want {
				t.Errorf("SystemMemory = %d (%s), want %d", got, from, c.want)
			}
		})
	}
}

// TestGarbageCollectedUnderPressure checks that bytes given back as
// garbage stay counted until a reservation needs them, which collects
// them and then fits.
func TestGarbageCollectedUnderPressure(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 70); err != nil {
		t.Fatal(err)
	}
	b.ReleaseGarbage(70)
	if s := b.Stats(); s.Used != 70 || s.Garbage != 70 {
		t.Fatalf("after ReleaseGarbage: %+v", s)
	}
	if err := b.Acquire(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Used != 60 || s.Garbage != 0 {
		t.Errorf("after a reservation under pressure: %+v", s)
	}
}

// TestGarbageWakesWaiter checks that garbage given back while a
// reservation waits is collected and grants it: the waiter asked before
// the bytes were dropped, so nobody else would.
func TestGarbageWakesWaiter(t *testing.T) {
	b := New(100)
	if err := b.Acquire(context.Background(), 70); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- b.Acquire(context.Background(), 70) }()
	for !b.Waiting() {
	}
	b.ReleaseGarbage(70)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Used != 70 || s.Garbage != 0 {
		t.Errorf("stats %+v", s)
	}
}
