package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestSemaphoreFIFO: waiters on a full semaphore are admitted in the order
// they queued, each release admitting the next one only. The waiters queue
// on the lock of the semaphore's directory: its entries are the keys
// under <root>/d/locks/.
func TestSemaphoreFIFO(t *testing.T) {
	root := newRoot()
	conns := make([]topo.Conn, 3)
	for i := range conns {
		o := testOptions(serverAddr)
		o.LockTTL = 30 * time.Second // no lapse under load
		c, err := NewConn(o, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		conns[i] = c
	}
	cli := rawClient(t, serverAddr)
	queued := func(t *testing.T, _ string, n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			resp, err := cli.Get(context.Background(), root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == int64(n)
		}, time.Minute, time.Millisecond)
	}
	test.RequireSemaphoreFIFO(t, conns, 2, 10, queued)
}
