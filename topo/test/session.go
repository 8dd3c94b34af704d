package test

import (
	"context"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testSessionLossLock: when the store drops the holder's session (through
// Options.ExpireSession), Check reports LockLost, Unlock reports LockLost,
// and another connection takes the lock.
func testSessionLossLock(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()

	mustCreate(t, ctx, c1, "d/f", "x")
	l1 := mustLock(t, ctx, c1, "d", "holder")
	require.NoError(t, l1.Check(ctx))
	_, err := c2.TryLock(ctx, "d", "other")
	requireCode(t, err, topo.NodeExists, "TryLock while held")

	s.opts.ExpireSession(t, c1)

	var last error
	ok := eventually(func() bool {
		last = l1.Check(ctx)
		return topo.IsErrType(last, topo.LockLost)
	})
	require.Truef(t, ok, "Check after session loss: want LockLost, last got %v", last)

	wctx, cancel := context.WithTimeout(ctx, longWait)
	defer cancel()
	l2, err := c2.Lock(wctx, "d", "other")
	require.NoError(t, err, "Lock of a lock whose holder lost its session")
	require.NoError(t, l2.Check(ctx))

	requireCode(t, l1.Check(ctx), topo.LockLost, "Check of a lost lock while another holds it")
	requireCode(t, l1.Unlock(ctx), topo.LockLost, "Unlock of a lost lock")
	require.NoError(t, l2.Check(ctx), "the old holder's Unlock must not release the new holder's lock")
	_, err = s.conn().TryLock(ctx, "d", "third")
	requireCode(t, err, topo.NodeExists, "TryLock after the old holder's Unlock")
	require.NoError(t, l2.Unlock(ctx))
}

// testSessionLossLeader: when the leader's session is dropped, its
// leadership context is cancelled and another participant leads; the store
// never names the old leader again.
func testSessionLossLeader(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()

	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	observer := participate(t, c3, "elec", "observer")

	lctx1, err := p1.WaitForLeadership()
	require.NoError(t, err)
	requireLeader(t, ctx, observer, "id1", "before the session loss")
	got := leadAsync(p2)
	requireNothing(t, got, "p2's WaitForLeadership while p1 leads")

	s.opts.ExpireSession(t, c1)

	requireDone(t, lctx1, "the leadership context after session loss")
	r, _ := recv(t, got, "p2's WaitForLeadership after the leader's session loss")
	require.NoError(t, r.err)
	require.NoError(t, r.ctx.Err())
	require.Error(t, lctx1.Err(), "two leaders at once")
	requireLeader(t, ctx, observer, "id2", "after the leader's session loss")

	// The old leader's withdrawal must not disturb the new one.
	p1.Stop()
	require.NoError(t, r.ctx.Err(), "the old leader's Stop cancelled the new leader")
	requireLeader(t, ctx, observer, "id2", "after the old leader's Stop")
	p2.Stop()
	requireLeader(t, ctx, observer, "", "after the new leader's Stop")
}
