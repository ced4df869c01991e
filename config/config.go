// Package config reads the pinned build configuration: a JSON file in which
// // and /* */ comments are allowed, every key is known (an unknown key is an
// error naming the key and its line) and every setting has a default.
//
// Relative paths (source.root, output_root) are resolved against the
// directory of the config file, so a pinned config builds the same version
// wherever the checkout lives; the dataset root recorded in the version
// recipe is the path as written, cleaned.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/registry"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Config is the whole build configuration. JSON names are the file's keys.
type Config struct {
	Source        Source              `json:"source"`
	TargetSize    [2]int              `json:"target_size"` // width, height
	ResizeMode    string              `json:"resize_mode"` // letterbox | stretch | none
	PadValue      int                 `json:"pad_value"`   // 0..255, every channel
	Normalize     Normalize           `json:"normalize"`
	DType         string              `json:"dtype"` // f16 | f32 | u8
	MaxBoxes      int                 `json:"max_boxes"`
	SkipEmpty     bool                `json:"skip_empty"`
	Classes       []string            `json:"classes"`         // optional pinned class list; empty = discovered
	ShardTargetMB float64             `json:"shard_target_mb"` // target shard size in MiB
	Thresholds    validate.Thresholds `json:"thresholds"`
	OutputRoot    string              `json:"output_root"`
	Workers       int                 `json:"workers"` // 0 = one per CPU
	// Partitions is the partition count of `build --partition auto` when
	// the engine does not say it (a Kubernetes Indexed Job gives only the
	// index); WAREHOUSE_PARTITIONS overrides it. 0: unset.
	Partitions int  `json:"partitions"`
	Zarr       Zarr `json:"zarr"`
	// Name names the config in its output root: its versions' pointer is
	// latest-<name>, and gc keeps --keep versions of each name
	// (outputroot/pointers.go). Not part of the version. Empty: the config
	// file's name without its extension (ConfigName).
	Name string `json:"name"`

	// CompactImages stores each u8 image as the rectangle of pixels that
	// differ from pad_value (shard_version 5, docs/format/shard.md,
	// "Compact images"): the letterbox's padding is not stored, readers
	// restore it and hand out the same tensors. u8 only; part of the
	// version when enabled.
	CompactImages bool `json:"compact_images"`

	// Path is the file the config was read from; Dir its directory.
	Path string `json:"-"`
	Dir  string `json:"-"`
}

// Source names the input layout, where it lives and the layout's own
// settings. In the file it is one object: "kind", "root" and the settings
// keys of the kind (package sources/registry lists the kinds; each kind's
// package, sources/<kind>, its Settings).
type Source struct {
	Kind string `json:"kind"` // a kind of package sources/registry; default capture
	Root string `json:"root"` // dataset root (a directory; wshard/kdb also a file or a glob; yolo also its data.yaml), relative to the config file
	// Settings are the kind's settings, decoded from the same object; nil
	// for an unknown kind.
	Settings sources.Settings `json:"-"`
}

// defaultKind is the source kind of a file that names none.
const defaultKind = capture.Kind

// Normalize is the per-channel normalization after scaling pixels to [0,1]:
// (v/255 - mean[c]) / std[c]. Both empty means v/255.
type Normalize struct {
	Mean []float64 `json:"mean"`
	Std  []float64 `json:"std"`
}

// Zarr asks a build to also write the version as a Zarr v3 store,
// warehouse.zarr in the version directory (docs/format/zarr.md). Its
// settings change the version's bytes, so they join the version recipe.
type Zarr struct {
	Enabled      bool `json:"enabled"`
	ZstdLevel    int  `json:"zstd_level"`    // 0 = inner chunks uncompressed; 1..22 = zstd level
	ShardSamples int  `json:"shard_samples"` // samples per Zarr shard; 0 = as the warehouse's shards
}

// Defaults returns the configuration every file starts from.
func Defaults() Config {
	return Config{
		Source:        Source{Kind: defaultKind, Settings: capture.NewSettings()},
		TargetSize:    [2]int{384, 384},
		ResizeMode:    "letterbox",
		PadValue:      0,
		DType:         "f16",
		MaxBoxes:      16,
		ShardTargetMB: 192,
		Thresholds:    DefaultThresholds(),
		OutputRoot:    "warehouse",
	}
}

// DefaultThresholds fail a build when more than 5% of the samples are
// invalid or missing, and warn when more than half are empty.
func DefaultThresholds() validate.Thresholds {
	ratio := func(r float64) *float64 { return &r }
	return validate.Thresholds{
		Invalid: validate.Limit{MaxRatio: ratio(0.05), Action: validate.ActionFail},
		Missing: validate.Limit{MaxRatio: ratio(0.05), Action: validate.ActionFail},
		Empty:   validate.Limit{MaxRatio: ratio(0.5), Action: validate.ActionWarn},
	}
}

// Load reads, checks and resolves a config file.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cfg.Path, cfg.Dir = abs, filepath.Dir(abs)
	return cfg, nil
}

