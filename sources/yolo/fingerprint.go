package yolo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"warehouse-etl/sources"
	"warehouse-etl/warehouse"
)

// Fingerprint calls fn for every file Scan reads:
//
//  1. data.yaml, with the SHA-256 of its content (its path starts with
//     "../" when the YAML's path key points elsewhere);
//  2. each list file of the split, in YAML order, with its SHA-256 (an
//     edit that reorders or swaps lines keeps the size);
//  3. for each sample in scan order, its image and then its label file,
//     when they are regular files (following symbolic links).
//
// Paths are relative to the dataset root and listed once each (an image
// that is a sample twice, or a list file named twice, is listed at its
// first place).
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	listed := map[string]bool{}
	once := func(rel string) bool {
		if listed[rel] {
			return false
		}
		listed[rel] = true
		return true
	}
	yamlRel, err := filepath.Rel(s.root, s.yamlPath)
	if err != nil {
		return fmt.Errorf("yolo: fingerprint %s: %w", s.yamlPath, err)
	}
	if err := hashed(s.yamlPath, filepath.ToSlash(yamlRel), fn); err != nil {
		return err
	}
	once(filepath.ToSlash(yamlRel))
	for _, e := range s.entries {
		if e.list && once(e.name) {
			if err := hashed(e.abs, e.name, fn); err != nil {
				return err
			}
		}
	}
	for _, e := range s.entries {
		imgs, err := s.images(ctx, e, &entryStats{})
		if err != nil {
			return err
		}
		for _, img := range imgs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if img.escape {
				continue
			}
			for _, rel := range []string{img.rel, labelPath(img.rel)} {
				if !once(rel) {
					continue
				}
				st, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(rel)))
				switch {
				case err == nil && st.Mode().IsRegular():
					if err := fn(warehouse.FileEntry{Path: rel, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}); err != nil {
						return err
					}
				case err == nil || sources.NotFound(err):
				default:
					return fmt.Errorf("yolo: fingerprint %s: %w", rel, err)
				}
			}
		}
	}
	return nil
}

// hashed calls fn for one file with the SHA-256 of its content.
func hashed(abs, rel string, fn func(warehouse.FileEntry) error) error {
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("yolo: fingerprint %s: %w", rel, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("yolo: fingerprint %s: %w", rel, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("yolo: fingerprint %s: %w", rel, err)
	}
	// Size from the bytes hashed, so that size and digest describe the
	// same content even when the file changes under the read.
	return fn(warehouse.FileEntry{Path: rel, Size: n, MtimeNs: st.ModTime().UnixNano(), SHA256: hex.EncodeToString(h.Sum(nil))})
}
