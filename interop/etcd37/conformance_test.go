package etcd37

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

var rootSeq atomic.Int64

func newRoot() string { return fmt.Sprintf("/etcd37-%d", rootSeq.Add(1)) }

func options(addr string) etcd2topo.Options {
	return etcd2topo.Options{Endpoints: []string{addr}, LockTTL: 3 * time.Second}
}

// expireSession revokes conn's leases in the store and returns once conn
// has observed the loss, as the suite's ExpireSession hook requires
// (etcd2topo.Conn.RevokeLeases, the library's own public hook).
func expireSession(t *testing.T, conn topo.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, conn.(*etcd2topo.Conn).RevokeLeases(ctx))
}

// TestConformance runs the shared conformance suite (topo/test) with
// etcd client v3.7 against etcd server v3.6.16 out of process: a fresh
// root per subtest on one shared member; partitions through a faultproxy
// in front of one Conn; the faulty store a member of its own, restarted.
func TestConformance(t *testing.T) {
	var root string
	test.Run(t, func(t *testing.T) func() topo.Conn {
		root = newRoot()
		r := root
		return func() topo.Conn {
			c, err := etcd2topo.NewConn(options(server.addr), r)
			require.NoError(t, err)
			return c
		}
	}, test.Options{
		ExpireSession: expireSession,
		Partition: func(t *testing.T) test.Partitioned {
			p, err := faultproxy.New(server.addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			c, err := etcd2topo.NewConn(options(p.Addr()), root)
			require.NoError(t, err)
			return test.Partitioned{Conn: c, Cut: p.Blackhole, Heal: p.Heal}
		},
		SessionBound: options("").LockTTL,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			p, err := startEtcd(filepath.Join(t.TempDir(), "faulty"))
			require.NoError(t, err)
			t.Cleanup(p.stop)
			r := newRoot()
			return test.FaultyStore{
				Open: func() topo.Conn {
					c, err := etcd2topo.NewConn(options(p.addr), r)
					require.NoError(t, err)
					return c
				},
				Fault: func(t *testing.T) { require.NoError(t, p.restart()) },
			}
		},
	})
}
