package test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testElectionInvalid: an empty name or id is InvalidArgument.
func testElectionInvalid(s *store) {
	t, c := s.t, s.conn()

	_, err := c.NewLeaderParticipation("", "id")
	requireCode(t, err, topo.InvalidArgument, "NewLeaderParticipation with an empty name")
	_, err = c.NewLeaderParticipation("elec", "")
	requireCode(t, err, topo.InvalidArgument, "NewLeaderParticipation with an empty id")
}

// requireLeader waits until observer reports id as the current leader.
func requireLeader(t *testing.T, ctx context.Context, observer topo.LeaderParticipation, id, what string) {
	t.Helper()
	var last string
	var lastErr error
	ok := eventually(func() bool {
		last, lastErr = observer.GetCurrentLeaderID(ctx)
		return lastErr == nil && last == id
	})
	require.Truef(t, ok, "%s: want leader %q, last GetCurrentLeaderID gave %q, %v", what, id, last, lastErr)
}

// testElectionHandover: one leader at a time; the current leader id is
// visible to everyone ("" when nobody leads); Stop hands leadership over,
// cancels the leader's context, and makes WaitForLeadership Interrupted.
func testElectionHandover(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()

	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	observer := participate(t, c3, "elec", "observer")

	id, err := observer.GetCurrentLeaderID(ctx)
	require.NoError(t, err, "GetCurrentLeaderID before anyone leads")
	require.Empty(t, id, "GetCurrentLeaderID before anyone leads")

	lctx1, err := p1.WaitForLeadership()
	require.NoError(t, err)
	require.NoError(t, lctx1.Err(), "a fresh leadership context is live")
	again, err := p1.WaitForLeadership()
	require.NoError(t, err)
	require.True(t, again == lctx1, "WaitForLeadership while leading returns the same context")
	requireLeader(t, ctx, observer, "id1", "after p1 leads")
	requireLeader(t, ctx, p2, "id1", "p2's view after p1 leads")

	// The election entry is ephemeral, and not a file.
	entries, err := c3.ListDir(ctx, "elections", true)
	require.NoError(t, err, "ListDir(elections)")
	e := entry(t, entries, "elec")
	require.True(t, e.Ephemeral, "the election entry must be Ephemeral in a full ListDir")
	_, err = c3.List(ctx, "")
	requireCode(t, err, topo.NoNode, "List while only an election exists")

	got := leadAsync(p2)
	requireNothing(t, got, "p2's WaitForLeadership while p1 leads")
	require.NoError(t, lctx1.Err(), "p1 still leads")

	p1.Stop()
	require.Error(t, lctx1.Err(), "Stop must cancel the leadership context before it returns")
	r, _ := recv(t, got, "p2's WaitForLeadership after p1 stopped")
	require.NoError(t, r.err)
	require.NoError(t, r.ctx.Err())
	require.Error(t, lctx1.Err(), "two leaders at once")
	requireLeader(t, ctx, observer, "id2", "after the handover")

	_, err = p1.WaitForLeadership()
	requireCode(t, err, topo.Interrupted, "WaitForLeadership after Stop")
	p1.Stop() // idempotent

	p2.Stop()
	require.Error(t, r.ctx.Err(), "Stop must cancel the leadership context")
	requireLeader(t, ctx, observer, "", "after every leader stopped")
	_, err = c3.List(ctx, "")
	requireCode(t, err, topo.NoNode, "List after the election ended")
}

// testElectionStopWhileWaiting: Stop on a waiting participant makes its
// WaitForLeadership return Interrupted, and it never leads.
func testElectionStopWhileWaiting(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()

	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")

	lctx1, err := p1.WaitForLeadership()
	require.NoError(t, err)
	got := leadAsync(p2)
	requireNothing(t, got, "p2's WaitForLeadership while p1 leads")
	p2.Stop()
	r, _ := recv(t, got, "WaitForLeadership after Stop")
	requireCode(t, r.err, topo.Interrupted, "a waiting WaitForLeadership after Stop")
	require.NoError(t, lctx1.Err(), "stopping a waiter does not affect the leader")
	requireLeader(t, ctx, p1, "id1", "after the waiter stopped")

	p1.Stop()
	requireLeader(t, ctx, p2, "", "after the leader stopped with the only other participant stopped")
}

