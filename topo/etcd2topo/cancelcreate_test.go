package etcd2topo

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

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

// TestCancelledLockGoneOnReturn: a Lock whose context ends while its
// entry's put is unanswered returns only once the entry is gone from
// etcd: the next contender never waits on an entry nobody owns. An
// interceptor lets the put reach etcd but keeps its answer from the Lock
// until the context ends, as a slow network would; the test sees the
// entry in etcd before it cancels. Before, the Lock returned at once and
// the entry was deleted in the background.
func TestCancelledLockGoneOnReturn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	var hold atomic.Bool
	o := testOptions(serverAddr)
	o.dialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if tr, ok := req.(*pb.TxnRequest); ok && len(tr.Success) > 0 && tr.Success[0].GetRequestPut() != nil &&
			strings.HasPrefix(string(tr.Success[0].GetRequestPut().Key), root+"/d/locks/") && hold.Load() {
			go func() { _ = invoker(context.WithoutCancel(ctx), method, req, new(pb.TxnResponse), cc) }() // its own reply and call options: the caller reads theirs
			<-ctx.Done()
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
	w, err := NewConn(o, root)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	h := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err = h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	held, err := h.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	entries := func() int64 {
		resp, err := cli.Get(ctx, root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Count
	}

	hold.Store(true)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	errc := make(chan error, 1)
	go func() {
		l, err := w.Lock(wctx, "d", "waiter")
		if err == nil {
			_ = l.Unlock(ctx)
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return entries() == 2 }, 30*time.Second, 5*time.Millisecond,
		"the waiter's put never reached etcd")
	wcancel()
	err = <-errc
	require.Truef(t, topo.IsErrType(err, topo.Interrupted), "a cancelled Lock: %v", err)
	require.EqualValues(t, 1, entries(), "the cancelled Lock returned before its entry left etcd")
	hold.Store(false)
	require.NoError(t, held.Unlock(ctx))
	l, err := w.TryLock(ctx, "d", "again")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}
