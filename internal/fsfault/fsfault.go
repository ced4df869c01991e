// Package fsfault is the seam behind the filesystem calls of a build and
// its publication (shard, manifest and export writes, fsyncs, renames,
// hard links): each goes through Check first, and a test can install an
// Injector that fails the Nth of them, as SQLite's test VFS fails the Nth
// I/O. Production code installs nothing; a call then costs one atomic
// load.
package fsfault

import (
	"os"
	"sync/atomic"
)

// Op is the kind of a filesystem call.
type Op int

// The calls an Injector sees.
const (
	Write  Op = iota // a write to a file of the version or its staging
	Sync             // an fsync of a file or directory
	Rename           // a rename, including renameat2 and the swap of "latest"
	Link             // a hard link (a staged shard into the version)
)

func (o Op) String() string {
	return [...]string{"write", "fsync", "rename", "link"}[o]
}

// Injector decides whether the call op on path fails: a non-nil error is
// returned instead of making the call.
type Injector func(op Op, path string) error

var injector atomic.Pointer[Injector]

// Set installs inj for every call in the process until the returned
// restore runs. Tests only.
func Set(inj Injector) (restore func()) {
	old := injector.Swap(&inj)
	return func() { injector.Store(old) }
}

// Check is called before each call: the installed Injector's verdict, or
// nil.
func Check(op Op, path string) error {
	if p := injector.Load(); p != nil {
		return (*p)(op, path)
	}
	return nil
}

// File is an *os.File whose Write and WriteAt ask Check first.
type File struct{ *os.File }

func (f File) Write(p []byte) (int, error) {
	if err := Check(Write, f.Name()); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f File) WriteAt(p []byte, off int64) (int, error) {
	if err := Check(Write, f.Name()); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.WriteAt(p, off)
}

// SyncFile fsyncs f after asking Check.
func SyncFile(f *os.File) error {
	if err := Check(Sync, f.Name()); err != nil {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
	}
	return f.Sync()
}

// RenameFile is os.Rename after asking Check.
func RenameFile(oldpath, newpath string) error {
	if err := Check(Rename, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return os.Rename(oldpath, newpath)
}

// LinkFile is os.Link after asking Check.
func LinkFile(oldpath, newpath string) error {
	if err := Check(Link, newpath); err != nil {
		return &os.LinkError{Op: "link", Old: oldpath, New: newpath, Err: err}
	}
	return os.Link(oldpath, newpath)
}
