package coco

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"warehouse-etl/sources"
)

// Settings are the config's settings of a COCO source; the config's
// source.root is the directory images[].file_name is relative to.
type Settings struct {
	// Annotations is the instances JSON file, relative to the config file.
	// Required.
	Annotations string `json:"annotations"`
}

// NewSettings returns the default settings (no annotations file: one must
// be given).
func NewSettings() sources.Settings { return &Settings{} }

// Validate checks that the annotations file is named.
func (s *Settings) Validate() error {
	if s.Annotations == "" {
		return errors.New("source.annotations: required for coco sources and for them only")
	}
	return nil
}

// RecipeKeys records the annotations file as written, cleaned and
// slash-separated; its content is in the source fingerprint.
func (s *Settings) RecipeKeys() []sources.RecipeKey {
	return []sources.RecipeKey{{Name: "annotations", Value: filepath.ToSlash(filepath.Clean(s.Annotations))}}
}

// Open reads the annotations file; root, the image root, must be a
// directory.
func (s *Settings) Open(root string, resolve func(string) string, log *slog.Logger) (sources.Source, error) {
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("source.root %s: not a readable directory", root)
	}
	src, err := New(resolve(s.Annotations), root, Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return src, nil
}
