package consultopo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestSemaphoreFIFO: waiters on a full semaphore are admitted in the order
// they queued, each release admitting the next one only. The waiters queue
// on the lock of the semaphore's directory: the one next in line holds its
// key, the others wait in the queue beside it.
func TestSemaphoreFIFO(t *testing.T) {
	root := testRoot(t)
	conns := make([]topo.Conn, 3)
	for i := range conns {
		conns[i] = newTestConn(t, root)
	}
	c := conns[0].(*Conn)
	key := c.dirPrefix("d") + lockName
	queued := func(t *testing.T, _ string, n int) {
		t.Helper()
		if n == 1 { // the first waiter takes the free key, queueing nothing
			require.Eventually(t, func() bool {
				pair, _, err := c.kv.Get(key, nil)
				require.NoError(t, err)
				return pair != nil && pair.Session != ""
			}, 30*time.Second, 5*time.Millisecond, "the first waiter should hold %s", key)
			return
		}
		waitQueued(t, c, key, n-1)
	}
	test.RequireSemaphoreFIFO(t, conns, 2, 10, queued)
}
