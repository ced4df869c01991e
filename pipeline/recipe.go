package pipeline

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"warehouse-etl/config"
	"warehouse-etl/dtype"
	"warehouse-etl/shard"
	"warehouse-etl/sources"
	"warehouse-etl/sources/registry"
	"warehouse-etl/transforms"
	"warehouse-etl/warehouse"
)

// CodeVersion names the code that produced a warehouse. Bump it whenever a
// change alters the bytes of shards or manifest for the same inputs: it is
// part of the version key, so old versions are never silently reused.
// 2: every shard ends in a checksum section, one CRC-32C per sample.
// 3: shard k holds the planned samples k*spp..(k+1)*spp-1, so a late
// decode failure leaves its shard short (or absent) instead of moving
// every later sample; image statistics are summed per shard, then over
// shards. Both make the bytes independent of the partition count.
// 4: shards carry the shard_version of the features they use (3, 4 for
// U8) instead of 1, and the manifest and the version key say so.
const CodeVersion = "warehouse-etl/4"

// outputDType is the config's dtype (config.Validate checks it; F16, the
// default, for a config that was not validated).
func outputDType(c *config.Config) dtype.DType {
	if d, err := dtype.ParseConfig(c.DType); err == nil {
		return d
	}
	return dtype.F16
}

// transformSpec turns the config into the transforms package's spec.
func transformSpec(c *config.Config) transforms.Spec {
	s := transforms.Spec{
		Width:  c.TargetSize[0],
		Height: c.TargetSize[1],
		Mode:   transforms.ResizeMode(c.ResizeMode),
		Pad:    uint8(c.PadValue),
		DType:  outputDType(c),
	}
	if len(c.Normalize.Mean) == 3 {
		copy(s.Mean[:], c.Normalize.Mean)
		copy(s.Std[:], c.Normalize.Std)
	}
	return s
}

// shardLayout is the fixed per-sample layout of every shard of a build;
// extraF32 is the number of float32 extras per sample.
func shardLayout(c *config.Config, extraF32 int) shard.Layout {
	l := shard.Layout{DType: outputDType(c), Width: c.TargetSize[0], Height: c.TargetSize[1], Channels: 3, MaxBoxes: c.MaxBoxes, ExtraF32: extraF32}
	if c.CompactImages {
		l.Compact, l.Pad = true, uint8(c.PadValue)
	}
	return l
}

// datasetRoot is the source root as the config spells it, cleaned and
// slash-separated: what the version key records.
func datasetRoot(c *config.Config) string {
	return filepath.ToSlash(filepath.Clean(c.Source.Root))
}

// sourceLabelKeys are the label keys the manifest records for the source.
func sourceLabelKeys(c *config.Config) []string {
	return registry.LabelKeys(c.Source.Settings)
}

