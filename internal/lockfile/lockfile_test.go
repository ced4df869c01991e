package lockfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flock locks belong to open file descriptions, so two Acquires in one
// process conflict exactly as two processes do.
func TestExclusiveSharedAndOwner(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".v1.lock")
	ctx := context.Background()
	held, err := Acquire(ctx, p, Options{Owner: "build on node7 pid 42"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(ctx, p, Options{})
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) || he.Owner != "build on node7 pid 42" ||
		err.Error() != p+" is held by build on node7 pid 42" {
		t.Fatalf("second exclusive Acquire: %v", err)
	}
	if _, err := Acquire(ctx, p, Options{Shared: true}); !errors.Is(err, ErrHeld) {
		t.Fatalf("shared Acquire under an exclusive holder: %v", err)
	}
	if _, ok, err := TryAcquire(p, Options{}); ok || err != nil {
		t.Fatalf("TryAcquire of a held lock: ok %v, %v", ok, err)
	}
	held.Release()
	held.Release() // twice is fine

	a, err := Acquire(ctx, p, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := Acquire(ctx, p, Options{Shared: true, ReadOnly: true})
	if err != nil {
		t.Fatalf("two shared holders: %v", err)
	}
	defer b.Release()
	_, err = Acquire(ctx, p, Options{})
	if !errors.As(err, &he) || he.Holder() != "build on node7 pid 42" {
		// A shared holder writes no owner line: the last exclusive one stays.
		t.Fatalf("exclusive Acquire under shared holders: %v", err)
	}
}

func TestWait(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	held, err := Acquire(context.Background(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(3 * Poll / 2)
		held.Release()
	}()
	got, err := Acquire(context.Background(), p, Options{Wait: time.Minute})
	if err != nil {
		t.Fatalf("waiting for a released lock: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, p, Options{Wait: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	start := time.Now()
	if _, err := Acquire(context.Background(), p, Options{Wait: Poll / 5}); !errors.Is(err, ErrHeld) || time.Since(start) < Poll/5 {
		t.Fatalf("short wait: %v after %s", err, time.Since(start))
	}
	got.Release()
}

func TestRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "x.lock")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{Owner: "o"}, {Shared: true, ReadOnly: true}} {
		if l, err := Acquire(context.Background(), p, opts); err == nil {
			l.Release()
			t.Fatalf("%+v: a symlinked lock file was followed", opts)
		}
	}
	if b, _ := os.ReadFile(target); !strings.HasPrefix(string(b), "keep me") {
		t.Fatalf("the link's target was written: %q", b)
	}
}