// stopRaceRounds is how many times testElectionStopRacesWait races Stop
// against a starting WaitForLeadership.
const stopRaceRounds = 40

// testElectionStopRacesWait: Stop racing a WaitForLeadership queued
// behind a leader -- before, during and just after the creation of its
// candidacy, as its wait looks at the queue -- makes it return
// Interrupted, as Stop documents, never LockLost: a waiter that sees its
// entry gone (withdrawn by Stop) before it sees its candidacy ended has
// lost no session. Nothing is left behind: once the
// leader stops, nobody leads. Stop's moment varies by a growing number of
// yields, not by sleeps: no round is sure to hit the window, all rounds
// must give Interrupted.
func testElectionStopRacesWait(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "leader")
	_, err := p1.WaitForLeadership()
	require.NoError(t, err)
	for i := range stopRaceRounds {
		p := participate(t, c2, "elec", fmt.Sprint("waiter", i))
		got := leadAsync(p)
		for range 1 << (i % 13) {
			runtime.Gosched()
		}
		p.Stop()
		what := fmt.Sprintf("round %d: a WaitForLeadership racing Stop", i)
		r, _ := recv(t, got, what)
		requireCode(t, r.err, topo.Interrupted, what)
	}
	requireLeader(t, ctx, p1, "leader", "after the waiters stopped")
	p1.Stop()
	requireLeader(t, ctx, participate(t, c2, "elec", "observer"), "", "after the leader stopped: a stopped waiter's entry was left behind")
}

// testWaitForNewLeader: the stream starts with the current leader and then
// sends each new one; it closes when its context ends.
func testWaitForNewLeader(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()

	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	observer := participate(t, c3, "elec", "observer")

	// Subscribed before anyone leads: the first id is the first leader's.
	early, cancelEarly := context.WithCancel(ctx)
	defer cancelEarly()
	earlyCh := mustWaitForNewLeader(t, early, observer)

	_, err := p1.WaitForLeadership()
	require.NoError(t, err)
	requireNextLeader(t, earlyCh, "id1", "WaitForNewLeader subscribed before anyone led")

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := mustWaitForNewLeader(t, wctx, observer)
	first, ok := recv(t, ch, "WaitForNewLeader's first id")
	require.True(t, ok, "WaitForNewLeader closed early")
	require.Equal(t, "id1", first, "WaitForNewLeader sends the current leader first")

	// Subscribed while p1 leads but read only after the handover: the
	// first id is still the leader current at the time of the call.
	unread := mustWaitForNewLeader(t, wctx, observer)

	got := leadAsync(p2)
	p1.Stop()
	r, _ := recv(t, got, "p2's WaitForLeadership after p1 stopped")
	require.NoError(t, r.err)
	requireNextLeader(t, ch, "id2", "WaitForNewLeader after a handover")
	requireNextLeader(t, earlyCh, "id2", "the earlier WaitForNewLeader after a handover")
	// A second handover before unread is read, so that a WaitForNewLeader
	// keeping only the latest leader until read has had a whole handover
	// to take in id2 (and drop id1), however fast the first one was.
	p3 := participate(t, c1, "elec", "id3")
	got = leadAsync(p3)
	p2.Stop()
	r, _ = recv(t, got, "p3's WaitForLeadership after p2 stopped")
	require.NoError(t, r.err)
	requireNextLeader(t, ch, "id3", "WaitForNewLeader after a second handover")
	requireNextLeader(t, earlyCh, "id3", "the earlier WaitForNewLeader after a second handover")
	first, ok = recv(t, unread, "the first id of a WaitForNewLeader read after two handovers")
	require.True(t, ok, "WaitForNewLeader closed early")
	require.Equal(t, "id1", first, "WaitForNewLeader must send the leader current at the time of the call first, even when read after handovers")
	// id2 may or may not come next: its subscription reads the store's
	// state when woken, and a read that is late (a busy machine) finds
	// id3 already leading; "rapid changes may be coalesced". id3, the
	// leader now, must come.
	requireNextLeader(t, unread, "id3", "a WaitForNewLeader read after two handovers")

	cancel()
	requireClosedEventually(t, ch, "WaitForNewLeader after its context was cancelled")
	cancelEarly()
	requireClosedEventually(t, earlyCh, "WaitForNewLeader after its context was cancelled")
}

