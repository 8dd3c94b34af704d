package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
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

// TestCatchUpAfterOutage: the Cache's Conn is cut from the store
// (faultproxy) for longer than MaxStaleness while another Conn updates f,
// so reads go to the store; when the cut heals, the backend's resumed
// watch is held back (gatedConn), as a watch still on its way through
// the outage's changes is. A read from memory not marked stale must then
// answer the update: before the fix the first successful probe made the
// Cache Healthy, and reads answered the old value from memory, unmarked,
// after the store had answered the new one. On etcd, ZooKeeper and
// Consul.
func TestCatchUpAfterOutage(t *testing.T) {
	onRealStores(t, false, requireCatchUp)
}

func requireCatchUp(t *testing.T, addr string, open func(addr string) topo.Conn) {
	ctx := testCtx(t)
	direct := open(addr)
	defer direct.Close()
	_, err := direct.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	g := newGated(open(p.Addr()))
	const maxStale = 200 * time.Millisecond
	c := wrap(t, g, cache.Options{MaxStaleness: maxStale, ProbeInterval: 50 * time.Millisecond})
	defer c.Close()
	defer g.release()
	requireGet(t, ctx, c, "f", "one", true)

	g.hold()
	p.Blackhole()
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
	_, err = direct.Update(ctx, "f", []byte("two"), nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return time.Since(c.State().Since) > maxStale }, 30*time.Second, time.Millisecond)
	read := func() ([]byte, cache.Info, error) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		b, _, info, err := c.GetWithInfo(rctx, "f")
		return b, info, err
	}
	_, info, _ := read()
	require.False(t, info.FromMemory, "past MaxStaleness the store answers")

	p.Heal()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for healthy := false; !healthy; {
		healthy = c.State().Health == cache.Healthy
		b, info, err := read()
		if err == nil && info.FromMemory && !info.Stale {
			require.Equal(t, "two", string(b), "read from memory, not marked stale, once the store answered again (health %v)", c.State().Health)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the Cache never turned Healthy again")
		}
	}
	requireGet(t, ctx, c, "f", "two", true)
}
