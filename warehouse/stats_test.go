package warehouse

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"even count median is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"odd count median", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"p99 of five is the max", ms(1, 2, 3, 4, 5), 99, 5 * time.Millisecond},
		{"p99 of 1..100 is 99", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 1..100 is 50", ms(hundred...), 50, 50 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 100, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: p%d = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestSummarizeLoadsAndString(t *testing.T) {
	loads := []ShardLoad{
		{ID: "a", Bytes: 1_000_000, Open: 3 * time.Millisecond, FirstTouch: time.Millisecond},
		{ID: "b", Bytes: 2_000_000, Checksum: 10 * time.Millisecond, Open: time.Millisecond},
		{ID: "c", Bytes: 500_000, Open: 2 * time.Millisecond},
	}
	opened, bytes, p50, p99, maxLoad := summarizeLoads(loads)
	if opened != 3 || bytes != 3_500_000 || p50 != 4*time.Millisecond || p99 != 11*time.Millisecond || maxLoad != 11*time.Millisecond {
		t.Fatalf("summarizeLoads = %d %d %v %v %v", opened, bytes, p50, p99, maxLoad)
	}
	s := LoadStats{ShardsOpened: 3, ShardsTotal: 5, BytesMapped: bytes, SamplesRead: 12, Elapsed: 1200 * time.Millisecond,
		LoadP50: p50, LoadP99: p99, LoadMax: maxLoad}
	want := "shards 3/5 opened, 3.5 MB mapped, 12 samples in 1.2s (10.0 samples/s), shard load p50 4ms p99 11ms max 11ms"
	if got := s.String(); got != want {
		t.Fatalf("String:\n got %q\nwant %q", got, want)
	}
	if (LoadStats{SamplesRead: 5}).SamplesPerSecond() != 0 {
		t.Fatal("samples/s without elapsed time must be 0")
	}
}
