package capture

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// A label file that is a symbolic link (here to a valid label outside
// the dataset) is not followed, and is not silently no sample either: it
// is one path_escape sample, and it is listed in the fingerprint as the
// link itself (issue 23, "smaller").
func TestSymlinkedLabelIsPathEscape(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "label.json")
	writeTree(t, root, map[string][]byte{
		"r/images/0.png":  encoded(t, "png", 8, 8),
		"r/labels/0.json": []byte(`{"frame_id": 0, "image": "images/0.png", "polyp_labels": [{"bbox_px": [1, 1, 5, 5]}]}`),
	})
	if err := os.WriteFile(outside, []byte(`{"frame_id": 1, "image": "images/0.png", "polyp_labels": [{"bbox_px": [1, 1, 5, 5]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "r/labels/1.json")); err != nil {
		t.Fatal(err)
	}
	src := newSource(t, root, Options{})
	got := scanAll(t, src)
	if len(got) != 2 {
		t.Fatalf("%d samples, want 2 (the link is one)", len(got))
	}
	link := got[1]
	if link.LabelPath != "r/labels/1.json" || !reflect.DeepEqual(link.Reasons, []validate.Reason{validate.ReasonPathEscape}) || link.ImagePath != "" {
		t.Errorf("the linked label: %+v, want path_escape, no image", link)
	}
	var listed []string
	if err := src.Fingerprint(context.Background(), func(e warehouse.FileEntry) error {
		listed = append(listed, e.Path)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(listed, []string{"r/labels/0.json", "r/labels/1.json", "r/images/0.png"}) {
		t.Errorf("fingerprint lists %v", listed)
	}
}
