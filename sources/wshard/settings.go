package wshard

import (
	"errors"
	"log/slog"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a wshard source; the config's
// source.root is a directory (read recursively), one .wshard file or a
// glob.
type Settings struct {
	// Camera is the image channel, a block name or a channel id; "" is
	// the first rgb channel.
	Camera string `json:"camera"`
	// Extras are the channels carried per sample as f32 tensors, in this
	// order, e.g. "action/ctrl", "reward".
	Extras []string `json:"extras"`
	// Boxes is the label channel of per-step [K,4] pixel boxes; "" means
	// no boxes.
	Boxes string `json:"boxes"`
	// BoxClasses is the channel of per-step [K] class ids for Boxes.
	BoxClasses string `json:"box_classes"`
}

// NewSettings returns the default settings.
func NewSettings() sources.Settings { return &Settings{} }

// Validate checks the extras and that box classes come with boxes.
func (s *Settings) Validate() error {
	err := sources.ValidateExtras(s.Extras)
	if s.BoxClasses != "" && s.Boxes == "" {
		err = errors.Join(err, errors.New("source.box_classes needs source.boxes"))
	}
	return err
}

// RecipeKeys records the camera and extras, and the box channels when
// there are boxes (a version without them has no such key).
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	keys := sources.EpisodeRecipeKeys(s.Camera, s.Extras)
	if s.Boxes != "" {
		keys = append(keys, sources.RecipeKey{Name: "boxes", Value: s.Boxes + "|" + s.BoxClasses})
	}
	return keys
}

// Open lists the dataset's episodes.
func (s *Settings) Open(root string, _ func(string) string, log *slog.Logger) (sources.Source, error) {
	src, err := New(root, Options{Camera: s.Camera, Extras: s.Extras, Boxes: s.Boxes, BoxClasses: s.BoxClasses, Logger: log})
	if err != nil {
		return nil, err
	}
	return src, nil
}