// ConfigName is the config's name in its output root: Name, else the
// config file's base name without its extension ("demo" for demo.jsonc),
// with characters a pointer name cannot hold replaced by '_'; "" for a
// config that was not read from a file.
func (c *Config) ConfigName() string {
	if c.Name != "" || c.Path == "" {
		return c.Name
	}
	base := filepath.Base(c.Path)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	b := []byte(base)
	for i, ch := range b {
		ok := ch == '_' || ch == '-' || ch == '.' || ('0' <= ch && ch <= '9') || ('a' <= ch && ch <= 'z') || ('A' <= ch && ch <= 'Z')
		if !ok || (i == 0 && (ch == '.' || ch == '-')) {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// Parse reads config bytes over the defaults and validates the result.
func Parse(raw []byte) (*Config, error) {
	src, err := stripComments(raw)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(src, reflect.TypeFor[Config]()); err != nil {
		return nil, err
	}
	cfg := Defaults()
	// Thresholds given in the file replace the defaults as a whole per
	// category: a file that sets invalid.max_count should not silently keep
	// the default invalid.max_ratio.
	cfg.Thresholds = validate.Thresholds{}
	var probe struct {
		Thresholds *struct {
			Invalid, Missing, Empty *struct{}
		} `json:"thresholds"`
	}
	if err := decodeLoose(src, &probe); err != nil {
		return nil, err
	}
	if err := decode(src, &cfg); err != nil {
		return nil, err
	}
	otherKeys, err := decodeSourceSettings(src, &cfg.Source)
	if err != nil {
		return nil, err
	}
	def := DefaultThresholds()
	if probe.Thresholds == nil || probe.Thresholds.Invalid == nil {
		cfg.Thresholds.Invalid = def.Invalid
	}
	if probe.Thresholds == nil || probe.Thresholds.Missing == nil {
		cfg.Thresholds.Missing = def.Missing
	}
	if probe.Thresholds == nil || probe.Thresholds.Empty == nil {
		cfg.Thresholds.Empty = def.Empty
	}
	if err := errors.Join(otherKeys, cfg.Validate()); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Validate checks every setting's range and spelling.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch k, ok := registry.Lookup(c.Source.Kind); {
	case !ok:
		bad("source.kind %q: known kinds are %s", c.Source.Kind, strings.Join(registry.Names(), ", "))
	case reflect.TypeOf(c.Source.Settings) != reflect.TypeOf(k.NewSettings()):
		bad("source.kind %q: the settings are %T", c.Source.Kind, c.Source.Settings)
	default:
		if err := c.Source.Settings.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Source.Root == "" {
		bad("source.root is required")
	}
	if c.Name != "" && !warehouse.ValidConfigName(c.Name) {
		bad("name %q: %s", c.Name, warehouse.ConfigNameRule)
	}
	for i, v := range c.TargetSize {
		if v < 1 || v > 16384 {
			bad("target_size[%d] = %d: must be 1..16384", i, v)
		}
	}
	if !slices.Contains([]string{"letterbox", "stretch", "none"}, c.ResizeMode) {
		bad("resize_mode %q: must be letterbox, stretch or none", c.ResizeMode)
	}
	if c.PadValue < 0 || c.PadValue > 255 {
		bad("pad_value %d: must be 0..255", c.PadValue)
	}
	if n := len(c.Normalize.Mean) + len(c.Normalize.Std); n != 0 {
		if len(c.Normalize.Mean) != 3 || len(c.Normalize.Std) != 3 {
			bad("normalize.mean and normalize.std must both have 3 values (R, G, B) or both be omitted")
		} else {
			for i := range 3 {
				m, s := c.Normalize.Mean[i], c.Normalize.Std[i]
				if math.IsNaN(m) || math.IsInf(m, 0) || !(s > 0) || math.IsInf(s, 0) {
					bad("normalize channel %d: mean must be finite and std finite and > 0", i)
				}
			}
		}
	}
	if c.DType != "f16" && c.DType != "f32" && c.DType != "u8" {
		bad("dtype %q: must be f16, f32 or u8", c.DType)
	}
	if c.CompactImages && c.DType != "u8" {
		bad("compact_images: needs dtype u8, not %q", c.DType)
	}
	if c.MaxBoxes < 1 || c.MaxBoxes > 4096 {
		bad("max_boxes %d: must be 1..4096", c.MaxBoxes)
	}
	if !(c.ShardTargetMB > 0) || c.ShardTargetMB > 1<<20 {
		bad("shard_target_mb %v: must be > 0 and at most 1048576", c.ShardTargetMB)
	}
	if c.Partitions < 0 || c.Partitions > 100000 {
		bad("partitions %d: must be 0 (unset) to 100000", c.Partitions)
	}
	if c.Workers < 0 || c.Workers > 1024 {
		bad("workers %d: must be 0 (one per CPU) to 1024", c.Workers)
	}
	if c.OutputRoot == "" {
		bad("output_root must not be empty")
	}
	// The limits of package zarr (MaxZstdLevel, MaxChunksPerShard).
	if c.Zarr.ZstdLevel < 0 || c.Zarr.ZstdLevel > 22 {
		bad("zarr.zstd_level %d: must be 0 (uncompressed) to 22", c.Zarr.ZstdLevel)
	}
	if c.Zarr.ShardSamples < 0 || c.Zarr.ShardSamples > 1<<20 {
		bad("zarr.shard_samples %d: must be 0 (as the warehouse's shards) to 1048576", c.Zarr.ShardSamples)
	}
	seen := map[string]bool{}
	for _, name := range c.Classes {
		if name == "" || seen[name] {
			bad("classes: %q is empty or repeated", name)
		}
		seen[name] = true
	}
	if err := c.Thresholds.Validate(); err != nil {
		bad("thresholds: %v", err)
	}
	return errors.Join(errs...)
}

// ShardTargetBytes is the shard size target in bytes.
func (c *Config) ShardTargetBytes() int64 { return int64(c.ShardTargetMB * (1 << 20)) }

// WorkerCount resolves workers = 0 to the number of usable CPUs.
func (c *Config) WorkerCount() int {
	if c.Workers > 0 {
		return c.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Resolve turns a path from the config into one usable from the process's
// working directory: relative paths are relative to the config file.
func (c *Config) Resolve(p string) string {
	if strings.HasPrefix(p, "s3://") {
		return p // an object store location (output_root), not a path
	}
	if filepath.IsAbs(p) || c.Dir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(c.Dir, p)
}
