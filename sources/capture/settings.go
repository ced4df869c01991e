package capture

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a capture source.
type Settings struct {
	// LabelKeys name the label list in a label file; the first key present
	// wins. Default ["polyp_labels", "labels"].
	LabelKeys []string `json:"label_keys"`
}

// NewSettings returns the default settings.
func NewSettings() sources.Settings {
	return &Settings{LabelKeys: slices.Clone(defaultLabelKeys)}
}

// Validate checks that at least one label key is named.
func (s *Settings) Validate() error {
	if len(s.LabelKeys) == 0 {
		return errors.New("source.label_keys must name at least one key")
	}
	return nil
}

// RecipeKeys records the label keys, comma-separated.
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	return []sources.RecipeKey{{Name: "label_keys", Value: strings.Join(s.LabelKeys, ",")}}
}

// Open returns the capture source at root, which must be a directory.
func (s *Settings) Open(root string, _ func(string) string, _ *slog.Logger) (sources.Source, error) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("source.root %s: not a readable directory", root)
	}
	src, err := New(root, Options{LabelKeys: s.LabelKeys})
	if err != nil {
		return nil, err
	}
	return src, nil
}
