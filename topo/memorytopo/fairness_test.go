package memorytopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// fairConns opens k Conns on one Factory, and the Queued function that
// waits on the lock of "d" or election "e" through them.
func fairConns(t *testing.T, k int) ([]topo.Conn, test.Queued) {
	f := memorytopo.NewFactory()
	conns := make([]topo.Conn, k)
	for i := range conns {
		conns[i] = newConn(t, f)
	}
	c := conns[0].(*memorytopo.Conn)
	return conns, func(t *testing.T, kind string, n int) {
		t.Helper()
		count := func() int { return memorytopo.LockEntries(c, "d") }
		if kind == "election" {
			count = func() int { return memorytopo.ElectionEntries(c, "e") }
		}
		require.Eventually(t, func() bool { return count() == n }, waitLimit, poll)
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
		t.Run("NoStarvation/"+kind+"/oneConn", func(t *testing.T) {
			conns, queued := fairConns(t, 1)
			test.RequireNoStarvation(t, conns, kind, n, queued)
		})
		t.Run("NoStarvation/"+kind+"/manyConns", func(t *testing.T) {
			conns, queued := fairConns(t, n)
			test.RequireNoStarvation(t, conns, kind, n, queued)
		})
	}
}
