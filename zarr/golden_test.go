package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/shard"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/tiny.zarr and the FuzzReadIndex seed corpus from the exporter's output")

// tinySpec is the golden store's warehouse: 3 samples in shards of 2 and 1,
// 2x1 images, 2 box slots, two extras, one named with a "/".
func tinySpec() fixtureSpec {
	return fixtureSpec{dtype: shard.F16, width: 2, height: 1, maxBoxes: 2, shardSizes: []int{2, 1},
		extras: []fixtureExtra{{"act/x", []int{2}}, {"reward", []int{1}}}}
}

const goldenDir = "testdata/golden/tiny.zarr"

// TestGoldenStore: the tiny warehouse's store, byte for byte. The store is
// the contract other languages read; docs/format/zarr.md shows its tree.
// Run with -update after a deliberate format change, and review the diff.
func TestGoldenStore(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	store := filepath.Join(t.TempDir(), "tiny.zarr")
	if _, err := Write(context.Background(), fx.dir, fx.m, store, Options{}); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(goldenDir, os.DirFS(store)); err != nil {
			t.Fatal(err)
		}
		writeIndexSeeds(t, store)
	}
	got, want := treeDigest(t, store), treeDigest(t, goldenDir)
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("missing %s", name)
		}
	}
	for name, sum := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("unexpected %s", name)
		} else if w != sum {
			g, _ := os.ReadFile(filepath.Join(store, name))
			wb, _ := os.ReadFile(filepath.Join(goldenDir, name))
			t.Errorf("%s differs:\n got %q\nwant %q", name, g, wb)
		}
	}
}

// TestHandSpelledShards spells out, independently of the exporter, the
// bytes of two shard files and one zarr.json of the tiny store.
func TestHandSpelledShards(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	store := filepath.Join(t.TempDir(), "tiny.zarr")
	if _, err := Write(context.Background(), fx.dir, fx.m, store, Options{}); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	withIndex := func(chunks []byte, entries ...uint64) []byte {
		index := []byte{}
		for _, v := range entries {
			index = le.AppendUint64(index, v)
		}
		return le.AppendUint32(append(chunks, index...), crc32cBitwise(index))
	}
	const empty = ^uint64(0)
	for _, tc := range []struct {
		path string
		want []byte
	}{
		// box_count = i % 3: samples 0 and 1 in shard 0, 4 bytes each.
		{"box_count/c/0", withIndex([]byte{0, 0, 0, 0, 1, 0, 0, 0}, 0, 4, 4, 4)},
		// sample 2 in shard 1; its second chunk slot is past the end.
		{"box_count/c/1", withIndex([]byte{2, 0, 0, 0}, 0, 4, empty, empty)},
		// class_index, 2 slots: sample 2 has classes (2+0)%3, (2+1)%3.
		{"class_index/c/1/0", withIndex([]byte{2, 0, 0, 0, 0, 0, 0, 0}, 0, 8, empty, empty)},
		// class_index shard 0: sample 0 has no box, sample 1 one box of class 1.
		{"class_index/c/0/0", withIndex([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, 0, 8, 8, 8)},
		// extras.reward (extra offset 2) of sample 2: 2 + 2/4 = 2.5f = 0x40200000.
		{"extras.reward/c/1/0", withIndex([]byte{0x00, 0x00, 0x20, 0x40}, 0, 4, empty, empty)},
	} {
		got, err := os.ReadFile(filepath.Join(store, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.path, got, tc.want)
		}
	}
	const boxCountDoc = `{
  "zarr_format": 3,
  "node_type": "array",
  "shape": [
    3
  ],
  "data_type": "uint32",
  "chunk_grid": {
    "name": "regular",
    "configuration": {
      "chunk_shape": [
        2
      ]
    }
  },
  "chunk_key_encoding": {
    "name": "default",
    "configuration": {
      "separator": "/"
    }
  },
  "fill_value": 0,
  "codecs": [
    {
      "name": "sharding_indexed",
      "configuration": {
        "chunk_shape": [
          1
        ],
        "codecs": [
          {
            "name": "bytes",
            "configuration": {
              "endian": "little"
            }
          }
        ],
        "index_codecs": [
          {
            "name": "bytes",
            "configuration": {
              "endian": "little"
            }
          },
          {
            "name": "crc32c"
          }
        ],
        "index_location": "end"
      }
    }
  ],
  "attributes": {
    "description": "number of real boxes (mask ones)"
  },
  "dimension_names": [
    "sample"
  ]
}
`
	if got, _ := os.ReadFile(filepath.Join(store, "box_count", "zarr.json")); string(got) != boxCountDoc {
		t.Errorf("box_count/zarr.json:\n%s", got)
	}
}

// writeIndexSeeds refreshes the FuzzReadIndex corpus from the golden
// store's shard files: each seed is a whole shard file and its chunk count.
func writeIndexSeeds(t *testing.T, store string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzReadIndex")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"box_count/c/0", "box_count/c/1", "images/c/0/0/0/0", "extras.act.x/c/1/0"} {
		raw, err := os.ReadFile(filepath.Join(store, name))
		if err != nil {
			t.Fatal(err)
		}
		seed := []byte("go test fuzz v1\n[]byte(" + quoteBytes(raw) + ")\nint(2)\n")
		file := filepath.Join(dir, string(slices.DeleteFunc([]byte(name), func(c byte) bool { return c == '/' || c == '.' })))
		if err := os.WriteFile(file, seed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// quoteBytes is a Go string literal of b, as the fuzz corpus format wants.
func quoteBytes(b []byte) string {
	var out bytes.Buffer
	out.WriteByte('"')
	for _, c := range b {
		out.WriteString(`\x`)
		out.WriteByte("0123456789abcdef"[c>>4])
		out.WriteByte("0123456789abcdef"[c&15])
	}
	out.WriteByte('"')
	return out.String()
}

// TestDocShowsGoldenStore: docs/format/zarr.md shows the golden store's
// images/zarr.json as written, and every array document, in store order,
// one per line.
func TestDocShowsGoldenStore(t *testing.T) {
	doc, err := os.ReadFile("../docs/format/zarr.md")
	if err != nil {
		t.Fatal(err)
	}
	images, err := os.ReadFile(filepath.Join(goldenDir, "images", "zarr.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append(append([]byte("```json\n"), images...), "```\n"...)) {
		t.Error("the document does not show images/zarr.json as written")
	}
	var root struct {
		Attributes struct {
			Export struct{ Arrays []string } `json:"zarr_export"`
		}
	}
	readJSON(t, filepath.Join(goldenDir, "zarr.json"), &root)
	if len(root.Attributes.Export.Arrays) != 21 {
		t.Fatalf("the golden root lists arrays %v", root.Attributes.Export.Arrays)
	}
	var lines []string
	for _, name := range root.Attributes.Export.Arrays {
		raw, err := os.ReadFile(filepath.Join(goldenDir, name, "zarr.json"))
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, compact.String())
	}
	block := "```json\n" + strings.Join(lines, "\n") + "\n```\n"
	if !bytes.Contains(doc, []byte(block)) {
		t.Errorf("the document's list of array documents differs from the golden store's; it should be:\n%s", block)
	}
}
