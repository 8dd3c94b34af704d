package topo_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// newProxy starts a faultproxy to addr, healed and closed when the test
// ends (healed first, so that Conns behind it close cleanly).
func newProxy(t *testing.T, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// partitionedGlobal is one real backend for testPartitionedGlobal: it
// starts the server and opens Conns to it.
type partitionedGlobal struct {
	start   func(t *testing.T) string                       // the server's address
	open    func(t *testing.T, addr, root string) topo.Conn // a Conn at addr
	factory topo.Factory                                    // dials the cells
	root    func(name string) string                        // a root for name
	// deleteNotChange makes the check after the heal delete the record
	// rather than change it: a change event races inside zk2topo's Watch
	// under -race (its goroutine reassigns the variables Watch returns).
	deleteNotChange bool
}

// testPartitionedGlobal runs a Server whose global connection goes to a
// real store through a proxy, and blackholes that proxy: ConnForCell of a
// cell not dialled yet returns Timeout at its 200 ms deadline, a cell
// dialled before is still served, and its connection (direct to the store)
// and lock stay healthy. After the partition heals, the record is still
// followed and the other cell can be dialled.
func testPartitionedGlobal(t *testing.T, b partitionedGlobal) {
	ctx := t.Context()
	addr := b.start(t)
	proxy := newProxy(t, addr)
	global := b.open(t, proxy.Addr(), b.root("global"))
	ts := topo.NewServer(b.factory, global)
	t.Cleanup(ts.Close)
	t.Cleanup(proxy.Heal)
	for _, cell := range []string{"zone1", "zone2"} {
		require.NoError(t, ts.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{ServerAddress: addr, Root: b.root(cell)}))
	}
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	lock := holdLock(t, c1)

	proxy.Blackhole()
	_, err = connForCellWithin(t, ts, "zone2")
	requireCodeT(t, err, topo.Timeout)
	c, err := connForCellWithin(t, ts, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1, "a partitioned global store re-dialled a cached cell")
	requireConnHealthy(t, c1, lock)

	proxy.Heal()
	direct := b.open(t, addr, b.root("global"))
	if b.deleteNotChange {
		require.NoError(t, direct.Delete(ctx, topo.CellInfoPath("zone1"), nil))
		require.Eventually(t, func() bool {
			_, _, err := c1.Get(ctx, "d/f")
			return topo.IsErrType(err, topo.Closed)
		}, waitFor, tick, "a deleted record's connection was not closed after the partition")
	} else {
		rewriteCellInfo(t, direct, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: b.root("zone1-moved")})
		require.Eventually(t, func() bool {
			c, err := ts.ConnForCell(ctx, "zone1")
			return err == nil && c != c1
		}, waitFor, tick, "a changed record was not re-dialled after the partition")
	}
	c2, err := ts.ConnForCell(ctx, "zone2")
	require.NoError(t, err, "zone2 is dialled once the partition heals")
	_, _, err = c2.Get(ctx, "d/f")
	requireCodeT(t, err, topo.NoNode)
}

// etcdGlobal, zkGlobal and consulGlobal are the real stores of the
// partitionedGlobal tests, each cell's root named under prefix.
func etcdGlobal(prefix string) partitionedGlobal {
	return partitionedGlobal{
		start: func(t *testing.T) string { return etcdtest.Start(t) },
		open: func(t *testing.T, addr, root string) topo.Conn {
			c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, root)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c
		},
		factory: etcd2topo.Factory{},
		root:    func(name string) string { return "/" + prefix + name },
	}
}

func zkGlobal(prefix string) partitionedGlobal {
	return partitionedGlobal{
		start: func(t *testing.T) string { return zktest.Start(t) },
		open: func(t *testing.T, addr, root string) topo.Conn {
			c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, root)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c
		},
		factory: zk2topo.Factory{},
		root:    func(name string) string { return "/" + prefix + name },
	}
}

