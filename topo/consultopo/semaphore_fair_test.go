package consultopo

import (
	"testing"

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
		waitQueued(t, c, key, n-1)
	}
	test.RequireSemaphoreFIFO(t, conns, 2, 10, queued)
}
