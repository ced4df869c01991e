package registry

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/coco"
	"warehouse-etl/sources/wshard"
)

// The config's error for an unknown kind lists the kinds in this order.
func TestNames(t *testing.T) {
	if got := strings.Join(Names(), ", "); got != "capture, coco, yolo, kdb, wshard, roverd" {
		t.Fatalf("Names() = %s", got)
	}
	for _, name := range Names() {
		if k, ok := Lookup(name); !ok || k.Name != name {
			t.Errorf("Lookup(%q) = %v, %v", name, k, ok)
		}
	}
	if _, ok := Lookup("voc"); ok {
		t.Error("Lookup(voc) found a kind")
	}
}

// Every call of NewSettings returns settings of their own, and a key two
// kinds share has one type (the config checks keys against all kinds).
func TestSettings(t *testing.T) {
	keys := map[string]reflect.Type{}
	for _, k := range Kinds() {
		a, b := k.NewSettings(), k.NewSettings()
		if reflect.ValueOf(a).Kind() != reflect.Pointer || reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() {
			t.Errorf("%s: NewSettings does not return a new pointer", k.Name)
		}
		st := reflect.TypeOf(a).Elem()
		for _, f := range reflect.VisibleFields(st) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || name == "kind" || name == "root" {
				t.Errorf("%s: field %s has JSON key %q", k.Name, f.Name, name)
				continue
			}
			if prev, ok := keys[name]; ok && prev != f.Type {
				t.Errorf("%s: key %s is %v, another kind's is %v", k.Name, name, f.Type, prev)
			}
			keys[name] = f.Type
		}
	}
}

// The source keys of the recipe of each kind's defaults, and of settings
// that differ from them: every recipe has the five common keys, as the
// recipes of versions built before the registry have them.
func TestRecipeKeys(t *testing.T) {
	const common = "source.label_keys=polyp_labels,labels source.camera= source.extras= source.tolerance_ms=50 source.include_underscore=false"
	encode := func(keys []sources.RecipeKey) string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, k.Name+"="+k.Value)
		}
		return strings.Join(parts, " ")
	}
	want := map[string]string{
		"capture": "source.kind=capture " + common,
		"coco":    "source.kind=coco " + common + " source.annotations=.",
		"yolo":    "source.kind=yolo " + common + " source.split=",
		"kdb":     "source.kind=kdb " + common,
		"wshard":  "source.kind=wshard " + common,
		"roverd":  "source.kind=roverd " + common,
	}
	for _, k := range Kinds() {
		if got := encode(RecipeKeys(k.Name, k.NewSettings())); got != want[k.Name] {
			t.Errorf("%s: RecipeKeys = %s\nwant %s", k.Name, got, want[k.Name])
		}
	}
	c := &capture.Settings{LabelKeys: []string{"a", "b"}}
	if got := encode(RecipeKeys("capture", c)); !strings.Contains(got, "source.label_keys=a,b ") {
		t.Errorf("capture: %s", got)
	}
	w := &wshard.Settings{Camera: "cam", Extras: []string{"x", "y"}, Boxes: "b", BoxClasses: "c"}
	if got := encode(RecipeKeys("wshard", w)); got != "source.kind=wshard source.label_keys=polyp_labels,labels source.camera=cam source.extras=x,y source.tolerance_ms=50 source.include_underscore=false source.boxes=b|c" {
		t.Errorf("wshard: %s", got)
	}
	a := &coco.Settings{Annotations: "./a/../ann.json"}
	if got := RecipeKeys("coco", a); !slices.Contains(got, sources.RecipeKey{Name: "source.annotations", Value: "ann.json"}) {
		t.Errorf("coco: %v", got)
	}
}

func TestLabelKeys(t *testing.T) {
	if got := LabelKeys(&capture.Settings{LabelKeys: []string{"x"}}); !slices.Equal(got, []string{"x"}) {
		t.Errorf("capture: %v", got)
	}
	if got := LabelKeys(&coco.Settings{Annotations: "a.json"}); !slices.Equal(got, []string{"polyp_labels", "labels"}) {
		t.Errorf("coco: %v", got)
	}
}
