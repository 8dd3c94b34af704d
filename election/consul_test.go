package election_test

import (
	"time"

	"context"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestHarnessOnConsul runs the harness on a real Consul agent. A lost
// mastership is simulated as an operator would cause it: destroying the
// session that holds the election key.
// partitionTTL is the session TTL of the partitioned Conn (the test agent
// accepts TTLs down to consultest.SessionTTLMin).
const partitionTTL = 4 * time.Second

func TestHarnessOnConsul(t *testing.T) {
	addr := consultest.Start(t)
	const root = "election-test"
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		conn, err := consultopo.NewConn(consultopo.Options{Address: addr}, root)
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		return topoFactory(t, conn, id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			tf := f.(*election.TopoFactory)
			kv := tf.Conn().(*consultopo.Conn).Client().KV()
			ctx := context.Background()
			pairs, _, err := kv.List(root+"/elections/", (&api.QueryOptions{}).WithContext(ctx))
			require.NoError(t, err)
			destroyed := 0
			for _, p := range pairs {
				if p.Session == "" || string(p.Value) != tf.InstanceID() || strings.HasSuffix(p.Key, "/") {
					continue
				}
				_, err := tf.Conn().(*consultopo.Conn).Client().Session().Destroy(p.Session, (&api.WriteOptions{}).WithContext(ctx))
				require.NoError(t, err)
				destroyed++
			}
			require.Equal(t, 1, destroyed, "no election key held by %s under %s", tf.InstanceID(), root)
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			p, err := faultproxy.New(addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			conn, err := consultopo.NewConn(consultopo.Options{Address: p.Addr(), SessionTTL: partitionTTL, MinSessionTTL: consultest.SessionTTLMin}, root)
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return electiontest.Partitioned{Factory: topoFactory(t, conn, id), Cut: p.Blackhole, Heal: p.Heal}
		},
		// Consul invalidates a session up to twice its TTL after the last
		// renewal, then holds its locks back for the lock-delay.
		SessionBound: 2*partitionTTL + consultopo.DefaultLockDelay,
	})
}
