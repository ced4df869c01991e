// Package lockfile takes flock(2) locks on files, the one way every lock
// of an output root is taken: a version's build lock, its readers lock,
// the per-shard locks of its staging directory and the lock beside a Zarr
// export target.
//
// A lock is exclusive or shared, tried once or retried for a while, and an
// exclusive holder may write an owner line (host, pid, what it does) into
// the file, which a refused caller quotes. flock works across machines on
// NFSv4 and on Lustre mounted with -o flock; the lock is released when the
// holder closes the file or exits, so a crashed holder never leaves a
// stale lock. Lock files are opened without following a symbolic link:
// nothing under an output root is followed out of it.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrHeld means another process holds the lock (after waiting, when the
// caller asked to wait). The error that wraps it is a *HeldError.
var ErrHeld = errors.New("lock held by another process")

// HeldError is a lock another process holds: Path, and the owner line the
// holder wrote ("" when it wrote none).
type HeldError struct {
	Path  string
	Owner string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held by %s", e.Path, e.Holder())
}

// Holder is the owner line, or "another process" when there is none.
func (e *HeldError) Holder() string {
	if e.Owner == "" {
		return "another process"
	}
	return e.Owner
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Forever, as Options.Wait, blocks in the kernel until the lock is
// granted; the context cannot interrupt it.
const Forever = time.Duration(math.MaxInt64)

// Poll is how often a held lock is tried again while waiting.
const Poll = 250 * time.Millisecond

// Options say how to take a lock.
type Options struct {
	// Shared takes a shared lock (LOCK_SH), which other shared holders
	// may hold at once; otherwise the lock is exclusive (LOCK_EX).
	Shared bool
	// Owner, for an exclusive lock, is written into the file once the lock
	// is held (one line); a refused caller finds it in HeldError.Owner.
	Owner string
	// Wait is how long to retry while another process holds the lock; 0
	// tries once. Forever blocks until granted.
	Wait time.Duration
	// ReadOnly opens the file read-only (creating it when missing), for a
	// shared lock taken by a process that may not write the file (a reader
	// of another user's warehouse).
	ReadOnly bool
}

// Lock is a held lock. Release drops it.
type Lock struct{ f *os.File }

// Acquire takes the lock on path, creating the file (mode 0644) when it
// does not exist. A lock another process holds gives a *HeldError (it
// wraps ErrHeld); ctx ends a wait early with ctx's error. Errors opening
// the file are returned as os.OpenFile gives them.
//
// A lock file may be removed by the holder of its lock (gc removes a
// collected version's): a process that opened the file before and locks
// it after the removal holds a lock nobody else sees, so Acquire checks
// that the file it locked is still the one at path, and starts over with
// a fresh file when it is not.
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	for {
		l, err := acquire(ctx, path, opts)
		if err != nil || l.current(path) {
			return l, err
		}
		l.Release()
	}
}

// current reports whether the locked file is still the one at path.
func (l *Lock) current(path string) bool {
	fi, err := l.f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, pi)
}

func acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	f, err := open(path, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	how := unix.LOCK_EX
	if opts.Shared {
		how = unix.LOCK_SH
	}
	if opts.Wait == Forever {
		if err := unix.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, flockError(path, err)
		}
		return held(f, opts), nil
	}
	deadline := time.Now().Add(opts.Wait)
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return held(f, opts), nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, flockError(path, err)
		}
		if !time.Now().Before(deadline) {
			defer f.Close()
			return nil, &HeldError{Path: path, Owner: readOwner(f)}
		}
		t := time.NewTimer(min(Poll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// TryAcquire is Acquire without waiting: ok is false, and the error nil,
// when another process holds the lock.
func TryAcquire(path string, opts Options) (l *Lock, ok bool, err error) {
	opts.Wait = 0
	l, err = Acquire(context.Background(), path, opts)
	if errors.Is(err, ErrHeld) {
		return nil, false, nil
	}
	return l, err == nil, err
}

// open opens (creating) the lock file, without following a symlink. A
// read-only open tries the existing file first, so that a directory the
// caller may not write is no obstacle when the file is there.
func open(path string, readOnly bool) (*os.File, error) {
	if !readOnly {
		return os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	}
	return f, err
}

func flockError(path string, err error) error {
	return fmt.Errorf("lock %s (does this filesystem support flock?): %w", path, err)
}

// held writes the owner line of a freshly taken exclusive lock.
func held(f *os.File, opts Options) *Lock {
	if opts.Owner != "" && !opts.Shared {
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(opts.Owner+"\n"), 0)
		}
	}
	return &Lock{f: f}
}

// readOwner is the owner line of a held lock file ("" when none).
func readOwner(f *os.File) string {
	var buf [512]byte
	n, _ := f.ReadAt(buf[:], 0)
	return strings.TrimSpace(string(buf[:n]))
}

// Release drops the lock (an owner line stays in the file, harmless: only
// a held lock's line is ever quoted). It is safe to call more than once,
// and on a nil Lock.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the descriptor releases the flock
		l.f = nil
	}
}
