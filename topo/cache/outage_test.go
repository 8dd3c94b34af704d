package cache_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestSessionExpiryZooKeeper: the Cache's ZooKeeper session expires while
// it is cut from the server (faultproxy) and another Conn updates, deletes
// and creates files; once the partition heals, memory equals the store
// (the deleted file gone, the new one there) and the Cache is Healthy.
func TestSessionExpiryZooKeeper(t *testing.T) {
	ctx := testCtx(t)
	addr := zktest.Start(t)
	root := newRoot()
	direct := zkOpen(t, addr, root, false)()
	defer direct.Close()
	for _, f := range []string{"f", "g", "d/x"} {
		_, err := direct.Create(ctx, f, []byte("one"))
		require.NoError(t, err)
	}
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{p.Addr()}, SessionTimeout: 2 * time.Second}, root)
	require.NoError(t, err)
	c := wrap(t, conn, cache.Options{MaxStaleness: time.Hour, ProbeInterval: 50 * time.Millisecond})
	defer c.Close()
	requireGet(t, ctx, c, "f", "one", true)
	// A lock entry of the Cache's session shows when the server expires it.
	_, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	p.Blackhole()
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)

	_, err = direct.Update(ctx, "f", []byte("two"), nil)
	require.NoError(t, err)
	require.NoError(t, direct.Delete(ctx, "g", nil))
	_, err = direct.Create(ctx, "h", []byte("h"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ld, err := direct.TryLock(ctx, "d", "y")
		if err != nil {
			return false
		}
		require.NoError(t, ld.Unlock(ctx))
		return true
	}, 30*time.Second, 10*time.Millisecond, "the server never expired the Cache's session")

	p.Heal()
	waitHolds(t, ctx, c, "f", "two")
	waitHolds(t, ctx, c, "h", "h")
	require.Eventually(t, func() bool {
		_, _, info, err := c.GetWithInfo(ctx, "g")
		return topo.IsErrType(err, topo.NoNode) && info.FromMemory
	}, 30*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	want, err := direct.List(ctx, "")
	require.NoError(t, err)
	got, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, kvStrings(want), kvStrings(got))
}

// TestDevAgentRestartConsul: a Consul dev agent restarts with nothing
// (keys gone, indexes starting over); the Cache's memory follows: the files
// it held are gone, and a file written after the restart is there. The
// revision the Cache reports after the restart (Info.Revision,
// State().Revision) is below the index of a write made after it: before
// the fix it stayed the highest index of the old agent (the Cache wrote
// f 50 times there), claiming changes the new agent had not made yet.
func TestDevAgentRestartConsul(t *testing.T) {
	ctx := testCtx(t)
	a := consultest.StartAgent(t)
	open := consulOpen(t, a.Addr(), newRoot())
	c := wrap(t, open(), cache.Options{MaxStaleness: time.Hour, ProbeInterval: 50 * time.Millisecond})
	defer c.Close()
	for _, f := range []string{"f", "g"} {
		_, err := c.Create(ctx, f, []byte("one"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, f, "one")
	}
	var last topo.Version
	for i := range 50 {
		var err error
		last, err = c.Update(ctx, "f", fmt.Appendf(nil, "%d", i), nil)
		require.NoError(t, err)
	}
	waitHolds(t, ctx, c, "f", "49")
	require.GreaterOrEqual(t, c.State().Revision, revisionOf(last))
	a.Restart(t)
	direct := open()
	defer direct.Close()
	_, err := direct.Create(ctx, "h", []byte("h"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "h", "h")
	for _, f := range []string{"f", "g"} {
		require.Eventually(t, func() bool {
			_, _, info, err := c.GetWithInfo(ctx, f)
			return topo.IsErrType(err, topo.NoNode) && info.FromMemory
		}, 30*time.Second, time.Millisecond, "%s survived the restart in memory", f)
	}
	require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	_, _, info, err := c.GetWithInfo(ctx, "h")
	require.NoError(t, err)
	require.True(t, info.FromMemory)
	after, err := direct.Create(ctx, "i", []byte("i"))
	require.NoError(t, err)
	require.Less(t, info.Revision, revisionOf(after), "Info.Revision after the agent lost its state (the old agent's last index was %d)", revisionOf(last))
	require.Less(t, c.State().Revision, revisionOf(after)+1, "State().Revision")
}

// kvStrings is a listing as path=value strings.
func kvStrings(kvs []topo.KVInfo) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Path+"="+string(kv.Value))
	}
	return out
}
