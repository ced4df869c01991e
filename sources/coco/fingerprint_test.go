package coco

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"warehouse-etl/warehouse"
)

func fingerprint(t *testing.T, src *Source) ([]warehouse.FileEntry, error) {
	t.Helper()
	var out []warehouse.FileEntry
	err := src.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error {
		out = append(out, fi)
		return nil
	})
	return out, err
}

func TestFingerprint(t *testing.T) {
	png := encoded(t, "png", 96, 64)
	jpg := encoded(t, "jpeg", 80, 120)
	d := doc(`[
		{"id": 5, "file_name": "b.jpg"},
		{"id": 1, "file_name": "sub/a.png"},
		{"id": 3, "file_name": "./sub/a.png"},
		{"id": 4, "file_name": "../outside.png"},
		{"id": 6, "file_name": "gone.png"},
		{"id": 7, "file_name": "dir"},
		{"id": 8, "file_name": "link.png"},
		{"id": 9, "file_name": "broken.png"},
		{"file_name": "noid.png"},
		{"id": 2, "file_name": "bad.png"}]`, `[{"image_id": 77, "category_id": 1, "bbox": [1, 1, 1, 1]}]`)
	annPath, root := dataset(t, d, map[string][]byte{
		"b.jpg": jpg, "sub/a.png": png, "dir/x.png": png, "noid.png": png, "bad.png": []byte("not an image"), "target.png": png,
	})
	writeTree(t, filepath.Dir(root), map[string][]byte{"outside.png": png})
	if err := os.Symlink("target.png", filepath.Join(root, "link.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere.png", filepath.Join(root, "broken.png")); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 6, 11, 12, 0, 0, 123456789, time.UTC)
	for _, p := range []string{annPath, filepath.Join(root, "b.jpg"), filepath.Join(root, "sub/a.png"), filepath.Join(root, "target.png"), filepath.Join(root, "noid.png"), filepath.Join(root, "bad.png")} {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	src := newSourceT(t, annPath, root)
	sum := sha256.Sum256([]byte(d))
	ns := mtime.UnixNano()
	want := []warehouse.FileEntry{
		{Path: "//annotations/instances.json", Size: int64(len(d)), MtimeNs: ns, SHA256: hex.EncodeToString(sum[:])},
		{Path: "sub/a.png", Size: int64(len(png)), MtimeNs: ns},
		{Path: "bad.png", Size: 12, MtimeNs: ns},
		{Path: "b.jpg", Size: int64(len(jpg)), MtimeNs: ns},
		{Path: "link.png", Size: int64(len(png)), MtimeNs: ns},
		{Path: "noid.png", Size: int64(len(png)), MtimeNs: ns},
	}
	// Before a Scan, and after: the same.
	for range 2 {
		got, err := fingerprint(t, src)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Fingerprint:\n got %v\nwant %v", got, want)
		}
		scanAll(t, src)
	}
	// Every image the scan reads a header of is listed.
	listed := map[string]bool{}
	for _, fi := range want {
		listed[fi.Path] = true
	}
	for _, s := range scanAll(t, src) {
		if s.Width > 0 && !listed[s.ImagePath] {
			t.Errorf("scan read %s, which Fingerprint does not list", s.ImagePath)
		}
	}

	stop := errors.New("stop")
	if err := src.Fingerprint(context.Background(), func(warehouse.FileEntry) error { return stop }); err != stop {
		t.Errorf("Fingerprint returned %v, want the callback's error", err)
	}

	// The annotations file changes after New: same size, new content.
	changed := strings.Replace(d, `"b.jpg"`, `"c.jpg"`, 1)
	if err := os.WriteFile(annPath, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(annPath, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if _, err := fingerprint(t, src); err == nil || err.Error() != "coco: "+annPath+" changed since it was read; rerun the build" {
		t.Errorf("Fingerprint after a change: %v", err)
	}
	// A new source sees the new content and its digest.
	got, err := fingerprint(t, newSourceT(t, annPath, root))
	if err != nil {
		t.Fatal(err)
	}
	sum = sha256.Sum256([]byte(changed))
	if got[0].SHA256 != hex.EncodeToString(sum[:]) || got[0].Size != int64(len(d)) || got[0].MtimeNs != ns {
		t.Errorf("changed file: %+v", got[0])
	}
	if err := os.Remove(annPath); err != nil {
		t.Fatal(err)
	}
	if _, err := fingerprint(t, src); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Fingerprint without the annotations file: %v", err)
	}
}
