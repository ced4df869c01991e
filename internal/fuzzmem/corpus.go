package fuzzmem

import (
	"fmt"
	"os"
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
