package capture

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"warehouse-etl/sources"
	"warehouse-etl/warehouse"
)

// Fingerprint calls fn for the files of every run, runs in natural order,
// and within a run:
//
//  1. run_manifest.json, if it is a regular file;
//  2. every regular file directly in labels/, by name (byte order);
//  3. every regular file directly in images/, by name;
//  4. every other file a label names as its image (inside the run, not
//     listed in step 3: in a sub-folder, elsewhere in the run, or reached
//     through a symbolic link, which Scan follows), by path.
//
// Step 4 reads the labels again so that the fingerprint covers every file
// Scan reads. overlays/ and anything else in a run are not listed.
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	runs, err := s.runs()
	if err != nil {
		return err
	}
	for _, run := range runs {
		if err := s.fingerprintRun(ctx, run, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) fingerprintRun(ctx context.Context, run string, fn func(warehouse.FileEntry) error) error {
	emit := func(rel string, st fs.FileInfo) error {
		return fn(warehouse.FileEntry{Path: rel, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()})
	}
	runDir := filepath.Join(s.root, run)
	st, err := os.Lstat(filepath.Join(runDir, "run_manifest.json"))
	switch {
	case err == nil && st.Mode().IsRegular():
		if err := emit(path.Join(run, "run_manifest.json"), st); err != nil {
			return err
		}
	case err == nil || sources.NotFound(err):
	default:
		return fmt.Errorf("capture: fingerprint %s: %w", run, err)
	}

	var labels []string         // the labels to read for step 4, by name
	listed := map[string]bool{} // images listed in step 3, relative to the run
	for _, sub := range []string{"labels", "images"} {
		entries, err := os.ReadDir(filepath.Join(runDir, sub))
		if err != nil {
			if sub == "images" && sources.NotFound(err) {
				continue
			}
			return fmt.Errorf("capture: fingerprint %s/%s: %w", run, sub, err)
		}
		// os.ReadDir sorts by name.
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			// A label that is a symbolic link is a (path_escape) sample:
			// listed as the link itself, never followed.
			labelLink := sub == "labels" && isLabelName(e.Name()) && !e.IsDir() && !e.Type().IsRegular()
			if !e.Type().IsRegular() && !labelLink {
				continue
			}
			info, err := e.Info()
			if err != nil {
				return fmt.Errorf("capture: fingerprint %s/%s/%s: %w", run, sub, e.Name(), err)
			}
			if err := emit(path.Join(run, sub, e.Name()), info); err != nil {
				return err
			}
			switch {
			case sub == "images":
				listed[path.Join(sub, e.Name())] = true
			case labelLink:
			case isLabelName(e.Name()):
				labels = append(labels, e.Name())
			}
		}
	}
	named, err := s.namedImages(ctx, run, labels)
	if err != nil {
		return err
	}
	slices.Sort(named)
	for _, img := range slices.Compact(named) {
		if listed[img] {
			continue
		}
		st, err := os.Stat(filepath.Join(runDir, filepath.FromSlash(img)))
		switch {
		case err == nil && st.Mode().IsRegular():
			if err := emit(path.Join(run, img), st); err != nil {
				return err
			}
		case err == nil || sources.NotFound(err):
		default:
			return fmt.Errorf("capture: fingerprint %s/%s: %w", run, img, err)
		}
	}
	return nil
}

// namedImages reads the labels of run (names in labels/) in a pool of
// GOMAXPROCS goroutines and returns the image paths they name (namedImage),
// in no particular order; an error names the first label, in name order,
// that could not be read.
func (s *Source) namedImages(ctx context.Context, run string, labels []string) ([]string, error) {
	imgs := make([]string, len(labels))
	err := sources.EachIndex(ctx, len(labels), func(i int) error {
		img, err := s.namedImage(filepath.Join(s.root, run, "labels", labels[i]))
		if err != nil {
			return fmt.Errorf("capture: fingerprint %s/labels/%s: %w", run, labels[i], err)
		}
		imgs[i] = img
		return nil
	})
	if err != nil {
		return nil, err
	}
	named := imgs[:0]
	for _, img := range imgs {
		if img != "" {
			named = append(named, img)
		}
	}
	return named, nil
}

// namedImage returns the cleaned image path a label names, relative to its
// run, or "" when it names none that Scan would read.
func (s *Source) namedImage(labelPath string) (string, error) {
	data, tooBig, err := sources.ReadCapped(labelPath, s.opts.MaxLabelBytes)
	if err != nil || tooBig {
		return "", err
	}
	l := parseLabel(data, s.opts.LabelKeys)
	img, local := l.localImage()
	if !l.imagePresent || !local {
		return "", nil
	}
	return img, nil
}
