package warehouse

import (
	"fmt"
	"testing"
)

// The stream is SplitMix64; these are the published outputs of the
// reference implementation (Vigna, splitmix64.c) for two seeds.
func TestOrderStreamIsSplitMix64(t *testing.T) {
	tests := []struct {
		seed uint64
		want []uint64
	}{
		{1234567, []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}},
		{1477776061723855037, []uint64{1985237415132408290, 2979275885539914483, 13511426838097143398, 8488337342461049707, 15141737807933549159}},
	}
	for _, tt := range tests {
		s := orderStream{state: tt.seed}
		for i, want := range tt.want {
			if got := s.next(); got != want {
				t.Fatalf("seed %d output %d: %d, want %d", tt.seed, i, got, want)
			}
		}
	}
}

func TestBelowIsUniformAndInRange(t *testing.T) {
	// Fisher-Yates over 4 elements must give each of the 24 permutations
	// about equally often. The stream is deterministic, so the bounds are
	// not flaky: they are loose enough for any fair generator.
	counts := map[string]int{}
	const epochs = 24000
	for e := range epochs {
		counts[fmt.Sprint(EpochOrder(4, nil, ShuffleGlobal, 7, e))]++
	}
	if len(counts) != 24 {
		t.Fatalf("%d distinct permutations of 4, want 24", len(counts))
	}
	for p, n := range counts {
		if n < 850 || n > 1150 {
			t.Errorf("permutation %s seen %d times of %d, want about 1000", p, n, epochs)
		}
	}
	s := newOrderStream(1, 1)
	for _, n := range []uint64{1, 2, 3, 1<<63 + 1, ^uint64(0)} {
		for range 100 {
			if v := s.below(n); v >= n {
				t.Fatalf("below(%d) = %d", n, v)
			}
		}
	}
}
