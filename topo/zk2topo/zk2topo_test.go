package zk2topo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/test/mutation"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// faultySessionTimeout is the session timeout of the Conns on the faulty
// ensemble: long enough that sessions ride out the leader election that
// follows the kill.
const faultySessionTimeout = 15 * time.Second

// TestConformance runs the shared suite on the package's standalone
// ZooKeeper (a fresh root per subtest). Partitions put a faultproxy in
// front of one Conn; the faulty store is a 3-node ensemble whose leader is
// killed.
func TestConformance(t *testing.T) {
	newStore, opts := wiring()
	test.Run(t, newStore, opts)
}

// wiring is the conformance suite's wiring of the package's servers:
// every Conn's engine gets mutation.EngineDefect (none outside a
// mutation kit's child process).
func wiring() (newStore func(t *testing.T) func() topo.Conn, opts test.Options) {
	defect := mutation.EngineDefect()
	var root string // the current subtest's root (subtests run one at a time)
	newStore = func(t *testing.T) func() topo.Conn {
		root = freshRoot(t)
		r := root
		return func() topo.Conn {
			c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, defect: defect}, r)
			require.NoError(t, err)
			return c
		}
	}
	opts = test.Options{
		GetVersionUnsupported: true,
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			expireSession(t, conn, testServer)
		},
		Partition: func(t *testing.T) test.Partitioned {
			// One proxied address. (The zk2topo tests of requests sent on
			// the wrong session use three, so that the client library keeps
			// its queued requests across reconnects; with queued requests
			// and watches, go-zookeeper v1.0.4's reconnect races on its
			// lastZxid field (go-zookeeper/zk#35, unfixed), which -race
			// reports.)
			p, err := faultproxy.New(testServer)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			c, err := NewConn(Options{Servers: []string{p.Addr()}, SessionTimeout: testSessionTimeout, defect: defect}, root)
			require.NoError(t, err)
			return test.Partitioned{Conn: c, Cut: p.Blackhole, Heal: p.Heal}
		},
		// The server expires a silent session after its timeout.
		SessionBound: testSessionTimeout,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			e := zktest.StartEnsemble(t, 3)
			r := freshRoot(t)
			opener := func(linearizable bool) func() topo.Conn {
				return func() topo.Conn {
					c, err := NewConn(Options{Servers: e.Addrs(), SessionTimeout: faultySessionTimeout, LinearizableReads: linearizable, defect: defect}, r)
					require.NoError(t, err)
					return c
				}
			}
			return test.FaultyStore{
				Open:             opener(false),
				OpenLinearizable: opener(true),
				Fault: func(t *testing.T) {
					leader := e.WaitLeader(zktest.StartTimeout)
					e.Kill(leader)
					e.WaitLeader(zktest.StartTimeout)
				},
			}
		},
	}
	return newStore, opts
}
