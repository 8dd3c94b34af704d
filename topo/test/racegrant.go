package test

import (
	"context"
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testElectionConcurrentCalls: many goroutines call WaitForLeadership,
// Campaign (some giving up while they wait), GetCurrentLeaderID and Term
// on one participant at once, while another participant leads and then
// resigns. The participant leads only once the other's term ended, every
// call that returns its term returns the same one, Stop ends every call
// (Interrupted) and the participant's term, and no candidacy of it is
// left behind to lead afterwards.
func testElectionConcurrentCalls(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	q := participate(t, c2, "elec", "q")
	qctx, err := q.WaitForLeadership()
	require.NoError(t, err)
	p := participate(t, c1, "elec", "p")
	observer, err := c2.NewLeaderParticipation("elec", "observer")
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		terms   = map[context.Context]int{}
		wg      sync.WaitGroup
		stopped = make(chan struct{})
		stop    sync.Once
	)
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	t.Cleanup(func() { stop.Do(func() { close(stopped) }); p.Stop(); wg.Wait() })
	lead := func(lctx context.Context, err error) error {
		if err != nil {
			return err
		}
		if qctx.Err() == nil {
			report(fmt.Errorf("p leads while q's term is live: two leaders"))
		}
		mu.Lock()
		terms[lctx]++
		mu.Unlock()
		return nil
	}
	for i := range 6 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stopped:
					return
				default:
				}
				var err error
				switch (i + n) % 4 {
				case 0:
					err = lead(p.WaitForLeadership())
				case 1:
					cctx, cancel := context.WithCancel(ctx)
					if n%3 == 0 {
						go cancel() // gives up at once, or while it waits
					}
					err = lead(p.Campaign(cctx, fmt.Appendf(nil, "%d/%d", i, n)))
					cancel()
				case 2:
					_, err = p.GetCurrentLeaderID(ctx)
				case 3:
					if _, err = p.Term(); topo.IsErrType(err, topo.NotLeader) {
						err = nil
					}
				}
				if err != nil && !topo.IsErrType(err, topo.Interrupted) {
					report(fmt.Errorf("worker %d, call %d: %w", i, (i+n)%4, err))
				}
			}
		})
	}
	requireNothing(t, errs, "the calls behind another leader")
	require.NoError(t, q.Resign(ctx))
	requireDone(t, qctx, "q's term after Resign")
	var tm topo.Fence
	require.True(t, eventually(func() bool {
		tm, err = p.Term()
		return err == nil
	}), "p does not lead after q resigned: %v", err)
	requireLeader(t, ctx, observer, "p", "after q resigned")
	p.Stop()
	requireClosed(t, tm.Done(), "p's term after Stop")
	stop.Do(func() { close(stopped) })
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	mu.Lock()
	require.Len(t, terms, 1, "the calls that returned p's term returned different terms")
	mu.Unlock()
	_, err = p.WaitForLeadership()
	requireCode(t, err, topo.Interrupted, "WaitForLeadership after Stop")
	// A candidacy left behind by a call would lead now.
	requireLeader(t, ctx, observer, "", "after p stopped")
}

// testLockCancelAtGrant: a waiter's context is cancelled while the holder
// unlocks, so that it ends as it is granted. Either the waiter returns a
// descriptor that holds the lock, or it returns Interrupted and the lock
// is free (at once, or, when the cancellation cut its Create short, once
// the entry it may have written is removed): a holder that no call
// returned never keeps the lock.
func testLockCancelAtGrant(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")
	const rounds = 16
	granted := 0
	for round := range rounds {
		l1, err := c1.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		waiter := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(wctx, "d", "waiter") })
		if round%2 == 0 {
			requireNothing(t, waiter, "Lock while held")
		}
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, l1.Unlock(ctx)) })
		wg.Go(cancel)
		wg.Wait()
		r, _ := recv(t, waiter, "a Lock cancelled as it is granted")
		what := fmt.Sprintf("round %d", round)
		if r.err != nil {
			requireCode(t, r.err, topo.Interrupted, what)
		} else {
			granted++
			require.NoError(t, r.l.Check(ctx), what)
			_, err := c3.TryLock(ctx, "d", "probe")
			requireCode(t, err, topo.NodeExists, what+": TryLock while the waiter holds")
			require.NoError(t, r.l.Unlock(ctx), what)
		}
		// Free at once after a wait that ended; after a Create that the
		// cancellation cut short, once the entry it may have written is
		// removed (etcd2topo removes it in the background).
		var l3 topo.LockDescriptor
		require.True(t, eventually(func() bool {
			l3, err = c3.TryLock(ctx, "d", "probe")
			return err == nil
		}), "%s: the lock is not free: %v", what, err)
		require.NoError(t, l3.Unlock(ctx))
	}
	t.Logf("granted %d of %d", granted, rounds)
}
