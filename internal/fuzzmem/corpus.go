package fuzzmem

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ReadCorpusFile reads a seed corpus file in the "go test fuzz v1" format
// whose values are all []byte or string, so that a test can run a target's
// checked-in seeds (testdata/fuzz/<Target>/<name>) through other code.
func ReadCorpusFile(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a go test fuzz v1 file", path)
	}
	var vals [][]byte
	for _, line := range lines[1:] {
		var quoted string
		switch {
		case strings.HasPrefix(line, "[]byte(") && strings.HasSuffix(line, ")"):
			quoted = line[len("[]byte(") : len(line)-1]
		case strings.HasPrefix(line, "string(") && strings.HasSuffix(line, ")"):
			quoted = line[len("string(") : len(line)-1]
		default:
			t.Fatalf("%s: value %.40q is not []byte or string", path, line)
		}
		s, err := strconv.Unquote(quoted)
		if err != nil {
			t.Fatal(fmt.Errorf("%s: %w", path, err))
		}
		vals = append(vals, []byte(s))
	}
	return vals
}

// AddFiles adds every file matching the glob patterns (relative to the
// package directory, as go test runs) to f's seeds, so that a target starts
// from the real files of the repository's testdata. A pattern that matches
// nothing fails the target: a seed that silently went missing would leave
// the fuzzer without the structure it was meant to start from.
func AddFiles(f *testing.F, patterns ...string) {
	f.Helper()
	for _, pat := range patterns {
		paths, err := filepath.Glob(pat)
		if err != nil || len(paths) == 0 {
			f.Fatalf("seed pattern %s matches no file (%v)", pat, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}
