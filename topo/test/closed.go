package test

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// testCloseCalls: after Close (idempotent) every call returns Closed, and
// the store keeps its files.
func testCloseCalls(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, other := s.conn(), s.conn()

	v := mustCreate(t, ctx, c, "d/f", "x")
	p, err := c.NewLeaderParticipation("elec", "before")
	require.NoError(t, err)
	c.Close()
	c.Close()

	closed := func(err error, what string) {
		t.Helper()
		requireCode(t, err, topo.Closed, what+" after Close")
	}
	_, err = c.ListDir(ctx, "", true)
	closed(err, "ListDir")
	_, err = c.Create(ctx, "d/g", []byte("x"))
	closed(err, "Create")
	_, err = c.Update(ctx, "d/f", []byte("y"), nil)
	closed(err, "Update")
	_, err = c.Update(ctx, "d/f", []byte("y"), v)
	closed(err, "Update with a version")
	_, _, err = c.Get(ctx, "d/f")
	closed(err, "Get")
	n, err := backendkit.VersionNumber("d/f", v)
	require.NoError(t, err)
	_, err = c.GetVersion(ctx, "d/f", n)
	if s.opts.GetVersionUnsupported {
		requireOneOf(t, err, "GetVersion after Close", topo.Closed, topo.NoImplementation)
	} else {
		closed(err, "GetVersion")
	}
	_, err = c.List(ctx, "")
	closed(err, "List")
	closed(c.Delete(ctx, "d/f", nil), "Delete")
	_, err = c.Lock(ctx, "d", "x")
	closed(err, "Lock")
	_, err = c.LockWithTTL(ctx, "d", "x", time.Minute)
	closed(err, "LockWithTTL")
	_, err = c.LockName(ctx, "d", "x")
	closed(err, "LockName")
	_, err = c.TryLock(ctx, "d", "x")
	closed(err, "TryLock")
	_, ch, err := c.Watch(ctx, "d/f")
	closed(err, "Watch")
	require.Nil(t, ch)
	_, rch, err := c.WatchRecursive(ctx, "")
	closed(err, "WatchRecursive")
	require.Nil(t, rch)

	_, err = p.WaitForLeadership()
	closed(err, "WaitForLeadership of a participation made before Close")
	_, err = p.GetCurrentLeaderID(ctx)
	closed(err, "GetCurrentLeaderID")
	_, err = p.WaitForNewLeader(ctx)
	closed(err, "WaitForNewLeader")
	p.Stop()
	if p2, err := c.NewLeaderParticipation("elec", "after"); err != nil {
		closed(err, "NewLeaderParticipation")
	} else {
		_, err = p2.WaitForLeadership()
		closed(err, "WaitForLeadership of a participation made after Close")
	}

	// The store is unaffected.
	requireFile(t, ctx, other, "d/f", "x", v)
	l, err := other.TryLock(ctx, "d", "other")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}

// testCloseWatches: Close ends active watches with Interrupted and closes
// leader streams.
func testCloseWatches(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, other := s.conn(), s.conn()

	mustCreate(t, ctx, c, "w/f", "x")
	_, ch := mustWatch(t, ctx, c, "w/f", "Watch")
	_, rch := mustWatchRecursive(t, ctx, c, "w/", "WatchRecursive")

	leader := participate(t, other, "elec", "leader")
	_, err := leader.WaitForLeadership()
	require.NoError(t, err)
	observer, err := c.NewLeaderParticipation("elec", "observer")
	require.NoError(t, err)
	lch := mustWaitForNewLeader(t, ctx, observer)
	requireNextLeader(t, lch, "leader", "WaitForNewLeader")

	c.Close()
	waitWatchErr(t, ch, topo.Interrupted, "Watch after Close")
	waitRecursiveErr(t, rch, topo.Interrupted, "WatchRecursive after Close")
	requireClosedEventually(t, lch, "WaitForNewLeader after Close")
}

// testCloseReleases: Close releases the locks and leadership held through
// the connection, so others take them over; at the moment a successor wins
// the closed holder's Check already fails and its leadership context is
// already cancelled.
func testCloseReleases(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()

	mustCreate(t, ctx, c1, "d/f", "x")
	l1, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	p1, err := c1.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	lctx1, err := p1.WaitForLeadership()
	require.NoError(t, err)
	// A leader that watches its term (its first look, before the Close):
	// the Close's loss of the session, not a look after it, must end it.
	require.NoError(t, lctx1.Err(), "the leader's context")
	p2 := participate(t, c2, "elec", "id2")
	got := leadAsync(p2)
	requireNothing(t, got, "p2's WaitForLeadership while p1 leads")
	wctx, cancel := context.WithTimeout(ctx, longWait)
	defer cancel()
	locked := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(wctx, "d", "next") })
	requireNothing(t, locked, "a second Lock while the first is held")

	c1.Close()
	lr, _ := recv(t, locked, "the waiting Lock after the holder's connection closed")
	require.Error(t, l1.Check(ctx), "Check of a lock whose connection was closed, when the next holder's Lock returned")
	require.NoError(t, lr.err, "Lock of a lock whose holder's connection was closed")
	require.NoError(t, lr.l.Unlock(ctx))
	r, _ := recv(t, got, "p2's WaitForLeadership after the leader's connection closed")
	requireLeadershipGone(t, lctx1, "the closed leader's context when the next leader's WaitForLeadership returned")
	require.NoError(t, r.err)
	requireLeader(t, ctx, p2, "id2", "after the leader's connection closed")
}

