package claims_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// signalDriver is the fake driver with claims.GoneSignaler: the engine
// must wait on GoneAhead's channel, never through WaitGone. It counts the
// entries a waiter waits on in the store's waiting counter.
type signalDriver struct{ *driver }

func (d signalDriver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	panic("WaitGone called on a GoneSignaler")
}

func (d signalDriver) GoneAhead(q claims.Queue, e claims.Entry) (<-chan struct{}, int, bool) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	i, x := d.find(q, e)
	switch {
	case x == nil:
		return nil, 0, false
	case i == 0:
		return nil, 0, true
	}
	s.waiting++
	return s.queues[key(q)][i-1].gone, min(i, 2), true
}

var _ claims.GoneSignaler = signalDriver{}

// TestGoneSignalerWaits: on a driver with GoneAhead, waiters are granted in
// the order they queued, and a waiter ends, its entry withdrawn, when its
// context ends (Timeout), when its session is declared lost (LockLost)
// and when its engine closes (Closed).
func TestGoneSignalerWaits(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	newSignal := func() (*claims.Engine, *driver) {
		d := &driver{s: s}
		return claims.New(signalDriver{d}, claims.Options{}), d
	}
	waiting := func(n int) func() bool {
		return func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == n }
	}
	queued := func() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.queues[key(claims.Queue{Path: "d"})]) }
	eh, _ := newSignal()
	holder, err := eh.LockName(ctx, "d", "holder")
	require.NoError(t, err)

	// In order.
	const n = 3
	got := make(chan topo.LockDescriptor, n)
	for i := range n {
		e, _ := newSignal()
		go func() {
			ld, err := e.LockName(ctx, "d", "w")
			if err != nil {
				t.Error(err)
			}
			got <- ld
		}()
		eventually(t, waiting(i+1))
	}
	cur, last := holder, holder.Token()
	for range n {
		require.NoError(t, cur.Unlock(ctx))
		cur = <-got
		require.Greater(t, cur.Token(), last, "granted in the order queued")
		last = cur.Token()
	}

	// Each way a wait ends.
	ends := []struct {
		name string
		code topo.ErrorCode
		end  func(cancel context.CancelFunc, e *claims.Engine, d *driver)
	}{
		{"ctx", topo.Interrupted, func(cancel context.CancelFunc, _ *claims.Engine, _ *driver) { cancel() }},
		{"session", topo.LockLost, func(_ context.CancelFunc, _ *claims.Engine, d *driver) { d.session().Lost() }},
		{"close", topo.Closed, func(_ context.CancelFunc, e *claims.Engine, _ *driver) { e.Close() }},
	}
	for _, c := range ends {
		e, d := newSignal()
		wctx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.waiting = 0
		s.mu.Unlock()
		done := make(chan error, 1)
		go func() { _, err := e.LockName(wctx, "d", "w"); done <- err }()
		eventually(t, waiting(1))
		c.end(cancel, e, d)
		err := <-done
		cancel()
		require.True(t, topo.IsErrType(err, c.code), "%s: got %v", c.name, err)
		require.Equal(t, 1, queued(), "%s: the waiter's entry is withdrawn", c.name)
	}
	require.NoError(t, cur.Unlock(ctx))
}
