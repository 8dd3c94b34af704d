package consultopo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestWatchRevision: Watch and WatchRecursive carry the X-Consul-Index
// they have reached (topo.WatchData.Revision), at least the ModifyIndex of
// every change they delivered; of the differences one listing shows, all
// but the last carry the index reached before it.
func TestWatchRevision(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	w := newTestConn(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	index := func(v topo.Version) int64 { return int64(v.(topo.NumericVersion)) }
	v, err := c.Create(ctx, "r/a", []byte("0"))
	require.NoError(t, err)

	cur, ch, err := w.Watch(ctx, "r/a")
	require.NoError(t, err)
	require.GreaterOrEqual(t, cur.Revision, index(v))
	init, rch, err := w.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	require.Len(t, init, 1)
	require.GreaterOrEqual(t, init[0].Revision, index(v))

	v, err = c.Update(ctx, "r/a", []byte("1"), nil)
	require.NoError(t, err)
	wd := <-ch
	require.NoError(t, wd.Err)
	require.GreaterOrEqual(t, wd.Revision, index(v))
	ev := <-rch
	require.NoError(t, ev.Err)
	require.Equal(t, "r/a", ev.Path)
	require.GreaterOrEqual(t, ev.Revision, index(v))
	before := ev.Revision

	// Two files in one transaction: one listing shows both.
	vs, err := c.Txn(ctx, topo.CreateOp("r/b", []byte("b")), topo.CreateOp("r/c", []byte("c")))
	require.NoError(t, err)
	ev = <-rch
	require.Equal(t, "r/b", ev.Path)
	require.Equal(t, before, ev.Revision, "r/c is still to come")
	ev = <-rch
	require.Equal(t, "r/c", ev.Path)
	require.GreaterOrEqual(t, ev.Revision, index(vs[1]))

	require.NoError(t, c.Delete(ctx, "r/a", nil))
	wd = <-ch
	require.ErrorIs(t, wd.Err, topo.NoNode)
	require.Greater(t, wd.Revision, index(vs[1]), "the key's read after the delete")
	ev = <-rch
	require.Equal(t, "r/a", ev.Path)
	require.ErrorIs(t, ev.Err, topo.NoNode)
	require.Greater(t, ev.Revision, index(vs[1]), "the tombstone's index")
}
