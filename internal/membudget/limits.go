package membudget

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// cgroup files that hold the memory limit of the process's container:
// cgroup v2's memory.max ("max" when unlimited) and cgroup v1's
// memory.limit_in_bytes (a number near 2^63 when unlimited).
var (
	cgroupV2Max = "/sys/fs/cgroup/memory.max"
	cgroupV1Max = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	meminfo     = "/proc/meminfo"
)

// SystemMemory is the memory this process may use: the smallest of its
// cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and the
// machine's physical memory (MemTotal), with where it came from. It
// returns 0 when none of them can be read.
func SystemMemory() (int64, string) {
	var best int64
	from := ""
	consider := func(n int64, what string) {
		if n > 0 && (best == 0 || n < best) {
			best, from = n, what
		}
	}
	if n, ok := readCgroupLimit(cgroupV2Max); ok {
		consider(n, cgroupV2Max)
	} else if n, ok := readCgroupLimit(cgroupV1Max); ok {
		consider(n, cgroupV1Max)
	}
	if n, ok := readMemTotal(meminfo); ok {
		consider(n, "MemTotal in "+meminfo)
	}
	return best, from
}

// readCgroupLimit reads a cgroup memory limit; ok is false when the file
// is absent or says unlimited.
func readCgroupLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0, false // v1 reports "unlimited" as a page-rounded 2^63-1
	}
	return n, true
}

// readMemTotal reads MemTotal (kB) from /proc/meminfo.
func readMemTotal(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10, err == nil && kb > 0
		}
	}
	return 0, false
}

// DefaultFraction is the part of SystemMemory a build takes by default:
// the rest is left to the page cache the shards are written through, the
// kernel and whatever else the container runs.
const DefaultFraction = 0.75

// DefaultLimit is the default budget of a build on a machine (or in a
// cgroup) with system bytes: DefaultFraction of it. 0 when system is 0.
func DefaultLimit(system int64) int64 {
	return int64(float64(system) * DefaultFraction)
}

// ParseBytes parses a size: a number with an optional unit B, KB, MB, GB,
// TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case
// insensitive, e.g. "2GiB", "512MiB", "1500000000". Fractions are allowed
// with a unit ("1.5GiB").
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	if mult == 0 || num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (B, KB, MB, GB, KiB, MiB, GiB, TiB)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes", s)
	}
	if unit == "" || unit == "b" {
		if v != math.Trunc(v) {
			return 0, errors.New("size " + strconv.Quote(s) + ": a number of bytes is whole")
		}
	}
	return int64(v * mult), nil
}

// FormatBytes writes n in binary units: "512 B", "1.5 GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
