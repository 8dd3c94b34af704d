package claims_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

const longWait = 30 * time.Second

func newEngine(s *store) (*claims.Engine, *driver) {
	d := &driver{s: s}
	return claims.New(d, claims.Options{}), d
}

// eventually polls cond until it holds (or fails t after longWait).
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, longWait, time.Millisecond)
}

// TestOneHandoverWakesOneWaiter: waiters queue behind a holder, each
// waiting for its predecessor only; each Unlock grants the next waiter in
// order, and at most that waiter lists the queue again (none when its
// last list showed only its predecessor ahead; issue 33: no herd).
func TestOneHandoverWakesOneWaiter(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, _ := newEngine(s)
	holder, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	const n = 5
	type result struct {
		ld  topo.LockDescriptor
		err error
	}
	got := make(chan result, n)
	for i := range n {
		we, _ := newEngine(s)
		go func() {
			ld, err := we.LockName(ctx, "d", "w")
			got <- result{ld, err}
		}()
		// Queue the waiters one by one, so their order is known.
		eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == i+1 })
	}
	last := holder.Token()
	cur := holder
	for range n {
		s.mu.Lock()
		before := s.lists
		s.mu.Unlock()
		require.NoError(t, cur.Unlock(ctx))
		r := <-got
		require.NoError(t, r.err)
		cur = r.ld
		require.Greater(t, cur.Token(), last, "tokens grow across handovers")
		last = cur.Token()
		s.mu.Lock()
		lists := s.lists - before
		s.mu.Unlock()
		require.LessOrEqual(t, lists, 1, "one handover made %d waiters list the queue", lists)
	}
	require.NoError(t, cur.Unlock(ctx))
}

// TestTryLockNamesHolder: TryLock on a held lock fails at once with
// NodeExists naming the holder's contents and session.
func TestTryLockNamesHolder(t *testing.T) {
	s := newStore()
	e1, _ := newEngine(s)
	e2, _ := newEngine(s)
	ld, err := e1.TryLock(t.Context(), "d", "first")
	require.NoError(t, err)
	_, err = e2.TryLock(t.Context(), "d", "second")
	require.True(t, topo.IsErrType(err, topo.NodeExists), "%v", err)
	var held *topo.LockHeldError
	require.True(t, errors.As(err, &held))
	require.Equal(t, "first", held.Holder)
	require.Equal(t, "s1", held.Session)
	require.NoError(t, ld.Unlock(t.Context()))
}

// TestLostEndsEveryClaimBeforeReturn: Session.Lost ends the lock, the
// term and a waiter on the session before it returns.
func TestLostEndsEveryClaimBeforeReturn(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, d := newEngine(s)
	other, _ := newEngine(s)
	ld, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	p, err := e.NewLeaderParticipation("el", "me")
	require.NoError(t, err)
	lead, err := p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	// A waiter of this session, behind another Conn's holder.
	theirs, err := other.LockName(ctx, "w", "theirs")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { _, err := e.LockName(ctx, "w", "mine"); waited <- err }()
	eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })

	d.session().Lost()
	for what, ch := range map[string]<-chan struct{}{"lock": ld.Done(), "leadership": lead.Done(), "term": term.Done()} {
		select {
		case <-ch:
		default:
			t.Fatalf("the %s outlived its session", what)
		}
	}
	require.True(t, topo.IsErrType(<-waited, topo.LockLost))
	require.True(t, topo.IsErrType(ld.Check(ctx), topo.LockLost))
	require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.LockLost))
	require.True(t, topo.IsErrType(context.Cause(lead), topo.LockLost))
	_, err = p.Term()
	require.True(t, topo.IsErrType(err, topo.NotLeader))
	p.Stop()
	require.NoError(t, theirs.Unlock(ctx))
}

// TestWaitForNewLeaderSendsEachTerm: a participant re-elected in a new
// term is sent again; a Proclaim (same term) is not.
func TestWaitForNewLeaderSendsEachTerm(t *testing.T) {
	s := newStore()
	ctx, cancel := context.WithTimeout(t.Context(), longWait)
	defer cancel()
	e, _ := newEngine(s)
	p, err := e.NewLeaderParticipation("el", "a")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("1"))
	require.NoError(t, err)
	ids, err := p.WaitForNewLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", <-ids)
	require.NoError(t, p.Proclaim(ctx, []byte("2")))
	require.NoError(t, p.Resign(ctx))
	_, err = p.Campaign(ctx, []byte("3"))
	require.NoError(t, err)
	require.Equal(t, "a", <-ids, "the re-elected leader's new term")
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("3"), l.Value)
}