// testWaitForNewLeaderReelected: WaitForNewLeader sends every new term,
// so a participant that resigns and leads again is sent again, though its
// id did not change; a Proclaim (the same term) is not a new term.
func testWaitForNewLeaderReelected(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	observer := participate(t, c2, "elec", "observer")

	_, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := mustWaitForNewLeader(t, wctx, observer)
	first, ok := recv(t, ch, "WaitForNewLeader's first id")
	require.True(t, ok, "WaitForNewLeader closed early")
	require.Equal(t, "id1", first)

	require.NoError(t, p1.Proclaim(ctx, []byte("v2")))
	require.NoError(t, p1.Resign(ctx))
	_, err = p1.Campaign(ctx, []byte("v3"))
	require.NoError(t, err)
	// The next id is the new term's: id1 again.
	next, ok := recv(t, ch, "WaitForNewLeader after the leader resigned and was elected again")
	require.True(t, ok, "WaitForNewLeader closed early")
	require.Equal(t, "id1", next, "a re-elected leader's new term is a new leader for WaitForNewLeader")
	l, err := observer.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "id1", l.ID)
	cancel()
	requireClosedEventually(t, ch, "WaitForNewLeader after its context was cancelled")
}

// requireNextLeader reads ids from ch until want (tolerating "" for a
// moment without a leader, and repeats of earlier ids).
func requireNextLeader(t *testing.T, ch <-chan string, want, what string) {
	t.Helper()
	for {
		id, ok := recv(t, ch, what)
		require.Truef(t, ok, "%s: channel closed while waiting for %q", what, want)
		if id == want {
			return
		}
	}
}

// requireClosedEventually drains ch until it closes (within longWait).
func requireClosedEventually[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	for {
		if _, ok := recv(t, ch, what); !ok {
			return
		}
	}
}

// testElectionOneLeader: several participants on separate connections all
// lead in turn, never two at once: each sets an in-leadership flag when its
// WaitForLeadership returns, and clears it just before Stop.
func testElectionOneLeader(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const n = 4
	var leading atomic.Int32
	var led atomic.Int32
	var overlap atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, n)
	parts := make([]topo.LeaderParticipation, n)
	for i := range n {
		p := participate(t, s.conn(), "elec", fmt.Sprintf("id%d", i))
		parts[i] = p
	}
	observer, err := s.conn().NewLeaderParticipation("elec", "observer")
	require.NoError(t, err)
	for i := range n {
		wg.Go(func() {
			p := parts[i]
			lctx, err := p.WaitForLeadership()
			if err != nil {
				errs <- fmt.Errorf("participant %d: %w", i, err)
				return
			}
			if leading.Add(1) != 1 {
				overlap.Store(true)
			}
			led.Add(1)
			id, err := observer.GetCurrentLeaderID(ctx)
			if err != nil || id != fmt.Sprintf("id%d", i) {
				errs <- fmt.Errorf("participant %d leads but GetCurrentLeaderID says %q, %v", i, id, err)
			}
			if lctx.Err() != nil {
				errs <- fmt.Errorf("participant %d: leadership context cancelled while leading", i)
			}
			leading.Add(-1)
			p.Stop()
		})
	}
	requireNoWorkerErrs(t, &wg, errs)
	require.False(t, overlap.Load(), "two participants led at once")
	require.EqualValues(t, n, led.Load())
	requireLeader(t, ctx, observer, "", "after every participant stopped")
}

// testElectionsIndependent: elections with different names (one a string
// prefix of the other, or path names under a common parent) have their own
// leaders.
func testElectionsIndependent(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()

	names := []string{"elec", "elec2", "svc/a", "svc/b"}
	for _, name := range names {
		p1 := participate(t, c1, name, "first-"+name)
		_, err := p1.WaitForLeadership()
		require.NoErrorf(t, err, "WaitForLeadership in election %q", name)
	}
	for _, name := range names {
		observer, err := c2.NewLeaderParticipation(name, "observer")
		require.NoError(t, err)
		requireLeader(t, ctx, observer, "first-"+name, "the leader of election "+name)
	}
	// A second candidate in one election waits, whatever the others do.
	p2 := participate(t, c2, "elec", "second")
	got := leadAsync(p2)
	requireNothing(t, got, "a second candidate while the first leads")
}
