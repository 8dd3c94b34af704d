package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestHarnessOnEtcd runs the harness on a real embedded etcd. A lost
// mastership is simulated as a lapsed lease: the lease of the leader's
// election key is revoked behind the Conn's back.
func TestHarnessOnEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	const root = "/election-test"
	const partitionTTL = 3 * time.Second // the lease TTL of the partitioned instance
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, root)
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		return topoFactory(t, conn, id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			tf := f.(*election.TopoFactory)
			cli := tf.Conn().(*etcd2topo.Conn).Client()
			ctx := context.Background()
			resp, err := cli.Get(ctx, root+"/elections/", clientv3.WithPrefix())
			require.NoError(t, err)
			revoked := 0
			for _, kv := range resp.Kvs {
				if string(kv.Value) != tf.InstanceID() || kv.Lease == 0 {
					continue
				}
				_, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
				require.NoError(t, err)
				revoked++
			}
			require.Equal(t, 1, revoked, "no election key of %s under %s", tf.InstanceID(), root)
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			p, err := faultproxy.New(addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{p.Addr()}, LockTTL: partitionTTL}, root)
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return electiontest.Partitioned{Factory: topoFactory(t, conn, id), Cut: p.Blackhole, Heal: p.Heal}
		},
		// etcd expires a lease that is not renewed after its TTL.
		SessionBound: partitionTTL,
	})
}
