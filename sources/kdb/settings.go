package kdb

import (
	"log/slog"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a kdb source; the config's
// source.root is a .kdb file, a directory of them or a glob.
type Settings struct {
	// Camera is the camera whose frames become samples; "" is the first
	// camera of the first frame.
	Camera string `json:"camera"`
	// Extras are the per-frame fields carried as f32 tensors, in this
	// order: any of Fields.
	Extras []string `json:"extras"`
}

// NewSettings returns the default settings.
func NewSettings() sources.Settings { return &Settings{} }

// Validate checks the extras.
func (s *Settings) Validate() error { return sources.ValidateExtras(s.Extras) }

// RecipeKeys records the camera and the extras.
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	return sources.EpisodeRecipeKeys(s.Camera, s.Extras)
}

// Open opens every file of the dataset.
func (s *Settings) Open(root string, _ func(string) string, log *slog.Logger) (sources.Source, error) {
	src, err := New(root, Options{Camera: s.Camera, Extras: s.Extras, Logger: log})
	if err != nil {
		return nil, err
	}
	return src, nil
}
