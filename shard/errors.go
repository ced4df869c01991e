package shard

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks every error that says a shard's bytes are not a valid
// shard. Test for it with errors.Is; the message names what is wrong.
var ErrCorrupt = errors.New("shard: corrupt")

// corruptf returns an error wrapping ErrCorrupt, formatted as
// "shard: corrupt: <message>".
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
