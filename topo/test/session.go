package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// requireLockGone fails t unless the lock l (whose holder lost its session
// or was cut off) fails its Check right now. lost requires LockLost; a
// cut-off holder may answer any error (its Check cannot reach the store),
// but never nil.
func requireLockGone(t *testing.T, l topo.LockDescriptor, lost bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), promptWait)
	defer cancel()
	err := l.Check(ctx)
	if lost {
		requireCode(t, err, topo.LockLost, what)
		return
	}
	require.Errorf(t, err, "%s: Check of the old holder's lock returned nil: two holders at once", what)
}

// requireLeadershipGone fails t unless lctx is already cancelled.
func requireLeadershipGone(t *testing.T, lctx context.Context, what string) {
	t.Helper()
	require.Errorf(t, lctx.Err(), "%s: the old leader's context is still live: two leaders at once", what)
}

// testSessionLossLock: a waiter is queued behind the holder; when the store
// drops the holder's session (ExpireSession), the holder's Check reports
// LockLost at once, and at the moment the waiter's Lock returns it still
// does; the old holder's Unlock reports LockLost and releases nothing.
func testSessionLossLock(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()

	mustCreate(t, ctx, c1, "d/f", "x")
	l1 := mustLock(t, ctx, c1, "d", "holder")
	require.NoError(t, l1.Check(ctx))
	_, err := c2.TryLock(ctx, "d", "other")
	requireCode(t, err, topo.NodeExists, "TryLock while held")
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(ctx, "d", "other") })
	requireNothing(t, got, "a second Lock while the first is held")

	s.opts.ExpireSession(t, c1)
	requireLockGone(t, l1, true, "Check right after ExpireSession returned")

	r, _ := recv(t, got, "the waiting Lock after the holder's session loss")
	require.NoError(t, r.err, "Lock of a lock whose holder lost its session")
	requireLockGone(t, l1, true, "Check of the old lock when the new holder's Lock returned")
	require.NoError(t, r.l.Check(ctx))

	requireCode(t, l1.Unlock(ctx), topo.LockLost, "Unlock of a lost lock")
	require.NoError(t, r.l.Check(ctx), "the old holder's Unlock must not release the new holder's lock")
	_, err = s.conn().TryLock(ctx, "d", "third")
	requireCode(t, err, topo.NodeExists, "TryLock after the old holder's Unlock")
	require.NoError(t, r.l.Unlock(ctx))
}

// testSessionLossLeader: when the leader's session is dropped, its
// leadership context is cancelled at once (before ExpireSession returns);
// at the moment the next participant's WaitForLeadership returns it still
// is; the store never names the old leader again.
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
	requireLeadershipGone(t, lctx1, "right after ExpireSession returned")
	r, _ := recv(t, got, "p2's WaitForLeadership after the leader's session loss")
	requireLeadershipGone(t, lctx1, "when the next leader's WaitForLeadership returned")
	require.NoError(t, r.err)
	require.NoError(t, r.ctx.Err())
	requireLeader(t, ctx, observer, "id2", "after the leader's session loss")

	// The old leader's withdrawal must not disturb the new one.
	p1.Stop()
	require.NoError(t, r.ctx.Err(), "the old leader's Stop cancelled the new leader")
	requireLeader(t, ctx, observer, "id2", "after the old leader's Stop")
	p2.Stop()
	requireLeader(t, ctx, observer, "", "after the new leader's Stop")
}

// testSessionLossWaiter: a Lock waiting behind a holder fails with LockLost
// when the waiter's own session is dropped, without waiting for the holder,
// and leaves nothing queued.
func testSessionLossWaiter(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")
	l1 := mustLock(t, ctx, c1, "d", "holder")

	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(ctx, "d", "waiter") })
	requireNothing(t, got, "a second Lock while the first is held")
	s.opts.ExpireSession(t, c2)
	r, _ := recv(t, got, "the waiting Lock after its own session was dropped")
	requireCode(t, r.err, topo.LockLost, "a waiting Lock whose session was dropped")
	require.NoError(t, l1.Check(ctx), "the holder keeps the lock")
	requireNothingLeftBehind(s, ctx, l1, "a waiter whose session was dropped")

	// The waiter's Conn keeps working under a new session.
	l2, err := c2.TryLock(ctx, "d", "again")
	require.NoError(t, err, "TryLock on the Conn whose session was dropped")
	require.NoError(t, l2.Unlock(ctx))
}