// TestCheckOrder: the context is checked before the arguments, and
// nothing reaches the driver for bad input.
func TestCheckOrder(t *testing.T) {
	s := newStore()
	e, _ := newEngine(s)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.Lock(done, "bad//path", "x")
	require.True(t, topo.IsErrType(err, topo.Interrupted), "%v", err)
	_, err = e.Lock(t.Context(), "bad//path", "x")
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	_, err = e.LockWithTTL(t.Context(), "d", "x", 0)
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	_, err = e.NewLeaderParticipation("", "id")
	require.Error(t, err)
	require.Empty(t, s.queues)
}

// TestWaiterGivesUp: a waiter whose ctx ends removes its own entry, and
// the next waiter behind it is served in its turn.
func TestWaiterGivesUp(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, _ := newEngine(s)
	ld, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = e.LockName(short, "d", "gives up")
	require.True(t, topo.IsErrType(err, topo.Timeout), "%v", err)
	list, _ := (&driver{s: s}).List(ctx, claims.Queue{Path: "d"})
	require.Len(t, list, 1)
	require.NoError(t, ld.Unlock(ctx))
}

// TestUnlockRemovesAfterFailure: an Unlock whose removal the store refuses
// reports it, the lock is released in the holder's view, and the engine
// removes the entry later, so the next waiter is granted.
func TestUnlockRemovesAfterFailure(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, _ := newEngine(s)
	other, _ := newEngine(s)
	ld, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	s.mu.Lock()
	s.failDeletes = 2
	s.mu.Unlock()
	require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.Unavailable))
	<-ld.Done()
	bounded, cancel := context.WithTimeout(ctx, longWait)
	defer cancel()
	next, err := other.LockName(bounded, "d", "next")
	require.NoError(t, err)
	require.Greater(t, next.Token(), ld.Token())
	require.NoError(t, next.Unlock(ctx))
}

// TestCloseEndsWaiters: Close makes a waiting Lock return Closed, with its
// entry removed, and later calls Closed.
func TestCloseEndsWaiters(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	holder, _ := newEngine(s)
	e, _ := newEngine(s)
	ld, err := holder.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { _, err := e.LockName(ctx, "d", "waiter"); waited <- err }()
	eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })
	e.Close()
	require.True(t, topo.IsErrType(<-waited, topo.Closed))
	list, _ := (&driver{s: s}).List(ctx, claims.Queue{Path: "d"})
	require.Len(t, list, 1, "the waiter's entry is removed")
	_, err = e.NewLeaderParticipation("el", "id")
	require.True(t, topo.IsErrType(err, topo.Closed))
	require.NoError(t, ld.Unlock(ctx))
}

// TestParticipateCarriesDriverLayouts: a participant made with Participate
// (etcd's native elections) campaigns in the driver's own queue, with its
// contents as the leader's id and its value published by
// WaitForLeadership; it is another queue than the election of that name.
func TestParticipateCarriesDriverLayouts(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, _ := newEngine(s)
	p := e.Participate(claims.Queue{Path: "/raw/prefix", Native: true}, "694d7a1c", []byte("me"))
	defer p.Stop()
	_, err := p.WaitForLeadership()
	require.NoError(t, err)
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "694d7a1c", l.ID)
	require.Equal(t, []byte("me"), l.Value)
	other, err := e.NewLeaderParticipation("/raw/prefix", "x")
	if err == nil {
		_, err = other.Leader(ctx)
		require.True(t, topo.IsErrType(err, topo.NoLeader), "%v", err)
	}
}

// TestSecondUnlockAfterLoss: the first Unlock of a lost lock says
// LockLost, every later one Interrupted, as after a successful Unlock.
func TestSecondUnlockAfterLoss(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, d := newEngine(s)
	ld, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	d.expire()
	require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.LockLost), "first Unlock of a lost lock")
	require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.Interrupted), "second Unlock")
}

// TestFenceGuardOfForeignFence: a Fence no engine issued has no Guard, and
// the zero Guard's Driver is nil (a backend's `g.Driver() != d` refuses
// it rather than panicking).
func TestFenceGuardOfForeignFence(t *testing.T) {
	g, ok := claims.FenceGuard(foreignFence{})
	require.False(t, ok)
	require.Nil(t, g.Driver())
}

type foreignFence struct{}

func (foreignFence) Token() int64                { return 1 }
func (foreignFence) Done() <-chan struct{}       { return nil }
func (foreignFence) Check(context.Context) error { return nil }
