package fuzzmem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var sink []byte

// Measure sees a large allocation whole, and Check records the worst input
// per target under FUZZMEM_DIR.
func TestMeasureAndRecord(t *testing.T) {
	if n := Measure(func() { sink = make([]byte, 4*MiB) }); n < 4*MiB || n > 5*MiB {
		t.Fatalf("Measure of a 4 MiB allocation: %d bytes", n)
	}
	dir := t.TempDir()
	t.Setenv("FUZZMEM_DIR", dir)
	record("FuzzZ/seed#0", 3*MiB)
	record("FuzzZ/abc", 1*MiB) // smaller: the file keeps the worst
	files, _ := filepath.Glob(filepath.Join(dir, "FuzzZ.*"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if got := strings.TrimSpace(string(b)); got != "3145728" {
		t.Fatalf("recorded %q, want 3145728", got)
	}
}

// Check fails a call that allocates more than its bound.
func TestCheckFails(t *testing.T) {
	ft := &fakeT{TB: t}
	Check(ft, MiB, func() { sink = make([]byte, 2*MiB) })
	if !ft.failed {
		t.Fatal("a 2 MiB allocation passed a 1 MiB bound")
	}
	ft = &fakeT{TB: t}
	Check(ft, MiB, func() { sink = make([]byte, 1024) })
	if ft.failed {
		t.Fatal("a 1 KiB allocation failed a 1 MiB bound")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Name() string          { return "FuzzFake" }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
