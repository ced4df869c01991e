// Package registry lists the source kinds: the packages under sources/ that
// each read one input layout, by their Kind. Everything that depends on the
// kind follows from this list: the kinds the config accepts, the settings
// its "source" object is decoded into and checked by, how the source is
// opened, and the source keys of the version recipe.
//
// A new source is one package that exports Kind, a Settings type
// implementing sources.Settings and NewSettings, plus its line in kinds.
package registry

import (
	"slices"

	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/coco"
	"warehouse-etl/sources/kdb"
	"warehouse-etl/sources/roverd"
	"warehouse-etl/sources/wshard"
	"warehouse-etl/sources/yolo"
)

// Kind is one source kind.
type Kind struct {
	Name string // the config's source.kind
	// NewSettings returns the kind's settings with their defaults.
	NewSettings func() sources.Settings
	// Layout says in words what a root of this kind holds, for the error
	// of a root that yields no samples.
	Layout string
}

// kinds are every source kind, in the order the config's error names them.
var kinds = []Kind{
	{capture.Kind, capture.NewSettings, "run folders, each with labels/*.json naming images in the run folder"},
	{coco.Kind, coco.NewSettings, "the images that source.annotations (a COCO instances JSON) lists, under the root"},
	{yolo.Kind, yolo.NewSettings, "data.yaml, images/<split>/ and labels/<split>/*.txt (or the split's image list)"},
	{kdb.Kind, kdb.NewSettings, "*.kdb files with at least one episode"},
	{wshard.Kind, wshard.NewSettings, "*.wshard episode files (or a glob or file naming them)"},
	{roverd.Kind, roverd.NewSettings, "dataset folders whose sensor folders hold meta.json and the camera's frames"},
}

// Kinds returns every source kind.
func Kinds() []Kind { return slices.Clone(kinds) }

// Names returns the name of every source kind.
func Names() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return names
}

// Lookup returns the kind called name.
func Lookup(name string) (Kind, bool) {
	i := slices.IndexFunc(kinds, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return kinds[i], true
}

// commonKeys are the source keys every version recipe has, whatever its
// kind: recipes were first written from one source config that gave every
// kind every setting, and keeping the keys keeps every version id. A kind
// without one of these settings records it as the default settings of the
// first kind that has it record it (commonValues).
var commonKeys = []string{"label_keys", "camera", "extras", "tolerance_ms", "include_underscore"}

var commonValues = func() map[string]string {
	values := map[string]string{}
	for _, k := range kinds {
		for _, rk := range k.NewSettings().RecipeKeys() {
			if _, seen := values[rk.Name]; !seen && slices.Contains(commonKeys, rk.Name) {
				values[rk.Name] = rk.Value
			}
		}
	}
	return values
}()

// RecipeKeys are the source keys of the version recipe of a source of kind
// with settings s, "source." prefixed: the kind, every common key, and the
// keys only some kinds record.
func RecipeKeys(kind string, s sources.Settings) []sources.RecipeKey {
	own := s.RecipeKeys()
	keys := []sources.RecipeKey{{Name: "source.kind", Value: kind}}
	for _, name := range commonKeys {
		v := commonValues[name]
		if i := slices.IndexFunc(own, func(rk sources.RecipeKey) bool { return rk.Name == name }); i >= 0 {
			v = own[i].Value
		}
		keys = append(keys, sources.RecipeKey{Name: "source." + name, Value: v})
	}
	for _, rk := range own {
		if !slices.Contains(commonKeys, rk.Name) {
			keys = append(keys, sources.RecipeKey{Name: "source." + rk.Name, Value: rk.Value})
		}
	}
	return keys
}

// LabelKeys are the label keys the manifest records for a source with
// settings s: a capture source's own, and capture's default for every
// other kind (as the recipe's label_keys).
func LabelKeys(s sources.Settings) []string {
	c, ok := s.(*capture.Settings)
	if !ok {
		c = capture.NewSettings().(*capture.Settings)
	}
	return c.LabelKeys
}
