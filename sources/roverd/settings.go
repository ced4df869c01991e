package roverd

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a roverd source; the config's
// source.root is a folder of datasets, or one dataset.
type Settings struct {
	// Camera is the camera sensor, "sensor" or "sensor/channel"; "" is
	// DefaultCamera.
	Camera string `json:"camera"`
	// Extras are the channels carried per sample as f32 tensors, each
	// "sensor/channel", e.g. "imu/acc".
	Extras []string `json:"extras"`
	// ToleranceMs is the largest distance in time, in milliseconds, when
	// joining another sensor's record to a frame. Default 50.
	ToleranceMs float64 `json:"tolerance_ms"`
	// IncludeUnderscore also reads folders whose name starts with "_".
	IncludeUnderscore bool `json:"include_underscore"`
}

// NewSettings returns the default settings.
func NewSettings() sources.Settings { return &Settings{ToleranceMs: 50} }

// Validate checks the extras and the tolerance.
func (s *Settings) Validate() error {
	err := sources.ValidateExtras(s.Extras)
	if s.ToleranceMs < 0 || math.IsNaN(s.ToleranceMs) || math.IsInf(s.ToleranceMs, 0) {
		err = errors.Join(err, fmt.Errorf("source.tolerance_ms %v: must be finite and >= 0", s.ToleranceMs))
	}
	return err
}

// RecipeKeys records every setting.
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	return append(sources.EpisodeRecipeKeys(s.Camera, s.Extras),
		sources.RecipeKey{Name: "tolerance_ms", Value: fmt.Sprint(s.ToleranceMs)},
		sources.RecipeKey{Name: "include_underscore", Value: fmt.Sprint(s.IncludeUnderscore)})
}

// Open lists the datasets under root.
func (s *Settings) Open(root string, _ func(string) string, log *slog.Logger) (sources.Source, error) {
	src, err := New(root, Options{Camera: s.Camera, Extras: s.Extras, ToleranceMs: s.ToleranceMs,
		IncludeUnderscore: s.IncludeUnderscore, Logger: log})
	if err != nil {
		return nil, err
	}
	return src, nil
}
