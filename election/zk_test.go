package election_test

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestHarnessOnZooKeeper runs the harness on a real ZooKeeper server. A
// lost mastership is simulated by deleting the leader's election znode
// behind its back, with a separate raw client.
func TestHarnessOnZooKeeper(t *testing.T) {
	addr := zktest.Start(t)
	const root = "/election-test"
	const partitionTimeout = 4 * time.Second // the session timeout of the partitioned instance
	raw, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(nopLogger{}))
	require.NoError(t, err)
	t.Cleanup(raw.Close)

	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: 10 * time.Second}, root)
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		return topoFactory(t, conn, id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			id := f.(*election.TopoFactory).InstanceID()
			dir := path.Join(root, "elections")
			names, _, err := raw.Children(dir)
			require.NoError(t, err)
			deleted := 0
			for _, name := range names {
				entries, _, err := raw.Children(path.Join(dir, name))
				if errors.Is(err, zk.ErrNoNode) {
					continue
				}
				require.NoError(t, err)
				for _, e := range entries {
					p := path.Join(dir, name, e)
					data, stat, err := raw.Get(p)
					if errors.Is(err, zk.ErrNoNode) {
						continue
					}
					require.NoError(t, err)
					if string(data) != id || stat.EphemeralOwner == 0 {
						continue
					}
					require.NoError(t, raw.Delete(p, -1))
					deleted++
				}
			}
			require.Equal(t, 1, deleted, "no election znode of %s under %s", id, dir)
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			p, err := faultproxy.New(addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{p.Addr()}, SessionTimeout: partitionTimeout}, root)
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return electiontest.Partitioned{Factory: topoFactory(t, conn, id), Cut: p.Blackhole, Heal: p.Heal}
		},
		// The server expires a silent session after its timeout.
		SessionBound: partitionTimeout,
	})
}

// nopLogger silences the raw client.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
