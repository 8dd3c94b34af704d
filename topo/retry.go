package topo

import (
	"context"
	"math/rand/v2"
	"time"
)

// IsPermanent reports whether err carries an error code that retrying the
// same call cannot fix, so that a retry loop must give up on it at once
// instead of backing off and trying again:
//
//   - PermissionDenied: the store refused the credentials or the ACL denies
//     the call; the same credentials are refused again.
//   - InvalidPath, InvalidArgument: the input is malformed.
//   - NoImplementation: the backend does not support the call.
//   - Closed: the Conn (or Server, or Election) was closed.
//
// Every other code (Unavailable, Timeout, Interrupted, ResourceExhausted,
// Compacted, LockLost, ReadOnly, which ends when the mode is switched off
// (middleware.ReadOnly.Set), and the compare-and-set outcomes NodeExists,
// BadVersion, NoNode, which loops decide on themselves) and an error with no
// code are not permanent. The code is found as CodeOf finds it: the first
// *Error or ErrorCode in err's chain. Every retry loop of topokit outside the
// backends (Server's CellInfo watch, UpdateCellInfoFields, election.Runner
// by default) uses it; IsPermanent(nil) is false.
func IsPermanent(err error) bool {
	switch CodeOf(err) {
	case PermissionDenied, InvalidPath, InvalidArgument, NoImplementation, Closed:
		return true
	}
	return false
}

// retryBackoff is a capped exponential backoff with full jitter for the
// retry loops of this package. It is not safe for concurrent use.
type retryBackoff struct {
	initial, max, next time.Duration
}

func newRetryBackoff(initial, max time.Duration) *retryBackoff {
	return &retryBackoff{initial: initial, max: max, next: initial}
}

// reset makes the next delay the initial one again.
func (b *retryBackoff) reset() { b.next = b.initial }

// wait sleeps a random delay in [next/2, next], doubles next up to max,
// and returns ctx's error (Timeout or Interrupted for path) if ctx ends
// first.
func (b *retryBackoff) wait(ctx context.Context, path string) error {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(2*b.next, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fromContext(ctx, path)
	}
}
