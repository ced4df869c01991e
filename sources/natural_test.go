package sources

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool // a < b
	}{
		{"run_2", "run_10", true},
		{"run_10", "run_2", false},
		{"run_9", "run_1700000000123", true},
		{"frame_00009", "frame_00010", true},
		{"a", "a", false},
		{"", "a", true},
		{"a", "", false},
		{"a", "a1", true},
		{"a1", "a", false},
		{"a1b", "a1c", true},
		{"a2b", "a10a", true},
		// Equal numbers: plain string order decides, so the order is total.
		{"run_02", "run_2", true},
		{"run_2", "run_02", false},
		{"x007y", "x7y", true},
		{"x7y", "x007y", false},
		// Digit runs longer than any integer type.
		{"run_99999999999999999999999999", "run_100000000000000000000000000", true},
		{"run_123456789012345678901234567890", "run_123456789012345678901234567891", true},
		{"run_123456789012345678901234567891", "run_123456789012345678901234567890", false},
		{"run_000000000000000000000000000001", "run_2", true},
		// Digits against other bytes: as bytes.
		{"a1", "a_", true},  // '1' < '_'
		{"a-", "a1", true},  // '-' < '1'
		{"a99", "ab", true}, // '9' < 'b'
		{"A10", "a2", true}, // 'A' < 'a'
		{"é2", "é10", true}, // non-ASCII bytes compare as bytes
		{"x1.5", "x1.10", true},
	}
	for _, tt := range tests {
		if got := NaturalLess(tt.a, tt.b); got != tt.want {
			t.Errorf("NaturalLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNaturalSort(t *testing.T) {
	in := []string{"run_10", "run_1700000000123", "run_2", "run_1", "run_02", "run_b", "run_", "run_a10", "run_a9"}
	want := []string{"run_", "run_1", "run_02", "run_2", "run_10", "run_1700000000123", "run_a9", "run_a10", "run_b"}
	got := slices.Clone(in)
	slices.SortFunc(got, NaturalCompare)
	if !slices.Equal(got, want) {
		t.Errorf("sorted = %q\nwant     %q", got, want)
	}
}

// referenceCompare is a second, independent implementation: split both
// names into tokens (digit runs as big integers, other bytes one by one),
// compare token lists, then fall back to plain order.
func referenceCompare(a, b string) int {
	ta, tb := tokens(a), tokens(b)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		switch {
		case x.num != nil && y.num != nil:
			if c := x.num.Cmp(y.num); c != 0 {
				return c
			}
		default:
			// A digit run stands for its first byte against a non-digit.
			if x.b != y.b {
				if x.b < y.b {
					return -1
				}
				return 1
			}
		}
	}
	switch {
	case len(ta) < len(tb):
		return -1
	case len(ta) > len(tb):
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type token struct {
	b   byte
	num *big.Int
}

func tokens(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			out = append(out, token{b: s[i]})
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		n, _ := new(big.Int).SetString(s[i:j], 10)
		out = append(out, token{b: s[i], num: n})
		i = j
	}
	return out
}

func TestNaturalLessMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0019a_-.Z"
	name := func() string {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	names := make([]string, 400)
	for i := range names {
		names[i] = name()
	}
	for _, a := range names {
		for _, b := range names[:100] {
			want := referenceCompare(a, b) < 0
			if got := NaturalLess(a, b); got != want {
				t.Fatalf("NaturalLess(%q, %q) = %v, reference says %v", a, b, got, want)
			}
		}
	}
	// Sorting with either gives the same sequence.
	x, y := slices.Clone(names), slices.Clone(names)
	slices.SortFunc(x, NaturalCompare)
	slices.SortFunc(y, referenceCompare)
	if !slices.Equal(x, y) {
		t.Errorf("sort differs from the reference:\n%q\n%q", x, y)
	}
}
