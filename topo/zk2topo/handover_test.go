package zk2topo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHandoverCostFlat: in a loop of n contenders acquiring and releasing
// one lock (or leadership) through 4 Conns, each acquisition is one
// handover, and neither the requests the Conns send nor the watch events
// the server sends them per acquisition grow with n: a release wakes the
// one waiter next in line (its exists watch on its predecessor), not
// every waiter. (Counted, not timed: docs/roundtrips.md.)
func TestHandoverCostFlat(t *testing.T) {
	const measured = 60
	for _, kind := range []string{"lock", "election"} {
		t.Run(kind, func(t *testing.T) {
			var reqs, events []float64
			for _, n := range []int{2, 20, 200} {
				var rc rtCounter
				root := freshRoot(t)
				conns := make([]*Conn, 4)
				for i := range conns {
					// Long sessions: a session given up under load ends
					// its contenders' claims (LockLost), and nothing here
					// is about sessions (etcd2topo's twin uses 30 s leases).
					c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 30 * time.Second, Dialer: rc.dial}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					conns[i] = c
				}
				if kind == "lock" {
					_, err := conns[0].Create(context.Background(), "d/f", nil)
					require.NoError(t, err)
				}
				mark := int64(n + 5) // every contender has queued at least once
				var r0, r1, e0, e1 int64
				var acq atomic.Int64
				ctx, cancel := context.WithCancel(context.Background())
				errs := make(chan error, n)
				var wg sync.WaitGroup
				for i := range n {
					c := conns[i%len(conns)]
					id := fmt.Sprintf("c%d", i)
					wg.Go(func() {
						for ctx.Err() == nil {
							release, err := acquire(ctx, c, kind, id)
							if err != nil {
								if ctx.Err() == nil {
									errs <- err
								}
								return
							}
							switch acq.Add(1) {
							case mark:
								r0, e0 = rc.load(), rc.loadEvents()
							case mark + measured:
								r1, e1 = rc.load(), rc.loadEvents()
								cancel()
							}
							release()
						}
					})
				}
				wg.Wait()
				cancel()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				r, e := float64(r1-r0)/measured, float64(e1-e0)/measured
				t.Logf("%s n=%d: %.1f requests and %.1f watch events per acquisition", kind, n, r, e)
				reqs, events = append(reqs, r), append(events, e)
			}
			for i := 1; i < len(reqs); i++ {
				require.LessOrEqual(t, reqs[i], 1.5*reqs[0]+2, "requests per handover grow with the number of waiters: %v", reqs)
				require.LessOrEqual(t, events[i], 1.5*events[0]+2, "watch events per handover grow with the number of waiters: %v", events)
			}
		})
	}
}

// acquire takes the lock of "d" or leads election "e" once, as id, and
// returns what lets go of it.
func acquire(ctx context.Context, c *Conn, kind, id string) (func(), error) {
	if kind == "lock" {
		l, err := c.Lock(ctx, "d", id)
		if err != nil {
			return nil, err
		}
		return func() { _ = l.Unlock(context.Background()) }, nil
	}
	p, err := c.NewLeaderParticipation("e", id)
	if err != nil {
		return nil, err
	}
	if _, err := p.Campaign(ctx, nil); err != nil {
		p.Stop()
		return nil, err
	}
	return p.Stop, nil
}
