package sources

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// Settings are one source kind's settings in the build config: the keys of
// the config's "source" object besides "kind" and "root", decoded into the
// kind's own struct (its json tags are the keys). Each source package
// exports a Kind name and a NewSettings that returns its Settings with their
// defaults; package sources/registry lists them.
type Settings interface {
	// Validate checks the settings; every error names its key as the
	// config does ("source.split ..."). It may fill in a default that
	// depends on another setting.
	Validate() error
	// RecipeKeys are what the settings add to the version recipe, each
	// key without its "source." prefix. Keys absent here and present in
	// every recipe take sources/registry's common values.
	RecipeKeys() []RecipeKey
	// Open returns the source at root, the dataset root already resolved;
	// resolve turns any other path of the config into a usable one
	// (relative paths are relative to the config file). Warnings go to
	// log. A source that holds files open implements io.Closer.
	Open(root string, resolve func(path string) string, log *slog.Logger) (Source, error)
}

// RecipeKey is one source key of the version recipe and its value as the
// recipe records it.
type RecipeKey struct {
	Name, Value string
}

// ValidateExtras reports every extra of an episode source's settings that
// is empty or repeated.
func ValidateExtras(extras []string) error {
	var errs []error
	for i, x := range extras {
		if x == "" || slices.Contains(extras[:i], x) {
			errs = append(errs, fmt.Errorf("source.extras: %q is empty or repeated", x))
		}
	}
	return errors.Join(errs...)
}

// EpisodeRecipeKeys are the recipe keys every episode source (kdb, wshard,
// roverd) records: its camera and its extras, comma-separated.
func EpisodeRecipeKeys(camera string, extras []string) []RecipeKey {
	return []RecipeKey{{Name: "camera", Value: camera}, {Name: "extras", Value: strings.Join(extras, ",")}}
}
