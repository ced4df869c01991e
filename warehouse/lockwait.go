package warehouse

import (
	"context"
	"errors"
	"time"
)

// lockPoll is how often AcquireWait retries a held lock.
const lockPoll = 250 * time.Millisecond

// AcquireWait is Acquire that, while another build holds the version's
// lock, retries for up to wait before failing with ErrLocked (wait 0:
// Acquire). It stops early when ctx is done.
func AcquireWait(ctx context.Context, root, name string, wait time.Duration) (*Build, error) {
	deadline := time.Now().Add(wait)
	for {
		b, err := Acquire(root, name)
		if err == nil || !errors.Is(err, ErrLocked) || !time.Now().Before(deadline) {
			return b, err
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
