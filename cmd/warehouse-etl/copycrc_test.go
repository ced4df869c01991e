package main

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCopyCRCFolds checks the one-pass copy and CRC-32C of the Python
// package's compiled part (python/warehouse_etl/_copycrc.c) on each
// architecture it has a fold for, against Go's hash/crc32: built for this
// machine with gcc, and for arm64 with aarch64-linux-gnu-gcc, run under
// qemu-aarch64 (the Python tests only reach this machine's fold). Every level
// the CPU (or qemu's) runs is tested, through python/tests/copycrc_harness.c.
// Under CI=true a missing compiler or qemu fails: .ci/run installs them.
func TestCopyCRCFolds(t *testing.T) {
	src := mustAbs(t, "../../python")
	// Read here so that an edit to either file reruns a cached pass.
	for _, f := range []string{"warehouse_etl/_copycrc.c", "tests/copycrc_harness.c"} {
		if _, err := os.ReadFile(filepath.Join(src, f)); err != nil {
			t.Fatal(err)
		}
	}
	data, cases, want := copyCRCCases()
	dir := t.TempDir()
	input := filepath.Join(dir, "data")
	if err := os.WriteFile(input, data, 0o644); err != nil {
		t.Fatal(err)
	}

	type target struct {
		arch, cc string
		run      []string // before the binary
		levels   []string // the names MAX_LEVEL must say, from level 1
	}
	targets := []target{{arch: "arm64", cc: "aarch64-linux-gnu-gcc", run: []string{"qemu-aarch64"},
		levels: []string{"armv8-crc32", "armv8-crc32-pmull"}}}
	if runtime.GOARCH == "amd64" {
		targets = append(targets, target{arch: "amd64", cc: "gcc", levels: []string{"sse4.2-pclmulqdq", "avx2-vpclmulqdq"}})
	}
	for _, tg := range targets {
		t.Run(tg.arch, func(t *testing.T) {
			for _, tool := range append([]string{tg.cc}, tg.run...) {
				if _, err := exec.LookPath(tool); err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("%s not found: .ci/run installs it (gcc-aarch64-linux-gnu, qemu-user)", tool)
					}
					t.Skipf("%s not found", tool)
				}
			}
			bin := filepath.Join(dir, "harness-"+tg.arch)
			// Static, so that qemu needs no arm64 libc beside it.
			build := exec.Command(tg.cc, "-O2", "-Wall", "-Werror", "-Wno-unused-function", "-static",
				"-o", bin, filepath.Join(src, "tests", "copycrc_harness.c"))
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", build, err, out)
			}
			maxLevel := 0
			for level := 1; level <= 2; level++ {
				args := append(append([]string{}, tg.run...), bin, fmt.Sprint(level), input)
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Stdin = strings.NewReader(cases)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				head, rest, _ := strings.Cut(string(out), "\n")
				var cpuMax int
				var name string
				if _, serr := fmt.Sscanf(head, "max %d %s", &cpuMax, &name); serr != nil {
					t.Fatalf("level %d: first line %q: %v (%v)\n%s", level, head, serr, err, stderr.Bytes())
				}
				if cpuMax < 1 || cpuMax > len(tg.levels) || name != tg.levels[cpuMax-1] {
					t.Fatalf("the harness says MAX_LEVEL %d (%s); want 1 to %d, named %q", cpuMax, name, len(tg.levels), tg.levels)
				}
				maxLevel = cpuMax
				if level > cpuMax {
					if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
						t.Fatalf("level %d above MAX_LEVEL %d: %v, want exit 3", level, cpuMax, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("level %d: %v\n%s", level, err, stderr.Bytes())
				}
				got := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
				if len(got) != len(want) {
					t.Fatalf("level %d: %d answers for %d cases", level, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("level %d (%s), case %q: got %q, want %q (hash/crc32)",
							level, tg.levels[level-1], strings.Split(cases, "\n")[i], got[i], want[i])
					}
				}
			}
			// Both levels are meant to run where the tests run (this CPU, qemu's
			// default arm64 CPU): a detection that lost one would test less.
			if maxLevel != 2 {
				t.Logf("%s: only level %d runs here", tg.arch, maxLevel)
			}
		})
	}
}

// copyCRCCases returns pseudo-random bytes, case lines for the harness
// (offset, length, register, destination shift) and each case's answer line,
// "COPY STREAM ONLY" (copying, copying past the caches, not copying), each the raw
// register after the bytes from hash/crc32. The
// lengths cover each fold's edges: under and at a step (x86-64: 128 and 256
// bytes; arm64: 32 bytes, the 3 KiB block), a remainder of every size past
// whole steps, the GIL threshold (64 KiB) and a letterboxed 384 sample.
func copyCRCCases() ([]byte, string, []string) {
	r := rand.New(rand.NewSource(29))
	data := make([]byte, 512<<10)
	r.Read(data)
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, base := range []int{384, 512, 1024, 3072, 2 * 3072, 4096, 64 << 10, 384 * 384 * 3} {
		for d := -9; d <= 9; d++ {
			lengths = append(lengths, base+d)
		}
	}
	for _, step := range []int{128, 3072} {
		for k := 0; k < step; k += 8 {
			lengths = append(lengths, 10*step+k+k%7)
		}
	}
	var cases strings.Builder
	var want []string
	tab := crc32.MakeTable(crc32.Castagnoli)
	for i, n := range lengths {
		off := r.Intn(64)
		if i%5 == 0 {
			off = 0
		}
		reg := []uint32{0xFFFFFFFF, 0, r.Uint32()}[i%3]
		shift := r.Intn(64)
		raw := ^crc32.Update(^reg, tab, data[off:off+n])
		fmt.Fprintf(&cases, "%d %d %d %d\n", off, n, reg, shift)
		want = append(want, fmt.Sprintf("%d %d %d", raw, raw, raw))
	}
	// Sanity of the expected values' convention: the check value of "123456789".
	if c := crc32.Checksum([]byte("123456789"), tab); c != 0xE3069283 {
		panic(fmt.Sprintf("crc32c check value %#x", c))
	}
	return data, cases.String(), want
}
