package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestWatchRevision: Watch and WatchRecursive carry the etcd revision
// they have reached (topo.WatchData.Revision): the read's header revision
// for initial values, a change's revision for its event; of a
// transaction's events on the prefix, all but the last carry the revision
// before it, as the rest of the transaction is still to come.
func TestWatchRevision(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	raw := rawClient(t, serverAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := raw.Put(ctx, root+"/r/a", "0")
	require.NoError(t, err)
	created := put.Header.Revision

	cur, ch, err := c.Watch(ctx, "r/a")
	require.NoError(t, err)
	require.GreaterOrEqual(t, cur.Revision, created, "the initial value reflects the read's revision")
	init, rch, err := c.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	require.Len(t, init, 1)
	require.GreaterOrEqual(t, init[0].Revision, cur.Revision, "the listing was read after the Watch's read")

	// A write elsewhere moves the revision; the transaction comes after.
	_, err = raw.Put(ctx, root+"/elsewhere", "x")
	require.NoError(t, err)
	txn, err := raw.Txn(ctx).Then(clientv3.OpPut(root+"/r/a", "1"), clientv3.OpPut(root+"/r/b", "1")).Commit()
	require.NoError(t, err)
	tr := txn.Header.Revision
	del, err := raw.Delete(ctx, root+"/r/a")
	require.NoError(t, err)
	dr := del.Header.Revision

	wd := <-ch
	require.NoError(t, wd.Err)
	require.Equal(t, "1", string(wd.Contents))
	require.Equal(t, tr, wd.Revision)
	wd = <-ch
	require.ErrorIs(t, wd.Err, topo.NoNode)
	require.Equal(t, dr, wd.Revision, "a deletion carries its revision")

	var got []*topo.WatchDataRecursive
	for len(got) < 3 {
		got = append(got, <-rch)
	}
	require.Equal(t, "r/a", got[0].Path)
	require.Equal(t, tr-1, got[0].Revision, "the transaction's first event: its second is still to come")
	require.Equal(t, "r/b", got[1].Path)
	require.Equal(t, tr, got[1].Revision)
	require.Equal(t, "r/a", got[2].Path)
	require.ErrorIs(t, got[2].Err, topo.NoNode)
	require.Equal(t, dr, got[2].Revision)
}
