package coco

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

// AnnotationsPrefix starts the fingerprint path of the annotations file:
// "//annotations/instances_train2017.json". Image paths are cleaned and
// relative, so none starts with "/".
const AnnotationsPrefix = "//annotations/"

// Fingerprint calls fn for the annotations file, with the SHA-256 of its
// content, then for every image file a scan reads, in scan order, each
// once: the local file_name of every images entry that names a regular
// file (symbolic links followed), relative to the image root. It reads
// the annotations file again and fails if its content is no longer what
// New read: the samples would not match the listing.
func (s *Source) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	fi, err := s.annotationsInfo()
	if err != nil {
		return err
	}
	if err := fn(fi); err != nil {
		return err
	}
	seen := make(map[string]struct{}, len(s.doc.images))
	for i := range s.doc.images {
		im := &s.doc.images[i]
		if im.flags&imgLocal == 0 {
			continue
		}
		if _, dup := seen[im.name]; dup {
			continue
		}
		seen[im.name] = struct{}{}
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(im.name)))
		switch {
		case err == nil && st.Mode().IsRegular():
			if err := fn(warehouse.FileEntry{Path: im.name, Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}); err != nil {
				return err
			}
		case err == nil || sources.NotFound(err):
		default:
			return fmt.Errorf("coco: fingerprint %s: %w", im.name, err)
		}
	}
	return nil
}

// annotationsInfo hashes the annotations file.
func (s *Source) annotationsInfo() (warehouse.FileEntry, error) {
	f, err := os.Open(s.annotations)
	if err != nil {
		return warehouse.FileEntry{}, fmt.Errorf("coco: fingerprint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return warehouse.FileEntry{}, fmt.Errorf("coco: fingerprint: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return warehouse.FileEntry{}, fmt.Errorf("coco: fingerprint %s: %w", s.annotations, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != s.doc.sha256 || n != s.doc.size {
		return warehouse.FileEntry{}, fmt.Errorf("coco: %s changed since it was read; rerun the build", s.annotations)
	}
	return warehouse.FileEntry{Path: AnnotationsPrefix + s.base, Size: n, MtimeNs: st.ModTime().UnixNano(), SHA256: sum}, nil
}
