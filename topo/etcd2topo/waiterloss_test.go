package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestWaiterEntryTakenBehindItsBack: a waiting Lock whose entry another
// client removes (its lease revoked, or its key deleted) while the holder
// still holds is not granted when the holder unlocks: it returns LockLost,
// and another client's TryLock takes the lock (it used to return a
// descriptor for an entry no longer in the store: two holders).
func TestWaiterEntryTakenBehindItsBack(t *testing.T) {
	for _, how := range []string{"revoke", "delete"} {
		t.Run(how, func(t *testing.T) {
			root := newRoot()
			a, b, c := openConn(t, serverAddr, root), openConn(t, serverAddr, root), openConn(t, serverAddr, root)
			raw := rawClient(t, serverAddr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := a.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			la, err := a.Lock(ctx, "d", "a")
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() {
				lb, err := b.Lock(ctx, "d", "b")
				if err == nil {
					_ = lb.Unlock(context.Background())
				}
				got <- err
			}()
			var waiter *clientv3.GetResponse
			require.Eventually(t, func() bool {
				waiter, err = raw.Get(ctx, root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
				return err == nil && len(waiter.Kvs) == 2
			}, 20*time.Second, 10*time.Millisecond)
			kv := waiter.Kvs[1]
			if how == "revoke" {
				_, err = raw.Revoke(ctx, clientv3.LeaseID(kv.Lease))
			} else {
				_, err = raw.Delete(ctx, string(kv.Key))
			}
			require.NoError(t, err)
			require.NoError(t, la.Unlock(ctx))
			require.ErrorIs(t, <-got, topo.LockLost, "the waiter whose entry is gone was granted")
			lc, err := c.TryLock(ctx, "d", "c")
			require.NoError(t, err)
			require.NoError(t, lc.Unlock(ctx))
		})
	}
}
