package warehouse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// SharedBuild is a partition's hold on a version's build lock: shared, so
// the partitions of one partitioned build run together, while a
// single-machine build or a commit of the same version (which take it
// exclusively with Acquire) waits or is refused, and the cleanup of other
// builds' temporaries leaves this version's alone.
type SharedBuild struct {
	root, name string
	lock       *os.File
}

// AcquireShared takes the build lock of version name under root shared,
// retrying for up to wait while an exclusive holder (a single-machine
// build or a commit) has it; then it fails with ErrLocked.
func AcquireShared(ctx context.Context, root, name string, wait time.Duration) (*SharedBuild, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	lockPath := filepath.Join(root, "."+name+buildLockSuffix)
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			return &SharedBuild{root: root, name: name, lock: f}, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w (a single-machine build or a commit holds it)", lockPath, ErrLocked)
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// FinalDir is where the version is (or will be) published.
func (b *SharedBuild) FinalDir() string { return filepath.Join(b.root, b.name) }

// Release drops the lock. It is safe to call more than once.
func (b *SharedBuild) Release() {
	if b.lock != nil {
		b.lock.Close()
		b.lock = nil
	}
}

// OwnedLock is an exclusive lock on one file that records who holds it.
type OwnedLock struct{ f *os.File }

// LockOwned takes path exclusively without waiting and writes owner (one
// line: host, pid, what it is doing) into it. When another process holds
// it, the error wraps ErrLocked and quotes that process's owner line.
// flock works across machines on NFSv4 and on Lustre mounted with -o
// flock; on a filesystem without it the error says so.
func LockOwned(path, owner string) (*OwnedLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			var buf [512]byte
			n, _ := f.ReadAt(buf[:], 0)
			held := strings.TrimSpace(string(buf[:n]))
			if held == "" {
				held = "another process"
			}
			return nil, fmt.Errorf("%s is held by %s: %w", path, held, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s (does this filesystem support flock?): %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(owner+"\n"), 0)
	}
	return &OwnedLock{f: f}, nil
}

// Release drops the lock (the owner line stays, harmless: only a held
// lock is ever quoted). It is safe to call more than once.
func (l *OwnedLock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
