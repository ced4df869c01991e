package pipeline

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSampleRefAgreesWithJSON: sampleRef reads what json.Unmarshal reads
// from lines in the form builds write, and refuses (leaving the line to
// json.Unmarshal) lines it cannot read by key.
func TestSampleRefAgreesWithJSON(t *testing.T) {
	id := strings.Repeat("ab", 32)
	lines := []struct {
		line string
		ok   bool
	}{
		{`{"seq":0,"source":"run_0","kept":true,"reasons":[],"index":0,"shard":"shard-00000","shard_index":0,"box_count":2,"letterbox":{"scale_x":0.2,"pad_y":84},"identity":"` + id + `"}`, true},
		{`{"seq":7,"source":"run_\"shard\":\"shard-9\",\"kept\":false","label_path":"a\\\"identity\\\":\\\"x","kept":true,"shard":"shard-00012","shard_index":453,"identity":"` + id + `"}`, true},
		{`{"seq":3,"kept":false,"shard_index":-1,"index":-1,"detail":"decode_error: \"shard\":\"x\"","identity":"` + id + `"}`, false}, // no shard
		{`{"seq":3,"kept":true,"shard":"shard-00001","shard_index":5,"identity":"` + id[:10] + `"}`, false},                            // short identity
		{`{"seq":3,"kept":true,"shard":"shard-00001","shard_index":5 ,"identity":"` + id + `"}`, false},                                // not as a build writes it
		{`{"seq":3,"kept":true,"shard":"a\\b","shard_index":5,"identity":"` + id + `"}`, false},
		{`{"seq":3,"kept":true,"kept":true,"shard":"shard-00001","shard_index":5,"identity":"` + id + `"}`, false}, // a key twice
		{`{"seq":3,"kept":true,"shard":"shard-00001","shard_index":5,"identity":"` + id + `","x":{"shard_index":6}}`, false},
	}
	for i, c := range lines {
		var kept bool
		var shard, identity string
		var idx int64
		ok := sampleRef([]byte(c.line), &kept, &shard, &idx, &identity)
		if ok != c.ok {
			t.Errorf("line %d: sampleRef ok=%v, want %v", i, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		var want struct {
			Kept       bool   `json:"kept"`
			Shard      string `json:"shard"`
			ShardIndex int64  `json:"shard_index"`
			Identity   string `json:"identity"`
		}
		if err := json.Unmarshal([]byte(c.line), &want); err != nil {
			t.Fatal(err)
		}
		if kept != want.Kept || shard != want.Shard || idx != want.ShardIndex || identity != want.Identity {
			t.Errorf("line %d: sampleRef %v %q %d %q, json %+v", i, kept, shard, idx, identity, want)
		}
	}
}
