package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"warehouse-etl/shard"
)

func TestCRC32CBitwiseCheckValue(t *testing.T) {
	// The check value of the CRC-32C catalogue entry: the tests' own CRC
	// must be right before it judges the exporter's.
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c(123456789) = %#08x, want 0xe3069283", got)
	}
}

// TestWriteStore writes stores of both dtypes, with and without zstd, with
// the warehouse's shard size and others, and checks every metadata field
// and every byte of every shard against values computed from the fixture's
// formulas.
func TestWriteStore(t *testing.T) {
	f16, f32 := writeFixture(t, smallSpec(shard.F16)), writeFixture(t, smallSpec(shard.F32))
	for _, tc := range []struct {
		name         string
		fx           *fixture
		zstdLevel    int
		shardSamples int
		wantPerShard int
	}{
		{"f16 raw as warehouse", f16, 0, 0, 4},
		{"f32 raw as warehouse", f32, 0, 0, 4},
		{"f16 zstd 3", f16, 3, 0, 4},
		{"f32 zstd 19", f32, 19, 0, 4},
		{"f16 3 per shard across warehouse shards", f16, 0, 3, 3},
		{"f32 1 per shard", f32, 1, 1, 1},
		{"f16 all in one shard with empty chunks", f16, 0, 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "store.zarr")
			res, err := Write(context.Background(), tc.fx.dir, tc.fx.m, target, Options{ZstdLevel: tc.zstdLevel, ShardSamples: tc.shardSamples, Workers: 3})
			if err != nil {
				t.Fatal(err)
			}
			n := int(tc.fx.m.Samples)
			shards := (n + tc.wantPerShard - 1) / tc.wantPerShard
			wants := tc.fx.wantArrays()
			if res.ShardSamples != tc.wantPerShard || res.ShardFiles != shards*len(wants) || len(res.Arrays) != len(wants) {
				t.Fatalf("result %+v, want %d per shard, %d files", res, tc.wantPerShard, shards*len(wants))
			}
			checkRoot(t, target, tc.fx, wants, tc.wantPerShard, tc.zstdLevel)
			for _, want := range wants {
				checkArrayMetadata(t, target, want, int64(n), int64(tc.wantPerShard), tc.zstdLevel)
				for j := range shards {
					checkShardFile(t, target, want, j, tc.wantPerShard, n, tc.zstdLevel)
				}
			}
			if entries, _ := os.ReadDir(filepath.Dir(target)); len(entries) != 1 {
				t.Errorf("left beside the store: %v", entries)
			}
		})
	}
}

func checkRoot(t *testing.T, store string, fx *fixture, wants []wantArray, perShard, zstdLevel int) {
	t.Helper()
	var root struct {
		ZarrFormat int    `json:"zarr_format"`
		NodeType   string `json:"node_type"`
		Attributes struct {
			Warehouse map[string]json.RawMessage `json:"warehouse"`
			Export    struct {
				Exporter     string   `json:"exporter"`
				Arrays       []string `json:"arrays"`
				ShardSamples int      `json:"shard_samples"`
				ZstdLevel    int      `json:"zstd_level"`
			} `json:"zarr_export"`
		} `json:"attributes"`
	}
	readJSON(t, filepath.Join(store, "zarr.json"), &root)
	if root.ZarrFormat != 3 || root.NodeType != "group" {
		t.Fatalf("root: zarr_format %d node_type %q", root.ZarrFormat, root.NodeType)
	}
	var version, recipe string
	var summary struct {
		Total struct{ Kept int64 } `json:"total"`
	}
	json.Unmarshal(root.Attributes.Warehouse["version"], &version)
	json.Unmarshal(root.Attributes.Warehouse["version_recipe"], &recipe)
	json.Unmarshal(root.Attributes.Warehouse["summary"], &summary)
	if version != fx.m.Version || recipe != fx.m.VersionRecipe || summary.Total.Kept != fx.m.Samples {
		t.Errorf("root attributes: version %q recipe %q kept %d", version, recipe, summary.Total.Kept)
	}
	for _, absent := range []string{"created_at_ms", "shards", "files"} {
		if _, ok := root.Attributes.Warehouse[absent]; ok {
			t.Errorf("root attributes carry %s", absent)
		}
	}
	var names []string
	for _, w := range wants {
		names = append(names, w.name)
	}
	e := root.Attributes.Export
	if e.Exporter != Exporter || !slices.Equal(e.Arrays, names) || e.ShardSamples != perShard || e.ZstdLevel != zstdLevel {
		t.Errorf("zarr_export %+v", e)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// checkArrayMetadata compares an array's zarr.json, parsed generically,
// with the expected document spelled out here.
func checkArrayMetadata(t *testing.T, store string, want wantArray, n, perShard int64, zstdLevel int) {
	t.Helper()
	var got map[string]any
	readJSON(t, filepath.Join(store, want.name, "zarr.json"), &got)
	shape := append([]int64{n}, want.shape...)
	outer := append([]int64{perShard}, want.shape...)
	inner := append([]int64{1}, want.shape...)
	codecs := []any{map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}}}
	if zstdLevel > 0 {
		codecs = append(codecs, map[string]any{"name": "zstd", "configuration": map[string]any{"level": float64(zstdLevel), "checksum": false}})
	}
	wantDoc := map[string]any{
		"zarr_format":        3.0,
		"node_type":          "array",
		"shape":              numbers(shape),
		"data_type":          want.dataType,
		"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": numbers(outer)}},
		"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
		"fill_value":         want.fill,
		"codecs": []any{map[string]any{"name": "sharding_indexed", "configuration": map[string]any{
			"chunk_shape": numbers(inner),
			"codecs":      codecs,
			"index_codecs": []any{
				map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}},
				map[string]any{"name": "crc32c"},
			},
			"index_location": "end",
		}}},
		"dimension_names": strings2any(want.dims),
	}
	attrs, ok := got["attributes"].(map[string]any)
	if !ok || attrs["description"] == "" {
		t.Errorf("%s: attributes %v lack a description", want.name, got["attributes"])
	}
	delete(got, "attributes")
	gotRaw, _ := json.Marshal(got)
	wantRaw, _ := json.Marshal(wantDoc)
	if !bytes.Equal(gotRaw, wantRaw) {
		t.Errorf("%s/zarr.json:\n got %s\nwant %s", want.name, gotRaw, wantRaw)
	}
}

