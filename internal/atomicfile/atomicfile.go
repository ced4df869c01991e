// Package atomicfile writes files that a reader sees whole or not at all,
// and files that are durable before the directory holding them is
// published.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"warehouse-etl/internal/fsfault"
)

// Write replaces path with data so that a reader of path sees the old
// content or the new, never part of either, and a crash leaves one of the
// two: data goes to a temporary file beside path (".<name>.tmp-<random>",
// so that it is on the same filesystem and never matches a reader's
// pattern for path's kind of file), which is fsynced, given mode perm
// (exactly: the umask does not apply) and renamed over path; then the
// directory is fsynced, so that the rename survives a crash. The temporary
// file is removed when any step fails.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := (fsfault.File{File: f}).Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := fsfault.SyncFile(f); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsfault.RenameFile(f.Name(), path); err != nil {
		return err
	}
	return Sync(dir)
}

// WriteSynced creates (or truncates) path with data and fsyncs it, in
// place: no temporary file, no rename. It is for the files of a directory
// that is published whole by a rename after they are written (a version's
// temporary directory), where a rename per file would buy nothing.
func WriteSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (fsfault.File{File: f}).Write(data); err != nil {
		f.Close()
		return err
	}
	if err := fsfault.SyncFile(f); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

// Sync fsyncs the file or directory at path: a directory's fsync makes
// the creations, renames and removals of its entries durable.
func Sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fsfault.SyncFile(f); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
