package memorytopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestHandoverCostFlat: with N = 2, 20 and 200 waiters parked on one lock,
// one handover (the holder's Unlock until the next waiter holds) makes the
// same number of store requests and wakes exactly one waiter, whatever N
// is: each waiter waits on its predecessor alone (issue 33).
func TestHandoverCostFlat(t *testing.T) {
	type cost struct{ requests, wakeups int64 }
	handover := func(t *testing.T, n int) cost {
		ctx := testCtx(t)
		f := memorytopo.NewFactory()
		c := newConn(t, f)
		_, err := c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		holder, err := c.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		type result struct {
			i   int
			ld  topo.LockDescriptor
			err error
		}
		got := make(chan result, n)
		for i := range n {
			w := newConn(t, f)
			go func() {
				ld, err := w.Lock(ctx, "d", "waiter")
				got <- result{i, ld, err}
			}()
			// Queue them one by one, so their order is known.
			require.Eventually(t, func() bool { return memorytopo.LockEntries(c, "d") == i+2 }, waitLimit, poll)
		}
		require.Eventually(t, func() bool { return memorytopo.Awaited(c, "d") == n }, waitLimit, poll, "every waiter parks on its predecessor")
		count, reset := memorytopo.CountRequests(c)
		reset()
		require.NoError(t, holder.Unlock(ctx))
		r := <-got
		require.NoError(t, r.err)
		require.Equal(t, 0, r.i, "the first waiter holds next")
		req, wake := count()
		// Let the others through, in order, so the test ends cleanly.
		require.NoError(t, r.ld.Unlock(ctx))
		for i := 1; i < n; i++ {
			r := <-got
			require.NoError(t, r.err)
			require.Equal(t, i, r.i, "waiters hold in queue order")
			require.NoError(t, r.ld.Unlock(ctx))
		}
		return cost{req, wake}
	}
	var costs []cost
	for _, n := range []int{2, 20, 200} {
		costs = append(costs, handover(t, n))
	}
	t.Logf("store requests and wake-ups of one handover at N = 2, 20, 200: %v", costs)
	require.Equal(t, int64(1), costs[0].wakeups, "one handover wakes one waiter")
	require.Equal(t, costs[0], costs[1], "N = 20 costs what N = 2 does")
	require.Equal(t, costs[0], costs[2], "N = 200 costs what N = 2 does")
}