func numbers(v []int64) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func strings2any(v []string) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// checkShardFile reads shard j of an array and checks its index (with the
// test's own CRC) and every inner chunk against the expected sample bytes.
func checkShardFile(t *testing.T, store string, want wantArray, j, perShard, n, zstdLevel int) {
	t.Helper()
	key := fmt.Sprintf("c/%d", j) + strings.Repeat("/0", len(want.shape))
	file, err := os.ReadFile(filepath.Join(store, want.name, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	indexStart := len(file) - perShard*16 - 4
	if indexStart < 0 {
		t.Fatalf("%s/%s: %d bytes", want.name, key, len(file))
	}
	if got, stored := crc32cBitwise(file[indexStart:len(file)-4]), binary.LittleEndian.Uint32(file[len(file)-4:]); got != stored {
		t.Fatalf("%s/%s: index crc32c %#x, stored %#x", want.name, key, got, stored)
	}
	var dec *zstd.Decoder
	if zstdLevel > 0 {
		dec, _ = zstd.NewReader(nil)
		defer dec.Close()
	}
	var end uint64
	for k := range perShard {
		off := binary.LittleEndian.Uint64(file[indexStart+16*k:])
		nb := binary.LittleEndian.Uint64(file[indexStart+16*k+8:])
		i := j*perShard + k
		if i >= n {
			if off != math.MaxUint64 || nb != math.MaxUint64 {
				t.Fatalf("%s/%s: chunk %d past the last sample: offset %d nbytes %d, want 2^64-1 twice", want.name, key, k, off, nb)
			}
			continue
		}
		// Inner chunks are written back to back in sample order.
		if off != end || off+nb > uint64(indexStart) {
			t.Fatalf("%s/%s: chunk %d at %d+%d, want offset %d before the index at %d", want.name, key, k, off, nb, end, indexStart)
		}
		end = off + nb
		chunk := file[off : off+nb]
		if dec != nil {
			if chunk, err = dec.DecodeAll(chunk, nil); err != nil {
				t.Fatalf("%s/%s chunk %d: zstd: %v", want.name, key, k, err)
			}
		}
		if w := want.sample(i); !bytes.Equal(chunk, w) {
			t.Fatalf("%s sample %d:\n got %x\nwant %x", want.name, i, chunk, w)
		}
	}
	if end != uint64(indexStart) {
		t.Fatalf("%s/%s: %d bytes between the last chunk and the index", want.name, key, uint64(indexStart)-end)
	}
}

// TestWriteDeterministic: two exports of one version are byte-identical,
// whatever the worker count.
func TestWriteDeterministic(t *testing.T) {
	fx := writeFixture(t, smallSpec(shard.F16))
	for _, level := range []int{0, 5} {
		a, b := filepath.Join(t.TempDir(), "a.zarr"), filepath.Join(t.TempDir(), "b.zarr")
		if _, err := Write(context.Background(), fx.dir, fx.m, a, Options{ZstdLevel: level, Workers: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := Write(context.Background(), fx.dir, fx.m, b, Options{ZstdLevel: level, Workers: 4}); err != nil {
			t.Fatal(err)
		}
		if da, db := treeDigest(t, a), treeDigest(t, b); !mapsEqual(da, db) {
			t.Errorf("zstd %d: two exports differ", level)
		}
	}
}

func mapsEqual(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestWriteEmptyWarehouse: a version without samples gives arrays of
// length 0 and no shard files.
func TestWriteEmptyWarehouse(t *testing.T) {
	fx := writeFixture(t, fixtureSpec{dtype: shard.F32, width: 2, height: 2, maxBoxes: 1})
	target := filepath.Join(t.TempDir(), "empty.zarr")
	res, err := Write(context.Background(), fx.dir, fx.m, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ShardFiles != 0 || res.ShardSamples != 1 {
		t.Fatalf("result %+v", res)
	}
	var meta struct{ Shape []int64 }
	readJSON(t, filepath.Join(target, "images", "zarr.json"), &meta)
	if !slices.Equal(meta.Shape, []int64{0, 3, 2, 2}) {
		t.Fatalf("images shape %v", meta.Shape)
	}
	if _, err := os.Stat(filepath.Join(target, "images", "c")); !os.IsNotExist(err) {
		t.Fatalf("images/c exists: %v", err)
	}
}
