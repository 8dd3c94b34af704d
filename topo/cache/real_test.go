package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

var roots atomic.Int64

// newRoot returns a root no other test of this process uses.
func newRoot() string { return fmt.Sprintf("/cachetest/%d-%d", time.Now().UnixNano(), roots.Add(1)) }

func etcdOpen(t testing.TB, endpoints, root string) func() topo.Conn {
	return func() topo.Conn {
		c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: strings.Split(endpoints, ","), LockTTL: 3 * time.Second}, root)
		require.NoError(t, err)
		return c
	}
}

func zkOpen(t testing.TB, addr, root string, linearizable bool) func() topo.Conn {
	return func() topo.Conn {
		c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, LinearizableReads: linearizable}, root)
		require.NoError(t, err)
		return c
	}
}

func consulOpen(t testing.TB, addr, root string) func() topo.Conn {
	root = strings.TrimPrefix(root, "/")
	return func() topo.Conn {
		c, err := consultopo.NewConn(consultopo.Options{Address: addr}, root)
		require.NoError(t, err)
		return c
	}
}

// unusedFaults fills the suite's required fault options, which the read
// groups never use.
func unusedFaults() test.Options {
	return test.Options{
		ExpireSession: func(t *testing.T, _ topo.Conn) { t.Fatal("not used by the read groups") },
		Partition:     func(t *testing.T) test.Partitioned { t.Fatal("not used by the read groups"); return test.Partitioned{} },
		SessionBound:  time.Second,
		FaultyStore:   func(t *testing.T) test.FaultyStore { t.Fatal("not used by the read groups"); return test.FaultyStore{} },
	}
}

// TestSuiteEtcd runs the read groups of the conformance suite through
// Caches on a real etcd.
func TestSuiteEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	runSuite(t, func(t *testing.T) func() topo.Conn { return etcdOpen(t, addr, newRoot()) }, unusedFaults())
}

// TestSuiteZooKeeper runs the read groups of the conformance suite through
// Caches on a real ZooKeeper.
func TestSuiteZooKeeper(t *testing.T) {
	addr := zktest.Start(t)
	opts := unusedFaults()
	opts.GetVersionUnsupported = true
	runSuite(t, func(t *testing.T) func() topo.Conn { return zkOpen(t, addr, newRoot(), false) }, opts)
}

// TestSuiteConsul runs the read groups of the conformance suite through
// Caches on a real Consul agent.
func TestSuiteConsul(t *testing.T) {
	addr := consultest.Start(t)
	opts := unusedFaults()
	opts.GetVersionUnsupported = true
	runSuite(t, func(t *testing.T) func() topo.Conn { return consulOpen(t, addr, newRoot()) }, opts)
}

// TestPartition: a Cache whose Conn is cut from the store (faultproxy)
// turns Stale and answers from memory, marked stale; writes made meanwhile
// by others reach it once the partition heals, and it is Healthy again.
func TestPartition(t *testing.T) {
	onRealStores(t, false, requirePartition)
}

// onRealStores runs run in a subtest per real store (etcd, zk, consul),
// each on a server of its own, with the server's address and an open
// function that dials addr (the server's, or a proxy's in front of it)
// at one new root per subtest; ZooKeeper Conns are opened with
// LinearizableReads set to zkLinearizable.
func onRealStores(t *testing.T, zkLinearizable bool, run func(t *testing.T, addr string, open func(addr string) topo.Conn)) {
	t.Run("etcd", func(t *testing.T) {
		addr, root := etcdtest.Start(t), newRoot()
		run(t, addr, func(addr string) topo.Conn { return etcdOpen(t, addr, root)() })
	})
	t.Run("zk", func(t *testing.T) {
		addr, root := zktest.Start(t), newRoot()
		run(t, addr, func(addr string) topo.Conn { return zkOpen(t, addr, root, zkLinearizable)() })
	})
	t.Run("consul", func(t *testing.T) {
		addr, root := consultest.Start(t), newRoot()
		run(t, addr, func(addr string) topo.Conn { return consulOpen(t, addr, root)() })
	})
}

// requireStaleWhile returns a Cache over conn (probing every 50 ms,
// answering stale for up to an hour) that holds f = "one", after cut has
// cut it from the store and it turned Stale and answered f from memory,
// marked stale. The caller closes it.
func requireStaleWhile(t *testing.T, ctx context.Context, conn topo.Conn, cut func()) *cache.Cache {
	t.Helper()
	c := wrap(t, conn, cache.Options{MaxStaleness: time.Hour, ProbeInterval: 50 * time.Millisecond})
	requireGet(t, ctx, c, "f", "one", true)
	cut()
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
	info := requireGet(t, ctx, c, "f", "one", true)
	require.True(t, info.Stale)
	return c
}

func requirePartition(t *testing.T, addr string, open func(addr string) topo.Conn) {
	ctx := testCtx(t)
	direct := open(addr)
	defer direct.Close()
	_, err := direct.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	c := requireStaleWhile(t, ctx, open(p.Addr()), p.Blackhole)
	defer c.Close()
	requireWatchInfo(t, ctx, c, true)
	_, err = direct.Update(ctx, "f", []byte("two"), nil)
	require.NoError(t, err)
	_, err = direct.Create(ctx, "g", []byte("g"))
	require.NoError(t, err)

	p.Heal()
	waitHolds(t, ctx, c, "f", "two")
	waitHolds(t, ctx, c, "g", "g")
	require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	requireWatchInfo(t, ctx, c, false)
}

