package backendkit

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx ends, whichever comes first, and reports
// whether ctx is still live (false: it ended, the wait was cut short).
// Backends use it between the retries of a failed store request
// (consultopo's watches, lock waits and queue clean-ups; etcd2topo's
// watches, queue waits, keepalives and clean-ups). Safe for concurrent
// use.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Send sends v on ch unless ctx ends first, and reports whether v was sent:
// a watch's goroutine delivering an event to a reader that may have gone
// (consultopo's Watch and WatchRecursive). Safe for concurrent use.
func Send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}
