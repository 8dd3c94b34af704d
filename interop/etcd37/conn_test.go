package etcd37

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
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