// requireWatchInfo checks that a local Watch of f and WatchRecursive of
// the whole Cache say their initial values came from memory, stale or
// not as stale says.
func requireWatchInfo(t *testing.T, ctx context.Context, c *cache.Cache, stale bool) {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, _, info, err := c.WatchWithInfo(wctx, "f")
	require.NoError(t, err)
	require.True(t, info.FromMemory, "WatchWithInfo from memory")
	require.Equal(t, stale, info.Stale, "WatchWithInfo's current value stale")
	_, _, info, err = c.WatchRecursiveWithInfo(wctx, "")
	require.NoError(t, err)
	require.True(t, info.FromMemory, "WatchRecursiveWithInfo from memory")
	require.Equal(t, stale, info.Stale, "WatchRecursiveWithInfo's initial values stale")
}

// restartable is a single-server store that keeps its data across a
// stop: etcd (one embedded member), ZooKeeper (one server on a data dir)
// and Consul (a non-dev server with a data dir; a dev agent keeps its
// state in memory and would come back empty). open's Conns reach it on
// the same address after restart; ZooKeeper's read linearizably.
// revisions is false where a Cache reports no revision (ZooKeeper).
type restartable struct {
	open      func() topo.Conn
	stop      func()
	restart   func()
	revisions bool
}

// restartableEtcd starts a one-member etcd that keeps its data across
// a stop.
func restartableEtcd(t *testing.T) restartable {
	cl := etcdtest.StartCluster(t, 1)
	return restartable{open: etcdOpen(t, cl.Endpoints(), newRoot()),
		stop: func() { cl.StopMember(0) }, restart: func() { cl.RestartMember(0) }, revisions: true}
}

// restartables runs f once per real backend on a restartable store.
func restartables(t *testing.T, f func(t *testing.T, s restartable)) {
	t.Run("etcd", func(t *testing.T) { f(t, restartableEtcd(t)) })
	t.Run("zk", func(t *testing.T) {
		e := zktest.StartEnsemble(t, 1)
		f(t, restartable{open: zkOpen(t, e.Addr(0), newRoot(), true),
			stop: func() { e.Kill(0) }, restart: func() { e.Restart(0) }})
	})
	t.Run("consul", func(t *testing.T) {
		a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
		f(t, restartable{open: consulOpen(t, a.Addr(), newRoot()),
			stop: a.Kill, restart: func() { require.NoError(t, a.Start()) }, revisions: true})
	})
}

// TestStoreRestart: the store stops (the Cache serves stale) and restarts
// with its data; the changes made after the restart reach the Cache, on
// etcd, ZooKeeper and Consul, and the revision it reports (Info.Revision,
// State.Revision) has not gone back and covers them (0 on ZooKeeper).
func TestStoreRestart(t *testing.T) {
	restartables(t, func(t *testing.T, s restartable) {
		ctx := testCtx(t)
		direct := s.open()
		defer direct.Close()
		_, err := direct.Create(ctx, "f", []byte("one"))
		require.NoError(t, err)
		c := requireStaleWhile(t, ctx, s.open(), s.stop)
		defer c.Close()
		before := c.State().Revision
		s.restart()
		require.Eventually(t, func() bool {
			_, err := direct.Update(ctx, "f", []byte("two"), nil)
			return err == nil
		}, 30*time.Second, 10*time.Millisecond)
		err = direct.Delete(ctx, "f", nil)
		require.NoError(t, err)
		v, err := direct.Create(ctx, "g", []byte("g"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, "g", "g")
		// ZooKeeper's WatchRecursive may deliver g's creation before f's
		// deletion (each znode's events have a goroutine of their own).
		var info cache.Info
		require.Eventually(t, func() bool {
			_, _, info, err = c.GetWithInfo(ctx, "f")
			return topo.IsErrType(err, topo.NoNode) && info.FromMemory
		}, 30*time.Second, time.Millisecond, "the deletion of f never reached memory")
		if s.revisions {
			require.Positive(t, before)
			require.GreaterOrEqual(t, info.Revision, revisionOf(v))
		} else {
			require.Zero(t, info.Revision)
		}
		require.GreaterOrEqual(t, info.Revision, before)
		require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	})
}

// TestRelistSeesRecreatedFileZooKeeper: a file deleted and created again
// while the Cache's watch was lost has the same ZooKeeper version (0) as
// before, with another value; the relist must still take the new value.
func TestRelistSeesRecreatedFileZooKeeper(t *testing.T) {
	ctx := testCtx(t)
	open := zkOpen(t, zktest.Start(t), newRoot(), false)
	direct := open()
	defer direct.Close()
	v, err := direct.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	g := newGated(open())
	c := wrap(t, g, cache.Options{})
	defer c.Close()
	requireGet(t, ctx, c, "f", "one", true)

	g.hold()
	require.NoError(t, direct.Delete(ctx, "f", nil))
	v2, err := direct.Create(ctx, "f", []byte("two"))
	require.NoError(t, err)
	require.Equal(t, v.String(), v2.String(), "ZooKeeper gives the re-created file its first version again")
	g.breakWatches()
	g.release()
	waitHolds(t, ctx, c, "f", "two")
}

// TestRelistSettlesOwnWrites: a write of the Cache whose event was lost
// with the watch is in the relist, after which memory answers for the
// path again (it is not read from the store for ever), on memorytopo and
// a real etcd.
func TestRelistSettlesOwnWrites(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		g := newGated(open())
		c := wrap(t, g, cache.Options{})
		defer c.Close()
		_, err := c.Create(ctx, "f", []byte("one"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, "f", "one")
		g.hold()
		_, err = c.Update(ctx, "f", []byte("two"), nil)
		require.NoError(t, err)
		requireGet(t, ctx, c, "f", "two", false)
		g.breakWatches() // the update's event is lost with the watch
		g.release()
		waitHolds(t, ctx, c, "f", "two")
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
}
