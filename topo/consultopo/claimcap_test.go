package consultopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// TestClaimsUnderConnCap: more contenders waiting on one Conn than its
// agent allows connections per client address, the Conn's bound on
// blocking queries set below it (as Options.MaxBlockingQueries asks).
// Each waiter's wait is a blocking query; none may be refused (429: they
// took no slot of any bound), a plain write of the same Conn goes through
// while they wait, and every waiter gets the lock in turn. (The waiters
// queue one at a time: the Conn does not bound its other requests.)
func TestClaimsUnderConnCap(t *testing.T) {
	const connCap, bound, waiters = 20, 10, 30
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{MaxConnsPerClient: connCap})
	opts := testOptions()
	opts.Address, opts.MaxBlockingQueries = a.Addr(), bound
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err = c.Create(ctx, "d/f", []byte("v0"))
	require.NoError(t, err)

	first, err := c.Lock(ctx, "d", "first")
	require.NoError(t, err)
	got := make(chan error, waiters)
	for i := range waiters {
		go func() {
			l, err := c.Lock(ctx, "d", fmt.Sprint("waiter", i))
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
		waitQueued(t, c, c.key("d/"+lockName), i+1)
	}
	held, waiting := c.claimSlots.usage()
	require.LessOrEqual(t, held, bound/2)
	t.Logf("with every contender queued: %d claim queries out, %d waiting for a slot", held, waiting)
	_, err = c.Update(ctx, "d/f", []byte("v1"), nil)
	require.NoError(t, err, "a plain write while the waiters wait")
	require.NoError(t, first.Unlock(ctx))
	for range waiters {
		require.NoError(t, <-got)
	}
}
