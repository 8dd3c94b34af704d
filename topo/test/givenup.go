package test

import (
	"context"
	"fmt"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/inspect"
)

// testPartitionUnlockGivenUp: the holder's Conn is cut off, and its
// Unlock's context ends before the store answers (whatever Unlock then
// returns: Timeout, or LockLost where the backend declared the session
// lost at the cut); the partition heals at once, well within the
// session's bound. The lock is released all the same: Done is closed when
// Unlock returns, Check fails, and the waiter queued behind gets the lock
// (the engine removes the entry once the store can be reached again). On
// memorytopo the given-up Unlock did nothing, and since the healed
// session lived on, the waiter waited for good (until the holder's Conn
// closed).
func testPartitionUnlockGivenUp(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	p := s.partitioned()
	c := s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	l, err := p.Conn.Lock(ctx, "d", "cut-off holder")
	require.NoError(t, err)
	unlockOnCleanup(t, l)
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c.Lock(s.partitionCtx(), "d", "waiter") })
	requireNothing(t, got, "a second Lock while the first is held")

	p.Cut()
	uerr := l.Unlock(shortCtx(t, shortWait))
	t.Logf("the cut-off holder's Unlock: %v", uerr)
	select {
	case <-l.Done():
	default:
		p.Heal()
		require.FailNow(t, "the holder's Done is open after its given-up Unlock returned")
	}
	p.Heal()

	r := recvWithin(t, got, s.opts.SessionBound+longWait, "the waiter's Lock after the holder's given-up Unlock, healed")
	require.NoError(t, r.err, "the waiter's Lock")
	require.Error(t, l.Check(ctx), "the old holder's Check once the waiter holds")
	require.NoError(t, r.l.Check(ctx), "the waiter's lock")
}

// testObserveOnlyGrantedTerms: two candidates take turns, each resigning
// as soon as it leads (once the other shows queued, through the Conn's
// inspect.QueueReader) and campaigning again at once (before the other
// is granted), while a third participant observes. Every leader
// Observe reports is one of the terms Campaign granted, with that term's
// id and token: a release's gap must not show anyone as the leader of a
// term nobody was granted. On Consul, a Conn that had just resigned took
// the free election key in the gap before the waiter's acquire, then gave
// it back (the order held), and an observer could read it as a new term
// of the resigned candidate (an id seen twice in a row, with a token no
// term had: 9 runs of 20 before the fix).
func testObserveOnlyGrantedTerms(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const turns = 30
	conns := s.conns(2)
	ps := []topo.LeaderParticipation{
		participate(t, conns[0], "e", "A"),
		participate(t, conns[1], "e", "B"),
	}
	obs := participate(t, s.conn(), "e", "observer")
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	leaders, err := obs.Observe(octx)
	require.NoError(t, err)
	var seen []topo.Leader
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for l := range leaders {
			seen = append(seen, l)
		}
	}()

	ids := []string{"A", "B"}
	type term struct {
		who   int
		token int64
		err   error
	}
	terms := make(chan term, 2)
	campaign := func(i int) {
		go func() {
			_, err := ps[i].Campaign(ctx, []byte(ids[i]))
			tm := term{who: i, err: err}
			if err == nil {
				var f topo.Fence
				if f, tm.err = ps[i].Term(); tm.err == nil {
					tm.token = f.Token()
				}
			}
			terms <- tm
		}()
	}
	granted := map[int64]string{}
	next := func(what string) int {
		tm, _ := recv(t, terms, what)
		require.NoError(t, tm.err, what)
		granted[tm.token] = ids[tm.who]
		return tm.who
	}
	// Before each Resign the other candidate is queued (where the Conn
	// reads its queues: inspect.QueueReader), so that the release's gap
	// is the only moment the key is free: a contender that arrives in
	// that gap, with nothing to tell it that others queue, may still
	// take a Consul key and give it back (the take reads the queue).
	queued := func(what string) {
		r, ok := topo.ConnAs[inspect.QueueReader](conns[0])
		if !ok {
			return
		}
		require.Truef(t, eventually(func() bool {
			st, err := r.Inspect(ctx, claims.Queue{Path: "e", Election: true})
			return err == nil && len(st.Waiting) == 1
		}), "%s: the other candidate never showed queued", what)
	}
	campaign(0)
	cur := next("A's first Campaign")
	campaign(1)
	for i := range turns {
		queued(fmt.Sprintf("turn %d", i))
		require.NoError(t, ps[cur].Resign(ctx), "turn %d: the leader's Resign", i)
		campaign(cur)
		cur = next("the next term")
	}
	ps[cur].Stop() // the other, queued, leads next
	last := next("the last term")
	ps[last].Stop()
	ocancel()
	<-collected

	for _, l := range seen {
		if l.ID == "" {
			continue
		}
		id, ok := granted[l.Token]
		require.Truef(t, ok, "Observe reported %q leading with token %d, which no term had (granted: %v; observed: %v)", l.ID, l.Token, granted, seen)
		require.Equalf(t, id, l.ID, "Observe reported the term of token %d led by %q; it was %q's", l.Token, l.ID, id)
	}
}

// testSemaphoreUnlockGivenUp: a holder's Unlock whose context has ended
// (or that fails otherwise before the record is written) returns that
// error, and a second Unlock says Interrupted, so the caller cannot try
// again: the slot must free all the same. The holder's own lock is
// released, and the next contender's probe finds it free and takes the
// slot. Before, the lock stayed held, the probe found the holder alive,
// and the slot was lost for as long as the holder's Conn lived.
func testSemaphoreUnlockGivenUp(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	held, err := newSemaphore(s, c1, "sem", 1).Acquire(ctx)
	require.NoError(t, err)
	requireOneOf(t, held.Unlock(cancelledCtx(t)), "an Unlock with an ended context", topo.Interrupted)
	requireCode(t, held.Unlock(ctx), topo.Interrupted, "a second Unlock")
	requireClosed(t, held.Done(), "the holder's Done after its Unlock")

	got := make(chan error, 1)
	var next topo.LockDescriptor
	go func() {
		var err error
		next, err = newSemaphore(s, c2, "sem", 1).Acquire(ctx)
		got <- err
	}()
	err, _ = recv(t, got, "Acquire after the holder's given-up Unlock")
	require.NoError(t, err)
	require.Greater(t, next.Token(), held.Token())
	require.NoError(t, next.Unlock(ctx))
}
