package kdb

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

var update = flag.Bool("update", false, "rewrite the golden files and the fuzz seed corpus")

// fuzzSeeds are the files testdata/fuzz/FuzzKDB holds, made by
// TestFuzzSeedCorpus -update: small files with every record kind.
func fuzzSeeds(t testing.TB) map[string][]byte {
	tiny := build(tinyEpisodes(t)).file
	newerMinor := bytes.Clone(tiny)
	newerMinor[offVersionMinor] = 3
	legacy := build(oneEpisode(1, func(int) []tCamera {
		c := rawCamera("cam", 3, 3, 3, 0)
		c.legacy = true
		return []tCamera{c}
	})).file
	mixed := build([]tEpisode{
		{id: 9},
		{id: 2, frames: frames(2, 2, func(int) []tCamera {
			return []tCamera{rawCamera("cam", 2, 1, 1, 5), rawCamera("cam", 1, 2, 4, 9), pngCamera(t, "png", 1, 1)}
		}), stateDim: -1, actionDim: -1},
	}).file
	r := float32(1.5)
	withMeta := build([]tEpisode{{id: 1, meta: tMeta("franka", "pick up the block", 10, 1, &r),
		frames: frames(1, 1, rawCams), stateDim: -1, actionDim: -1}}).file
	return map[string][]byte{
		"tiny": tiny, "newer_minor": newerMinor, "legacy_layout": legacy, "mixed": mixed,
		"with_meta": withMeta, "header_only": build(nil).file, "cut_index": tiny[:len(tiny)-10],
	}
}

// TestFuzzSeedCorpus keeps the committed seed corpus equal to fuzzSeeds.
func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzKDB")
	for name, b := range fuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale or missing (%v); rerun with -update", path, err)
		}
	}
}

// FuzzKDB runs everything a build does over arbitrary bytes: Open, the
// scan of every episode, and ReadImage of every sample the scan accepted,
// with the first camera and with a named one. It must never panic, nor
// allocate more than kdbAllocBound for one input (TestEveryByteFlipped
// checks the per-call bounds byte by byte). Seeds: the small files of
// fuzzSeeds and the real demo file (testdata/kdb/demo.kdb).
func FuzzKDB(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	demo, err := os.ReadFile(demoPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(demo)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzmem.Check(t, kdbAllocBound, func() {
			exercise(b, "")
			exercise(b, "cam")
			if _, err := ParseMeta(b); err == nil {
				// a blob that parses has its fields inside it
				if len(b) < 2+2+4+1+1 {
					t.Fatalf("%d-byte blob parsed", len(b))
				}
			}
		})
	})
}

// FuzzEpisode wraps arbitrary meta, state/action and image bytes in a
// valid header and index, so the fuzzer spends its time inside episodes
// (meta blob, step records, camera records) rather than on the index,
// which almost every mutation of a whole file breaks.
func FuzzEpisode(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		fl, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil || fl.Len() == 0 {
			continue
		}
		e := fl.Entry(0)
		sec := func(s Section) []byte { return b[s.Offset:s.end()] }
		f.Add(sec(e.Meta), sec(e.Actions), sec(e.Images), e.NumFrames, e.StateDim, e.ActionDim)
	}
	f.Fuzz(func(t *testing.T, meta, actions, images []byte, numFrames uint32, stateDim, actionDim uint16) {
		fuzzmem.Check(t, episodeAllocBound, func() {
			numFrames = min(numFrames, uint32(len(images)/frameHeader))
			file := make([]byte, HeaderSize)
			var offs [3]uint64
			for k, s := range [][]byte{meta, actions, images} {
				offs[k] = uint64(len(file))
				file = append(file, s...)
			}
			indexOffset := uint64(len(file))
			file = le.AppendUint64(file, 42)
			file = le.AppendUint32(file, numFrames)
			file = le.AppendUint16(file, actionDim)
			file = le.AppendUint16(file, stateDim)
			for _, k := range []int{1, 2, 0} { // actions, images, meta
				file = le.AppendUint64(file, offs[k])
				file = le.AppendUint64(file, uint64(len([][]byte{meta, actions, images}[k])))
			}
			copy(file, Magic)
			le.PutUint16(file[offVersionMinor:], VersionMinor)
			le.PutUint64(file[offNumEpisodes:], 1)
			le.PutUint64(file[offNumFrames:], uint64(numFrames))
			le.PutUint64(file[offIndexOffset:], indexOffset)
			le.PutUint64(file[offIndexLength:], IndexEntrySize)
			if _, err := Open(bytes.NewReader(file), int64(len(file))); err != nil {
				t.Fatalf("the harness built an invalid file: %v", err)
			}
			exercise(file, "")
			exercise(file, "cam")
		})
	})
}
