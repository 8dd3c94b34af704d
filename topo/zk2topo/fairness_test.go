package zk2topo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// fairConns opens k Conns on one fresh root, and the test.Queued function
// that counts the entries of the lock of "d" or of election "e" there
// with a raw client.
func fairConns(t *testing.T, k int) ([]topo.Conn, test.Queued) {
	t.Helper()
	root := freshRoot(t)
	conns := make([]topo.Conn, k)
	for i := range conns {
		conns[i] = openConn(t, []string{testServer}, root)
	}
	raw := rawConn(t)
	return conns, func(t *testing.T, kind string, n int) {
		t.Helper()
		parent := root + "/d/locks"
		if kind == "election" {
			parent = root + "/elections/e"
		}
		require.Eventually(t, func() bool {
			children, _, err := raw.Children(parent)
			return err == nil && len(entryNames(children)) == n
		}, time.Minute, time.Millisecond)
	}
}

// TestFairness: waiters acquire a lock, and candidates lead, in the order
// they queued; a contender that lets go and asks again queues behind the
// others, so that in a loop with no hold time nobody starves.
func TestFairness(t *testing.T) {
	const n = 10
	t.Run("LockFIFO", func(t *testing.T) {
		conns, queued := fairConns(t, 3)
		test.RequireLockFIFO(t, conns, n, queued)
	})
	t.Run("ElectionRotation", func(t *testing.T) {
		conns, queued := fairConns(t, 3)
		test.RequireElectionRotation(t, conns, n, queued)
	})
	for _, kind := range []string{"lock", "election"} {
		t.Run("NoStarvation/"+kind, func(t *testing.T) {
			conns, queued := fairConns(t, 4)
			test.RequireNoStarvation(t, conns, kind, n, queued)
		})
	}
}