// consulGlobal's roots have no leading "/", as Vitess's Consul roots.
func consulGlobal(prefix string) partitionedGlobal {
	return partitionedGlobal{
		start: func(t *testing.T) string { return consultest.Start(t) },
		open: func(t *testing.T, addr, root string) topo.Conn {
			c, err := consultopo.NewConn(consultopo.Options{Address: addr}, root)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c
		},
		factory: consultopo.NewFactory(consultopo.Options{}),
		root:    func(name string) string { return prefix + name },
	}
}

func TestConnForCellEtcdPartitionedGlobal(t *testing.T) {
	testPartitionedGlobal(t, etcdGlobal("srv/"))
}

func TestConnForCellZooKeeperPartitionedGlobal(t *testing.T) {
	g := zkGlobal("srv/")
	g.deleteNotChange = true
	testPartitionedGlobal(t, g)
}

func TestConnForCellConsulPartitionedGlobal(t *testing.T) {
	testPartitionedGlobal(t, consulGlobal("srv/"))
}

// zkWatched reports whether the ZooKeeper server at addr has a watch on
// the znode zpath (four-letter command wchp).
func zkWatched(t *testing.T, addr, zpath string) bool {
	t.Helper()
	out, err := zktest.FourLetter(addr, "wchp")
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == zpath {
			return true
		}
	}
	return false
}

// TestConnForCellZooKeeperGlobalSessionExpiry partitions the global
// connection of a Server from a real ZooKeeper until the server expires its
// session, then heals it: the global Conn's watches end (Unavailable, the
// session is gone), which used to close every cached cell connection and so
// release its locks. The cell connection (its own session, not
// partitioned) must stay open with its lock held, the Server must watch the
// record again on the new session, and a later change of the record must
// still re-dial.
func TestConnForCellZooKeeperGlobalSessionExpiry(t *testing.T) {
	ctx := t.Context()
	addr := zktest.Start(t)
	proxy := newProxy(t, addr)
	global, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{proxy.Addr()}, SessionTimeout: time.Second}, "/srv/global")
	require.NoError(t, err)
	ts := topo.NewServer(zk2topo.Factory{Options: zk2topo.Options{SessionTimeout: 30 * time.Second}}, global)
	t.Cleanup(ts.Close)
	t.Cleanup(proxy.Heal)
	direct, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, "/srv/global")
	require.NoError(t, err)
	t.Cleanup(direct.Close)

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: "/srv/zone1"}))
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	lock := holdLock(t, c1)
	const watched = "/srv/global/cells/zone1/CellInfo"
	require.Eventually(t, func() bool { return zkWatched(t, addr, watched) }, waitFor, tick, "the record is not watched")

	// A lock held by the global session shows when that session expires.
	_, err = global.Create(ctx, "g/f", []byte("x"))
	require.NoError(t, err)
	_, err = global.Lock(ctx, "g", "global session")
	require.NoError(t, err)

	proxy.Blackhole()
	require.Eventually(t, func() bool {
		probe, err := direct.TryLock(ctx, "g", "probe")
		if err != nil {
			return false
		}
		require.NoError(t, probe.Unlock(ctx))
		return true
	}, 30*time.Second, 20*time.Millisecond, "the partitioned global session did not expire")
	require.Eventually(t, func() bool { return !zkWatched(t, addr, watched) }, waitFor, tick,
		"the expired session's watch is still registered")
	proxy.Heal()

	// The global Conn learns that its session expired; its watch of the
	// record ends and the Server watches again on the new session.
	require.Eventually(t, func() bool { return zkWatched(t, addr, watched) }, 30*time.Second, tick,
		"the record is not watched again after the global session expired")
	requireConnHealthy(t, c1, lock)
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1, "the global session's expiry re-dialled an unchanged cell")

	// The record is deleted behind the Server's back: the new watch sees
	// it, the cell is dropped and its connection closed. (A delete rather
	// than a change, because a change event races inside zk2topo's Watch
	// under -race: its goroutine reassigns the variables Watch returns.)
	require.NoError(t, direct.Delete(ctx, topo.CellInfoPath("zone1"), nil))
	require.Eventually(t, func() bool {
		_, _, err := c1.Get(ctx, "d/f")
		return topo.IsErrType(err, topo.Closed)
	}, waitFor, tick, "a deleted record's connection was not closed after the session expiry")
	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.NoNode)
}
