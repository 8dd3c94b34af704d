package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestViewWaiterBehindWithdrawn: three waiters of one Conn wait in its
// view of the queue (view.go), behind another Conn's holder. The first
// gives up; the second, woken by that, must find the holder still ahead
// in the view and wait on, and take the lock once the holder lets go
// (then the third, once the second lets go).
func TestViewWaiterBehindWithdrawn(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	holder, waiters := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	prefix := root + "/d/locks/"
	queued := func(n int64) {
		require.Eventually(t, func() bool {
			resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == n
		}, time.Minute, time.Millisecond)
	}
	ctx1, cancel1 := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() {
		_, err := waiters.Lock(ctx1, "d", "first")
		first <- err
	}()
	queued(2)
	lock := func(id string) (chan topo.LockDescriptor, chan error) {
		got, failed := make(chan topo.LockDescriptor, 1), make(chan error, 1)
		go func() {
			l, err := waiters.Lock(ctx, "d", id)
			if err != nil {
				failed <- err
				return
			}
			got <- l
		}()
		return got, failed
	}
	second, secondErr := lock("second")
	queued(3)
	third, thirdErr := lock("third")
	queued(4)
	cancel1()
	require.Error(t, <-first)
	queued(3)
	// Another client's write: the store's revision moves past the view's
	// (which follows the queue's prefix only), as other tests' writes do.
	_, err = cli.Put(ctx, root+"/unrelated", "x")
	require.NoError(t, err)
	// The second waits again, in the view, on the holder's key once the
	// view has seen the first leave (three entries left).
	holderKey := entryBehind(t, ld).key
	require.Eventually(t, func() bool {
		waiters.mu.Lock()
		v := waiters.views[prefix]
		waiters.mu.Unlock()
		if v == nil {
			return false
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		_, onHolder := v.waits[holderKey]
		return len(v.entries) == 3 && onHolder
	}, time.Minute, time.Millisecond)
	select {
	case <-second:
		t.Fatal("the second waiter took the lock while the holder holds it")
	case err := <-secondErr:
		t.Fatal(err)
	default:
	}
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))
	for i, w := range []struct {
		got    chan topo.LockDescriptor
		failed chan error
	}{{second, secondErr}, {third, thirdErr}} {
		select {
		case l := <-w.got:
			require.NoError(t, l.Check(ctx))
			require.NoError(t, l.Unlock(ctx))
		case err := <-w.failed:
			t.Fatalf("waiter %d: %v", i+2, err)
		}
	}
}
