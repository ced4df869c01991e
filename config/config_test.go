package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/yolo"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unknown top-level key", "{\n  \"source\": {\"root\": \"x\"},\n  \"resize\": \"letterbox\"\n}", `line 3: unknown key "resize" at the top level`},
		{"unknown nested key", "{\n\"source\": {\n  \"root\": \"x\",\n  \"kindd\": \"capture\"}}", `line 4: unknown key "kindd" in source`},
		{"unknown threshold key", "{\"source\": {\"root\": \"x\"},\n\"thresholds\": {\"invalid\": {\n\"max\": 3}}}", `line 3: unknown key "max" in thresholds.invalid`},
		{"wrong type", "{\"source\": {\"root\": \"x\"},\n\n\"max_boxes\": \"many\"}", `line 3: max_boxes: expected int, got JSON string`},
		{"syntax error", "{\"source\": {\"root\": \"x\"},\n\"dtype\": x16}", `line 2: invalid character 'x' looking for beginning of value`},
		{"unterminated comment", "{\n/* never closed\n", `line 2: unterminated /* comment`},
		{"trailing comma in object", "{\n  \"source\": {\"root\": \"x\"},\n  \"dtype\": \"f16\",\n}", "line 3: trailing comma before } at line 4: JSON allows none, remove it (invalid character '}' looking for beginning of object key string)"},
		{"trailing comma in array", "{\"source\": {\"root\": \"x\"},\n\"target_size\": [64, 48,\n]}", "line 2: trailing comma before ] at line 3: JSON allows none, remove it (invalid character ']' looking for beginning of value)"},
		{"trailing comma before a comment", "{\"source\": {\"root\": \"x\", // the root\n/* done */ }}", "line 1: trailing comma before } at line 2: JSON allows none"},
		{"comma not trailing", "{\"source\": {\"root\": \"x\"},\n\"dtype\": }", "line 2: invalid character '}' looking for beginning of value"},
		{"trailing data", "{\"source\": {\"root\": \"x\"}} {}", `unexpected data after the top-level object`},
		{"missing root", `{}`, `source.root is required`},
		{"bad dtype", `{"source": {"root": "x"}, "dtype": "bf16"}`, `dtype "bf16": must be f16, f32 or u8`},
		{"compact f16", `{"source": {"root": "x"}, "compact_images": true}`, `compact_images: needs dtype u8, not "f16"`},
		{"bad mode", `{"source": {"root": "x"}, "resize_mode": "crop"}`, `resize_mode "crop"`},
		{"bad size", `{"source": {"root": "x"}, "target_size": [0, 10]}`, `target_size[0] = 0`},
		{"bad pad", `{"source": {"root": "x"}, "pad_value": 256}`, `pad_value 256`},
		{"half normalize", `{"source": {"root": "x"}, "normalize": {"mean": [0.5, 0.5, 0.5]}}`, `normalize.mean and normalize.std must both have 3 values`},
		{"zero std", `{"source": {"root": "x"}, "normalize": {"mean": [0, 0, 0], "std": [1, 0, 1]}}`, `normalize channel 1`},
		{"bad kind", `{"source": {"kind": "voc", "root": "x"}}`, `source.kind "voc": known kinds are capture, coco, yolo, kdb, wshard, roverd`},
		{"coco without annotations", `{"source": {"kind": "coco", "root": "x"}}`, `source.annotations: required for coco sources and for them only`},
		{"annotations on capture", `{"source": {"root": "x", "annotations": "a.json"}}`, `source.annotations: required for coco sources and for them only`},
		{"split on coco", `{"source": {"kind": "coco", "root": "x", "annotations": "a.json", "split": "val"}}`, `source.split applies to yolo sources only`},
		{"bad split", `{"source": {"kind": "yolo", "root": "x", "split": "training"}}`, `source.split "training": must be train, val or test`},
		{"extras on yolo", `{"source": {"kind": "yolo", "root": "x", "extras": ["a"]}}`, `source.camera and source.extras apply to episode sources, not yolo`},
		{"repeated class", `{"source": {"root": "x"}, "classes": ["a", "a"]}`, `classes: "a" is empty or repeated`},
		{"bad shard size", `{"source": {"root": "x"}, "shard_target_mb": 0}`, `shard_target_mb 0`},
		{"boxes on capture", `{"source": {"root": "x", "boxes": "label/boxes"}}`, `source.boxes and source.box_classes apply to wshard sources only`},
		{"classes without boxes", `{"source": {"kind": "wshard", "root": "x", "box_classes": "label/cls"}}`, `source.box_classes needs source.boxes`},
		{"source keys known", `{"source": {"root": "x", "kindd": 1}}`, `(known: annotations, box_classes, boxes, camera, extras, include_underscore, kind, label_keys, root, split, tolerance_ms)`},
		{"label keys on coco", `{"source": {"kind": "coco", "root": "x", "annotations": "a.json", "label_keys": ["z"]}}`, `source.label_keys applies to capture sources only`},
		{"tolerance on kdb", `{"source": {"kind": "kdb", "root": "x", "tolerance_ms": 10}}`, `source.tolerance_ms applies to roverd sources only`},
		{"wrong type, another kind's key", "{\"source\": {\"root\": \"x\",\n\"tolerance_ms\": \"5\"}}", `line 2: source.tolerance_ms: expected float64, got JSON string`},
		{"wrong type, own key", "{\"source\": {\"kind\": \"roverd\", \"root\": \"x\",\n\"extras\": [1]}}", `line 2: source.extras: expected string, got JSON number`},
		{"bad extras", `{"source": {"kind": "roverd", "root": "x", "extras": ["a", "a"]}}`, `source.extras: "a" is empty or repeated`},
		{"bad tolerance", `{"source": {"kind": "roverd", "root": "x", "tolerance_ms": -1}}`, `source.tolerance_ms -1: must be finite and >= 0`},
		{"no label keys", `{"source": {"root": "x", "label_keys": []}}`, `source.label_keys must name at least one key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// A key of another kind than the file's is accepted when it holds that
// kind's default: it changed nothing, neither the source nor the version
// recipe, before each kind had its own settings.
func TestOtherKindsDefaults(t *testing.T) {
	for _, src := range []string{
		`{"source": {"root": "x", "camera": "", "extras": [], "annotations": "", "split": "", "boxes": "", "box_classes": ""}}`,
		`{"source": {"kind": "kdb", "root": "x", "label_keys": ["polyp_labels", "labels"], "tolerance_ms": 50, "include_underscore": false}}`,
	} {
		if _, err := Parse([]byte(src)); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
}

func TestParseDefaultsAndComments(t *testing.T) {
	src := `// leading comment
{
  "source": {"root": "data"}, // trailing comment with "quotes" and /* */
  /* block
     comment */
  "dtype": "f32",
  "classes": ["a // not a comment", "b /* nor this */"]
}`
	cfg, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DType != "f32" || cfg.TargetSize != [2]int{384, 384} || cfg.ResizeMode != "letterbox" || cfg.MaxBoxes != 16 ||
		cfg.ShardTargetMB != 192 || cfg.OutputRoot != "warehouse" || cfg.Source.Kind != "capture" {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if got := strings.Join(cfg.Classes, "|"); got != "a // not a comment|b /* nor this */" {
		t.Fatalf("comment stripping touched strings: %q", got)
	}
	if got := strings.Join(cfg.Source.Settings.(*capture.Settings).LabelKeys, ","); got != "polyp_labels,labels" {
		t.Fatalf("label keys default %q", got)
	}
	if cfg.ShardTargetBytes() != 192<<20 {
		t.Fatalf("ShardTargetBytes = %d", cfg.ShardTargetBytes())
	}
	d := DefaultThresholds()
	if *cfg.Thresholds.Invalid.MaxRatio != *d.Invalid.MaxRatio || cfg.Thresholds.Empty.Action != d.Empty.Action {
		t.Fatalf("default thresholds not applied: %+v", cfg.Thresholds)
	}
}

// A category spelled out in the file replaces that category's defaults
// whole; categories left out keep theirs.
func TestThresholdsReplacePerCategory(t *testing.T) {
	cfg, err := Parse([]byte(`{"source": {"root": "x"}, "thresholds": {"invalid": {"max_count": 3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	inv := cfg.Thresholds.Invalid
	if inv.MaxCount == nil || *inv.MaxCount != 3 || inv.MaxRatio != nil {
		t.Fatalf("invalid = %+v, want max_count 3 and no ratio", inv)
	}
	if cfg.Thresholds.Missing.MaxRatio == nil || *cfg.Thresholds.Missing.MaxRatio != 0.05 {
		t.Fatalf("missing lost its default: %+v", cfg.Thresholds.Missing)
	}
}

func TestLoadResolvesRelativeToConfigFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "configs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "c.jsonc")
	if err := os.WriteFile(path, []byte(`{"source": {"root": "../data"}, "output_root": "/abs/out"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Resolve(cfg.Source.Root), filepath.Join(dir, "data"); got != want {
		t.Fatalf("root resolves to %s, want %s", got, want)
	}
	if got := cfg.Resolve(cfg.OutputRoot); got != "/abs/out" {
		t.Fatalf("absolute output_root resolves to %s", got)
	}
}

func TestDemoConfigParses(t *testing.T) {
	cfg, err := Load("../configs/demo.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source.Root != "../testdata/capture" {
		t.Fatalf("demo root %q", cfg.Source.Root)
	}
}

// A yolo source reads the train split unless the config names another.
func TestYOLOSplitDefault(t *testing.T) {
	for src, want := range map[string]string{
		`{"source": {"kind": "yolo", "root": "x"}}`:                          "train",
		`{"source": {"kind": "yolo", "root": "x", "split": "val"}}`:          "val",
		`{"source": {"kind": "coco", "root": "x", "annotations": "a.json"}}`: "",
	} {
		c, err := Parse([]byte(src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		split := ""
		if y, ok := c.Source.Settings.(*yolo.Settings); ok {
			split = y.Split
		}
		if split != want {
			t.Errorf("%s: split %q; want %q", src, split, want)
		}
	}
}
