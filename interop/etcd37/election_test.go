package etcd37

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// runElectionHarness runs the election harness (election/electiontest)
// with etcd client v3.7 against the etcd at addr: a lost mastership is the
// leader Conn's leases revoked in the store (etcd2topo.Conn.RevokeLeases),
// a partition a faultproxy in front of one Conn.
func runElectionHarness(t *testing.T, addr string) {
	root := newRoot()
	open := func(t *testing.T, endpoint string) *etcd2topo.Conn {
		c, err := etcd2topo.NewConn(options(endpoint), root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	factory := func(t *testing.T, c *etcd2topo.Conn, id string) *election.TopoFactory {
		f, err := election.NewTopoFactory(c, id)
		require.NoError(t, err)
		return f
	}
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		return factory(t, open(t, addr), id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, f.(*election.TopoFactory).Conn().(*etcd2topo.Conn).RevokeLeases(ctx))
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			p, err := faultproxy.New(addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			return electiontest.Partitioned{Factory: factory(t, open(t, p.Addr()), id), Cut: p.Blackhole, Heal: p.Heal}
		},
		SessionBound: options("").LockTTL,
	})
}

// TestElectionHarness runs the election harness with client v3.7 against
// server v3.6.16 (out of process).
func TestElectionHarness(t *testing.T) { runElectionHarness(t, serverAddr) }

// TestElectionHarnessServer37 runs it with client and server v3.7.
func TestElectionHarnessServer37(t *testing.T) {
	srv := startEtcd37(t, filepath.Join(t.TempDir(), "election"))
	runElectionHarness(t, srv.addr)
}