// versionRecipe lists every input of the version key.
func versionRecipe(c *config.Config, extras []sources.ExtraSpec) *warehouse.Recipe {
	var r warehouse.Recipe
	floats := func(v []float64) string {
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = fmt.Sprint(f)
		}
		return strings.Join(parts, ",")
	}
	r.Set("format_version", warehouse.FormatVersion)
	r.Set("code_version", CodeVersion)
	r.Set("shard_version", uint32(shardLayout(c, 0).Version())) // what the Writer writes: 3, 4 for U8, 5 compact
	r.Set("dataset_root", datasetRoot(c))
	// The source's keys: its kind, the keys every recipe has and the ones
	// only its kind records (a key a kind does not record is absent from
	// its recipes, so adding one to another kind keeps every id).
	for _, k := range registry.RecipeKeys(c.Source.Kind, c.Source.Settings) {
		r.Set(k.Name, k.Value)
	}
	specs := make([]string, len(extras))
	for i, e := range extras {
		specs[i] = fmt.Sprintf("%s:%v:%s", e.Name, e.Shape, e.SourceDType)
	}
	r.Set("extras", strings.Join(specs, ","))
	// Builds with extras also write episodes.bin and extra_stats
	// (extras_stats.go); the key is absent without extras, so image-only
	// versions keep their ids.
	if len(extras) > 0 {
		r.Set("episodes", episodesRecipe)
	}
	r.Set("target_size", fmt.Sprintf("%dx%d", c.TargetSize[0], c.TargetSize[1]))
	r.Set("resize_mode", c.ResizeMode)
	r.Set("pad_value", c.PadValue)
	r.Set("normalize.mean", floats(c.Normalize.Mean))
	r.Set("normalize.std", floats(c.Normalize.Std))
	r.Set("dtype", c.DType)
	// Absent unless enabled, so versions built without it keep their ids.
	if c.CompactImages {
		r.Set("compact_images", true)
	}
	r.Set("max_boxes", c.MaxBoxes)
	r.Set("skip_empty", c.SkipEmpty)
	r.Set("classes", strings.Join(c.Classes, ","))
	r.Set("shard_target_bytes", c.ShardTargetBytes())
	r.Set("decoder", transforms.DecoderIdentity())
	// The Zarr store is an output only when enabled; its key is absent
	// otherwise, so versions built without it keep their ids.
	if z := c.Zarr; z.Enabled {
		r.Set("zarr", fmt.Sprintf("zstd_level=%d,shard_samples=%d", z.ZstdLevel, z.ShardSamples))
	}
	return &r
}

// classTable maps label class keys to dense indices.
type classTable struct {
	pinned  bool
	index   map[sources.ClassKey]int
	classes []warehouse.Class
}

// className is how a class key is shown and matched against a pinned list.
func className(k sources.ClassKey) string {
	switch {
	case k.Name != "":
		return k.Name
	case k.HasID:
		return fmt.Sprintf("class_%d", k.ID)
	default:
		return "object"
	}
}

func newPinnedClasses(names []string) *classTable {
	t := &classTable{pinned: true, index: map[sources.ClassKey]int{}}
	for i, n := range names {
		t.classes = append(t.classes, warehouse.Class{Index: i, Name: n})
	}
	return t
}

// newDeclaredClasses is the class table a dataset declares (COCO
// categories, YOLO names), in index order. Like a pinned table it marks a
// key it does not list unknown.
func newDeclaredClasses(keys []sources.ClassKey) *classTable {
	t := &classTable{pinned: true, index: map[sources.ClassKey]int{}}
	for i, k := range keys {
		c := warehouse.Class{Index: i, Name: className(k)}
		if k.HasID {
			id := k.ID
			c.ID = &id
		}
		t.index[k] = i
		t.classes = append(t.classes, c)
	}
	return t
}

// lookup returns the index of a key; for a pinned table a key whose name is
// not listed is unknown (ok false).
func (t *classTable) lookup(k sources.ClassKey) (int, bool) {
	if i, ok := t.index[k]; ok {
		return i, true
	}
	if !t.pinned {
		return 0, false
	}
	name := className(k)
	for _, c := range t.classes {
		if c.Name == name {
			t.index[k] = c.Index
			return c.Index, true
		}
	}
	return 0, false
}

// discoveredClasses orders keys stably: keys with a numeric id by id (then
// name), then name-only keys by name, then the unnamed default class.
func discoveredClasses(keys map[sources.ClassKey]bool) *classTable {
	list := make([]sources.ClassKey, 0, len(keys))
	for k := range keys {
		list = append(list, k)
	}
	rank := func(k sources.ClassKey) int {
		switch {
		case k.HasID:
			return 0
		case k.Name != "":
			return 1
		default:
			return 2
		}
	}
	slices.SortFunc(list, func(a, b sources.ClassKey) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		if a.ID != b.ID {
			if a.ID < b.ID {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	t := &classTable{index: map[sources.ClassKey]int{}}
	for i, k := range list {
		c := warehouse.Class{Index: i, Name: className(k)}
		if k.HasID {
			id := k.ID
			c.ID = &id
		}
		t.index[k] = i
		t.classes = append(t.classes, c)
	}
	return t
}
