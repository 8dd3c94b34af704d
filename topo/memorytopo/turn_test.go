package memorytopo_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestLockTurnGap: n contenders loop on one lock, each queueing again
// right after its Unlock; the test lets a holder release only once every
// other contender has queued, so that the lock's order alone decides who
// goes next. A FIFO lock then serves them in a fixed rotation: between two
// turns of one contender, exactly n acquisitions, for each of 4n turns
// (an "every contender acquired" count would not see a contender passed
// by others, or a releaser taking its lock straight back).
func TestLockTurnGap(t *testing.T) {
	const n = 6
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	gate, err := c.Lock(ctx, "d", "gate")
	require.NoError(t, err)
	type turn struct {
		i       int
		release chan struct{}
	}
	turns := make(chan turn)
	errs := make(chan error, n)
	for i := range n {
		w := newConn(t, f)
		go func() {
			for {
				ld, err := w.Lock(ctx, "d", fmt.Sprintf("c%d", i))
				if err != nil {
					errs <- err
					return
				}
				release := make(chan struct{})
				select {
				case turns <- turn{i, release}:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
				<-release
				if err := ld.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c, "d") == i+2 }, waitLimit, poll)
	}
	require.NoError(t, gate.Unlock(ctx))
	last := make([]int, n)
	for k := 1; k <= 4*n; k++ {
		var got turn
		select {
		case got = <-turns:
		case err := <-errs:
			require.NoError(t, err)
		}
		if k <= n {
			require.Equal(t, k-1, got.i, "the first turns go in the order of queueing")
		} else {
			require.Equal(t, n, k-last[got.i], "contender %d: acquisitions between its turns", got.i)
		}
		last[got.i] = k
		// The holder and every other contender queued: n entries.
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c, "d") == n }, waitLimit, poll)
		close(got.release) // it queues again, behind the others
	}
	// The contenders' Conns close at the test's end: their next Lock
	// returns Closed.
}

// TestLockWaiterOnAdoptedSession: a Lock waiting on a Conn's session
// whose candidacy another Conn resumed (adopting that session) returns
// LockLost at once, as the Conn's other claims on the session are lost,
// rather than waiting for a lock it could no longer hold, or forever
// once its Conn closed (whose Close no longer ends that session).
func TestLockWaiterOnAdoptedSession(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0, c1, c2 := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "q/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c0.Lock(ctx, "q", "holder")
	require.NoError(t, err)
	p := participate(t, c1, "el", "one")
	_, err = p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		ld, err := c1.Lock(ctx, "q", "waiter")
		if err == nil {
			err = fmt.Errorf("granted: %v", ld.Unlock(ctx))
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "q") == 2 }, waitLimit, poll)
	info, err := p.ResumeInfo()
	require.NoError(t, err)
	_, err = c2.ResumeLeaderParticipation(ctx, "el", "one", info)
	require.NoError(t, err)
	requireCode(t, <-got, topo.LockLost)
	require.NoError(t, holder.Unlock(ctx))
}
