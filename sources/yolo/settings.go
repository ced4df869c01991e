package yolo

import (
	"fmt"
	"log/slog"
	"slices"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a YOLO source; the config's
// source.root is the folder with data.yaml, or the yaml file itself.
type Settings struct {
	// Split is the split read: train, val or test; "" is train.
	Split string `json:"split"`
}

// NewSettings returns the default settings.
func NewSettings() sources.Settings { return &Settings{} }

// Validate checks the split, and makes "" train.
func (s *Settings) Validate() error {
	if s.Split == "" {
		s.Split = "train"
	}
	if !slices.Contains([]string{"train", "val", "test"}, s.Split) {
		return fmt.Errorf("source.split %q: must be train, val or test", s.Split)
	}
	return nil
}

// RecipeKeys records the split.
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	return []sources.RecipeKey{{Name: "split", Value: s.Split}}
}

// Open reads the dataset's data.yaml.
func (s *Settings) Open(root string, _ func(string) string, log *slog.Logger) (sources.Source, error) {
	src, err := New(root, Options{Split: s.Split, Logger: log})
	if err != nil {
		return nil, err
	}
	return src, nil
}