// testSessionLossReuse is the ZooKeeper stale-Unlock sequence, generic: A
// holds d; A's session is dropped; d is emptied and re-created (so the
// store may reuse lock entry names); C locks d; A's Unlock returns LockLost
// and deletes nothing; C still holds, and D's TryLock fails.
func testSessionLossReuse(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a, b, c, d := s.conn(), s.conn(), s.conn(), s.conn()

	mustCreate(t, ctx, b, "d/f", "x")
	la := mustLock(t, ctx, a, "d", "A")
	s.opts.ExpireSession(t, a)
	requireLockGone(t, la, true, "A's lock after its session was dropped")

	require.NoError(t, b.Delete(ctx, "d/f", nil))
	requireNoFile(t, ctx, b, "d/f")
	mustCreate(t, ctx, b, "d/f", "y")
	lc := mustLock(t, ctx, c, "d", "C")
	requireLockGone(t, la, true, "A's lock once C holds d")

	// A works again (its Conn has a new session), and its stale Unlock runs
	// on that Conn.
	mustUpdate(t, ctx, a, "d/g", "A is back", nil)
	requireCode(t, la.Unlock(ctx), topo.LockLost, "A's Unlock of its lost lock")
	require.NoError(t, lc.Check(ctx), "C's lock after A's stale Unlock")
	_, err := d.TryLock(shortCtx(t, promptWait), "d", "D")
	requireCode(t, err, topo.NodeExists, "D's TryLock while C holds d (after A's stale Unlock)")
	require.NoError(t, lc.Unlock(ctx))
	ld, err := d.TryLock(shortCtx(t, promptWait), "d", "D")
	require.NoError(t, err, "D's TryLock once C released d")
	require.NoError(t, ld.Unlock(ctx))
}

// requireLostAfterHeal waits (up to longWait: the Conn may take a moment to
// reconnect) until the lock l of a holder whose partition healed reports
// LockLost from Check.
func requireLostAfterHeal(t *testing.T, ctx context.Context, l topo.LockDescriptor, who string) {
	t.Helper()
	var last error
	ok := eventually(func() bool {
		last = l.Check(ctx)
		return topo.IsErrType(last, topo.LockLost)
	})
	require.Truef(t, ok, "%s's Check after the partition healed: want LockLost, last got %v", who, last)
}

// partitioned opens the subtest's partitioned Conn, closed (after Heal)
// when the subtest ends.
func (s *store) partitioned() Partitioned {
	t := s.t
	t.Helper()
	p := s.opts.Partition(t)
	require.NotNil(t, p.Conn, "Options.Partition returned a nil Conn")
	require.NotNil(t, p.Cut, "Options.Partition returned a nil Cut")
	require.NotNil(t, p.Heal, "Options.Partition returned a nil Heal")
	t.Cleanup(p.Conn.Close)
	t.Cleanup(p.Heal) // runs first: Close can then reach the store
	return p
}

// partitionCtx bounds the wait for a successor after a partition: the
// store's session bound plus the suite's usual slack.
func (s *store) partitionCtx() context.Context {
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*(s.opts.SessionBound+longWait))
	s.t.Cleanup(cancel)
	return ctx
}

// recvWithin is recv with its own bound.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		require.FailNowf(t, "timed out", "%s: nothing within %v", what, d)
		var zero T
		return zero
	}
}

// testPartitionLock: the holder is cut off from the store; a waiter on
// another Conn gets the lock once the store expires the holder's session,
// and at that moment the holder's Check already fails (with any error: it
// may not reach the store). After the partition heals, the old holder's
// Check and Unlock report LockLost and release nothing.
func testPartitionLock(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	p := s.partitioned()
	c2 := s.conn()
	mustCreate(t, ctx, c2, "d/f", "x")

	l1, err := p.Conn.Lock(ctx, "d", "cut-off holder")
	require.NoError(t, err)
	require.NoError(t, l1.Check(ctx))
	wctx := s.partitionCtx()
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(wctx, "d", "successor") })
	requireNothing(t, got, "a second Lock while the first is held")

	p.Cut()
	r := recvWithin(t, got, s.opts.SessionBound+longWait, "the waiting Lock after the holder was cut off")
	requireLockGone(t, l1, false, "the cut-off holder's Check when the successor's Lock returned")
	require.NoError(t, r.err, "Lock of a lock whose holder was cut off")
	require.NoError(t, r.l.Check(ctx))

	p.Heal()
	requireLostAfterHeal(t, ctx, l1, "the old holder")
	requireCode(t, l1.Unlock(ctx), topo.LockLost, "the old holder's Unlock after the partition healed")
	require.NoError(t, r.l.Check(ctx), "the old holder's Unlock must not release the new holder's lock")
	_, err = s.conn().TryLock(shortCtx(t, promptWait), "d", "third")
	requireCode(t, err, topo.NodeExists, "TryLock after the old holder's Unlock")
	require.NoError(t, r.l.Unlock(ctx))
}

