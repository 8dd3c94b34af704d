package etcd2topo

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestNativeProclaimGuard: a native leader's Proclaim (guarded first by
// the key's ModRevision as our last write left it, see rewrite) writes
// while the key is this term's and never once it is not:
//   - concurrent Proclaims of the leader all succeed and keep the term
//     (each moves the ModRevision the others compare with: they fall back
//     to the CreateRevision and lease compares);
//   - after another client rewrote the key on another lease, Proclaim is
//     NotLeader and the other client's value stays;
//   - after the key was deleted, Proclaim is NotLeader and writes nothing.
func TestNativeProclaimGuard(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)

	t.Run("Concurrent", func(t *testing.T) {
		p := native(t, c, nativePrefix(), "tk")
		lctx, err := p.Campaign(ctx, []byte("v0"))
		require.NoError(t, err)
		term, err := p.Term()
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Proclaim(ctx, []byte{byte('a' + i)}) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "Proclaim %d", i)
		}
		require.NoError(t, lctx.Err(), "the term goes on")
		l, err := p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, term.Token(), l.Token)
		require.NoError(t, p.Proclaim(ctx, []byte("last")))
		l, err = p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "last", string(l.Value))
	})

	t.Run("RewrittenElsewhere", func(t *testing.T) {
		prefix := nativePrefix()
		p := native(t, c, prefix, "tk")
		_, err := p.Campaign(ctx, []byte("v0"))
		require.NoError(t, err)
		require.NoError(t, p.Proclaim(ctx, []byte("v1")))
		me, err := p.Leader(ctx)
		require.NoError(t, err)
		key := prefix + "/" + me.ID
		lr, err := cli.Grant(ctx, 30)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = cli.Revoke(context.Background(), lr.ID) })
		_, err = cli.Put(ctx, key, "theirs", clientv3.WithLease(lr.ID))
		require.NoError(t, err)
		require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("mine")), topo.NotLeader))
		resp, err := cli.Get(ctx, key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		require.Equal(t, "theirs", string(resp.Kvs[0].Value))
		require.Equal(t, int64(lr.ID), resp.Kvs[0].Lease)
	})

	t.Run("Deleted", func(t *testing.T) {
		prefix := nativePrefix()
		p := native(t, c, prefix, "tk")
		_, err := p.Campaign(ctx, []byte("v0"))
		require.NoError(t, err)
		require.NoError(t, p.Proclaim(ctx, []byte("v1")))
		me, err := p.Leader(ctx)
		require.NoError(t, err)
		key := prefix + "/" + me.ID
		_, err = cli.Delete(ctx, key)
		require.NoError(t, err)
		require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("late")), topo.NotLeader))
		resp, err := cli.Get(ctx, key)
		require.NoError(t, err)
		require.Empty(t, resp.Kvs, "a deposed Proclaim wrote nothing")
	})
}
