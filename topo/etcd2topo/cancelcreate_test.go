package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestCancelledLockLeavesNoEntry: Locks cancelled while their put is in
// flight (the outcome unknown to the client) leave no entry behind, also
// when etcd applies the put after the first removal found nothing (a late
// put): such an entry, on the Conn's shared lease, would block the queue
// for as long as the Conn lives.
func TestCancelledLockLeavesNoEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	h, w := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err := h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	held, err := h.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	for i := range 60 {
		// Cancelled at different points of the put's round trip (the
		// delays only spread the cancellations; nothing is timed).
		wctx, wcancel := context.WithCancel(ctx)
		time.AfterFunc(time.Duration(i%30)*40*time.Microsecond, wcancel)
		_, err := w.Lock(wctx, "d", "waiter")
		wcancel()
		require.Truef(t, topo.IsErrType(err, topo.Interrupted), "a cancelled Lock: %v", err)
	}
	entries := func() int64 {
		resp, err := cli.Get(ctx, root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Count
	}
	require.Eventually(t, func() bool { return entries() == 1 }, 20*time.Second, 10*time.Millisecond,
		"a cancelled Lock left its entry behind (%d entries)", entries())
	require.NoError(t, held.Unlock(ctx))
	l, err := h.TryLock(ctx, "d", "again")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}