// testPartitionLeader: the leader is cut off; the next participant leads
// once the store expires the leader's session, and at that moment the old
// leadership context is already cancelled; after the partition heals the
// old leader's Stop does not disturb the new leader. The handover is a
// race between the store's expiry and the cut-off leader's own deadline,
// so it runs several rounds: as many as fit in about a minute of session
// bounds, between 2 and 8.
func testPartitionLeader(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	rounds := min(8, max(2, int(time.Minute/(s.opts.SessionBound+2*time.Second))))
	for r := range rounds {
		name := fmt.Sprintf("elec%d", r)
		p := s.partitioned()
		c2, c3 := s.conn(), s.conn()

		p1 := participate(t, p.Conn, name, "id1")
		p2 := participate(t, c2, name, "id2")
		observer := participate(t, c3, name, "observer")
		lctx1, err := p1.WaitForLeadership()
		require.NoError(t, err)
		requireLeader(t, ctx, observer, "id1", "before the partition")
		got := leadAsync(p2)
		requireNothing(t, got, "p2's WaitForLeadership while p1 leads")

		p.Cut()
		res := recvWithin(t, got, s.opts.SessionBound+longWait, "p2's WaitForLeadership after the leader was cut off")
		requireLeadershipGone(t, lctx1, fmt.Sprintf("round %d: when the next leader's WaitForLeadership returned", r))
		require.NoError(t, res.err)
		require.NoError(t, res.ctx.Err())
		requireLeader(t, ctx, observer, "id2", "after the leader was cut off")

		p.Heal()
		p1.Stop()
		require.NoError(t, res.ctx.Err(), "the old leader's Stop cancelled the new leader")
		requireLeader(t, ctx, observer, "id2", "after the old leader's Stop")
		p2.Stop()
	}
}

// testPartitionWaiter: a Lock waiting on a cut-off Conn fails (it cannot
// keep its place in the queue) instead of staying blocked, and once the
// holder releases, a Conn that is not cut off gets the lock at once.
func testPartitionWaiter(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	p := s.partitioned()
	c2 := s.conn()
	mustCreate(t, ctx, c2, "d/f", "x")
	l1 := mustLock(t, ctx, c2, "d", "holder")

	wctx := s.partitionCtx()
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return p.Conn.Lock(wctx, "d", "cut-off waiter") })
	requireNothing(t, got, "a second Lock while the first is held")
	p.Cut()
	r := recvWithin(t, got, s.opts.SessionBound+longWait, "the cut-off waiter's Lock")
	require.Error(t, r.err, "a Lock waiting on a cut-off Conn must fail, not stay blocked")
	require.False(t, topo.IsErrType(r.err, topo.Timeout) && wctx.Err() != nil,
		"the cut-off waiter's Lock only returned when its context ended: %v", r.err)
	p.Heal()
	requireNothingLeftBehind(s, ctx, l1, "a cut-off waiter")
}

// testPartitionReuse is issue 10's stale-Unlock sequence under a real
// partition: A holds d and is cut off until the store expires its session
// (B's TryLock then succeeds, and at that moment A's Check already fails);
// d is emptied and re-created (so the store may reuse lock entry names); C
// locks d; the partition heals; A's Unlock returns LockLost and deletes
// nothing: C still holds, and D's TryLock fails.
func testPartitionReuse(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a := s.partitioned()
	b, c, d := s.conn(), s.conn(), s.conn()

	mustCreate(t, ctx, b, "d/f", "x")
	la, err := a.Conn.Lock(ctx, "d", "A")
	require.NoError(t, err)
	a.Cut()

	deadline := time.Now().Add(s.opts.SessionBound + longWait)
	var lb topo.LockDescriptor
	for lb == nil {
		lb, err = b.TryLock(shortCtx(t, promptWait), "d", "B")
		if err != nil {
			requireCode(t, err, topo.NodeExists, "B's TryLock while A may still hold d")
			require.Truef(t, time.Now().Before(deadline), "the store did not expire the cut-off holder's session within %v", s.opts.SessionBound+longWait)
			lb = nil
			<-time.After(poll) // the polling interval of this poll-until
			continue
		}
	}
	requireLockGone(t, la, false, "the cut-off holder's Check when B's TryLock succeeded")
	require.NoError(t, lb.Unlock(ctx))

	require.NoError(t, b.Delete(ctx, "d/f", nil))
	mustCreate(t, ctx, b, "d/f", "y")
	lc := mustLock(t, ctx, c, "d", "C")

	a.Heal()
	requireLostAfterHeal(t, ctx, la, "A")
	requireCode(t, la.Unlock(ctx), topo.LockLost, "A's Unlock of its lost lock after the partition healed")
	require.NoError(t, lc.Check(ctx), "C's lock after A's stale Unlock")
	_, err = d.TryLock(shortCtx(t, promptWait), "d", "D")
	requireCode(t, err, topo.NodeExists, "D's TryLock while C holds d (after A's stale Unlock)")
	require.NoError(t, lc.Unlock(ctx))
}
