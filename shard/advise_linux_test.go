//go:build linux

package shard

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// ReadCached reads what the page cache holds and no more: all of a file
// just written, then, after the file was dropped from the cache, less than
// asked (nothing, or what the kernel's own read-ahead brought in), and
// never bytes other than the file's.
func TestReadCached(t *testing.T) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	n, asked := ReadCached(f, buf, 4096)
	if !asked {
		t.Skip("this kernel cannot be asked (no RWF_NOWAIT)")
	}
	if n != len(buf) || !bytes.Equal(buf, data[4096:4096+len(buf)]) {
		t.Fatalf("a cached range: read %d of %d bytes (or other bytes)", n, len(buf))
	}
	if n, _ := ReadCached(f, buf, int64(len(data))-100); n != 100 || !bytes.Equal(buf[:100], data[len(data)-100:]) {
		t.Fatalf("at the end of the file: read %d bytes, want the last 100", n)
	}
	_ = f.Sync()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	clear(buf)
	n, asked = ReadCached(f, buf, 512<<10)
	if !asked {
		t.Fatal("asked once, then not")
	}
	if n == len(buf) {
		t.Skip("DONTNEED left the pages cached (tmpfs?)")
	}
	if !bytes.Equal(buf[:n], data[512<<10:512<<10+n]) {
		t.Fatal("the bytes read differ from the file's")
	}
}
