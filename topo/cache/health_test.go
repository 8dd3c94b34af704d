package cache_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestHealthAfterClose: once Close returned, State().Health is Closed (it
// said Healthy) and Hooks.OnHealth was told, with LeaveConnOpen or not,
// on memorytopo, etcd, ZooKeeper and Consul.
func TestHealthAfterClose(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		for i, leave := range []bool{false, true} {
			ctx := testCtx(t)
			f := []string{"f", "g"}[i]
			conn := open()
			var mu sync.Mutex
			var told []cache.Health
			c := wrap(t, conn, cache.Options{LeaveConnOpen: leave, Hooks: cache.Hooks{OnHealth: func(h cache.Health, _ time.Time) {
				mu.Lock()
				defer mu.Unlock()
				told = append(told, h)
			}}})
			_, err := c.Create(ctx, f, []byte("x"))
			require.NoError(t, err)
			waitHolds(t, ctx, c, f, "x")
			require.Equal(t, cache.Healthy, c.State().Health)
			c.Close()
			require.Equal(t, cache.Closed, c.State().Health, "State().Health after Close (LeaveConnOpen %v)", leave)
			require.Equal(t, "closed", c.State().Health.String())
			c.Close()
			require.Equal(t, cache.Closed, c.State().Health)
			mu.Lock()
			require.Equal(t, []cache.Health{cache.Closed}, told)
			mu.Unlock()
			if leave {
				conn.Close()
			}
		}
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
	t.Run("zk", func(t *testing.T) { run(t, zkOpen(t, zktest.Start(t), newRoot(), false)) })
	t.Run("consul", func(t *testing.T) { run(t, consulOpen(t, consultest.Start(t), newRoot())) })
}
