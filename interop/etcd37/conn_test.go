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

// suiteOptions are the options of the Conns the conformance suite never
// cuts off (its Partition Conn keeps options' 3 s, the SessionBound): a
// LockTTL long enough that a keep-alive stall under CI load does not make
// their shared leases lapse (with 3 s, a TryLock on a lease given up
// failed with LockLost, "requested lease not found"), and unlike the TTLs
// the suite passes to LockWithTTL (30 s, 1 min), so that those locks still
// get leases of their own.
func suiteOptions(addr string) etcd2topo.Options {
	o := options(addr)
	o.LockTTL = 20 * time.Second
	return o
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
