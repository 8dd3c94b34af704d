package zk2topo

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestSemaphoreFIFO: waiters on a full semaphore are admitted in the order
// they queued, each release admitting the next one only. The waiters queue
// on the lock of the semaphore's directory: its entries are the children
// of <root>/d/locks.
func TestSemaphoreFIFO(t *testing.T) {
	root := freshRoot(t)
	conns := make([]topo.Conn, 3)
	for i := range conns {
		conns[i] = openConn(t, []string{testServer}, root)
	}
	raw := rawConn(t)
	queued := func(t *testing.T, _ string, n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			kids, _, err := raw.Children(root + "/d/locks")
			return (err == nil && len(kids) == n) || (err == zk.ErrNoNode && n == 0)
		}, time.Minute, 5*time.Millisecond)
	}
	test.RequireSemaphoreFIFO(t, conns, 2, 10, queued)
}
