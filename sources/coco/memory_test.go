package coco

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"unsafe"
)

// liveHeap is the heap the garbage collector found live after a full
// collection (runtime/metrics).
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Bytes kept per annotation and per image once New has read a file, as
// the package documentation and docs/sources/coco.md state them.
const (
	bytesPerAnnotation = 56
	bytesPerImage      = 128
)

// TestHeldBytesPerAnnotation reads a generated file of 200,000
// annotations (20,000 images, polygons and crowd RLEs, not grouped by
// image, so New sorts) and checks the live heap that New leaves behind
// against the documented bytes per annotation and per image: issue 23
// measured a 5M-annotation file peaking at 0.75-1.3 GB where about 64
// bytes each were promised.
func TestHeldBytesPerAnnotation(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 68 MB file")
	}
	const images, perImage = 20_000, 10
	dir := t.TempDir()
	name := filepath.Join(dir, "instances.json")
	writeBigCOCO(t, name, images, perImage)
	root := filepath.Join(dir, "images")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	before := liveHeap()
	src, err := New(name, root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := liveHeap() - before
	runtime.KeepAlive(src)
	anns := int64(images * perImage)
	t.Logf("%d bytes live for %d annotations and %d images: %.1f bytes per annotation, images included", held, anns, images, float64(held)/float64(anns))
	// Annotations are stored annChunk at a time: the last chunk may be
	// nearly empty.
	if limit := bytesPerAnnotation*(anns+annChunk) + bytesPerImage*images; held > limit {
		t.Errorf("New keeps %d bytes, more than %d per annotation (%d at a time) and %d per image (%d)", held, bytesPerAnnotation, annChunk, bytesPerImage, limit)
	}
	if size := unsafe.Sizeof(annotation{}); size != bytesPerAnnotation {
		t.Errorf("an annotation takes %d bytes, the documentation says %d", size, bytesPerAnnotation)
	}
	if got := src.doc.anns.n; got != int(anns) {
		t.Errorf("%d annotations kept, want %d", got, anns)
	}
}
