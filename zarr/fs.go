package zarr

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"warehouse-etl/internal/atomicfile"
)

// FS is every change Write makes to the file system. Tests substitute one
// that fails on a chosen call to prove that a failure at any point leaves
// either the old store or none, never a partial one at the target.
type FS interface {
	MkdirAll(path string) error
	// MkdirTemp creates a new directory (mode 0755) in dir whose name is
	// pattern with a random suffix appended.
	MkdirTemp(dir, pattern string) (string, error)
	// Create creates or truncates a file for writing.
	Create(path string) (File, error)
	Rename(oldpath, newpath string) error
	RemoveAll(path string) error
	// SyncTree makes every file and directory under dir, and their
	// contents, durable.
	SyncTree(dir string) error
	// SyncDir makes the entries of directory path durable.
	SyncDir(path string) error
}

// File is a file being written.
type File interface {
	io.Writer
	Close() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

func (OSFS) MkdirAll(path string) error { return os.MkdirAll(path, 0o755) }

func (OSFS) MkdirTemp(dir, pattern string) (string, error) {
	tmp, err := os.MkdirTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	// os.MkdirTemp makes it private (0700); the store it becomes is not.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (OSFS) Create(path string) (File, error) { return os.Create(path) }

func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (OSFS) RemoveAll(path string) error { return os.RemoveAll(path) }

// SyncTree is one syncfs(2) of dir's file system. A store has a few files
// and directories per array and shard, and an fsync of each costs a
// round trip to the disk: with them an export ran at half the speed of
// copying the shards, with syncfs near it.
func (OSFS) SyncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

func (OSFS) SyncDir(path string) error { return atomicfile.Sync(path) }