// testCloseInterruptsWaiters: Close ends calls blocked on the connection
// (a Lock waiting for a holder, a WaitForLeadership waiting for a leader)
// with Closed or Interrupted.
func testCloseInterruptsWaiters(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	holder, c := s.conn(), s.conn()

	mustCreate(t, ctx, holder, "d/f", "x")
	l := mustLock(t, ctx, holder, "d", "holder")
	leader := participate(t, holder, "elec", "leader")
	_, err := leader.WaitForLeadership()
	require.NoError(t, err)

	waiter := lockAsync(t, func() (topo.LockDescriptor, error) { return c.Lock(ctx, "d", "waiter") })
	candidate := participate(t, c, "elec", "candidate")
	got := leadAsync(candidate)
	requireNothing(t, waiter, "Lock while held")
	requireNothing(t, got, "WaitForLeadership while another leads")

	c.Close()
	r, _ := recv(t, waiter, "a Lock waiting on a closed connection")
	requireOneOf(t, r.err, "a Lock waiting on a closed connection", topo.Closed, topo.Interrupted)
	lr, _ := recv(t, got, "a WaitForLeadership waiting on a closed connection")
	requireOneOf(t, lr.err, "a WaitForLeadership waiting on a closed connection", topo.Closed, topo.Interrupted)

	// The holder and the leader are unaffected.
	require.NoError(t, l.Check(ctx))
	requireLeader(t, ctx, leader, "leader", "after another candidate's connection closed")
	require.NoError(t, l.Unlock(ctx))
}

// testCloseClaimCalls: after Close, every call on a claim, fence or
// participation made through the Conn returns Closed: Check of a lock and
// of a term, Unlock (also a second one), and every LeaderParticipation
// method that returns an error, of a leader and of a participant that
// never campaigned.
func testCloseClaimCalls(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c := s.conn()

	mustCreate(t, ctx, c, "d/f", "x")
	l := mustLock(t, ctx, c, "d", "holder")
	leader := participate(t, c, "elec", "leader")
	_, err := leader.WaitForLeadership()
	require.NoError(t, err)
	term, err := leader.Term()
	require.NoError(t, err)
	idle, err := c.NewLeaderParticipation("elec2", "idle")
	require.NoError(t, err)
	c.Close()

	// Every call is checked, and every wrong code reported, before the
	// subtest fails.
	closed := func(err error, what string) {
		t.Helper()
		var te *topo.Error
		if !errors.As(err, &te) || !errors.Is(err, topo.Closed) {
			t.Errorf("%s after Close: want a %q *topo.Error, got %v (%T)", what, topo.Closed, err, err)
		}
	}
	closed(l.Check(ctx), "Check of a lock")
	closed(term.Check(ctx), "Check of a term")
	closed(l.Unlock(ctx), "Unlock")
	closed(l.Unlock(ctx), "a second Unlock")
	closed(l.Check(ctx), "Check of a lock after Unlock")
	for _, p := range []struct {
		name string
		p    topo.LeaderParticipation
	}{{"the leader's", leader}, {"an idle participant's", idle}} {
		_, err = p.p.WaitForLeadership()
		closed(err, p.name+" WaitForLeadership")
		_, err = p.p.Term()
		closed(err, p.name+" Term")
		_, err = p.p.Campaign(ctx, []byte("v"))
		closed(err, p.name+" Campaign")
		closed(p.p.Proclaim(ctx, []byte("v")), p.name+" Proclaim")
		_, err = p.p.Leader(ctx)
		closed(err, p.name+" Leader")
		_, err = p.p.Observe(ctx)
		closed(err, p.name+" Observe")
		_, err = p.p.ResumeInfo()
		closed(err, p.name+" ResumeInfo")
		_, err = p.p.GetCurrentLeaderID(ctx)
		closed(err, p.name+" GetCurrentLeaderID")
		_, err = p.p.WaitForNewLeader(ctx)
		closed(err, p.name+" WaitForNewLeader")
		closed(p.p.Resign(ctx), p.name+" Resign")
		p.p.Stop()
	}
}
