package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestWatchRevision: a Watch's values carry the file's Stat.Mzxid as read
// with them (topo.WatchData.Revision), its deletion 0; WatchRecursive
// carries 0 throughout (no event says the other files' earlier changes
// have all arrived).
func TestWatchRevision(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	w := openConn(t, []string{testServer}, root)
	raw := openRaw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mzxid := func() int64 {
		_, st, err := raw.Get(root + "/r/a")
		require.NoError(t, err)
		return st.Mzxid
	}
	_, err := c.Create(ctx, "r/a", []byte("0"))
	require.NoError(t, err)

	cur, ch, err := w.Watch(ctx, "r/a")
	require.NoError(t, err)
	require.Equal(t, mzxid(), cur.Revision)
	init, rch, err := w.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	require.Len(t, init, 1)
	require.Zero(t, init[0].Revision)

	_, err = c.Update(ctx, "r/a", []byte("1"), nil)
	require.NoError(t, err)
	wd := <-ch
	require.NoError(t, wd.Err)
	require.Equal(t, mzxid(), wd.Revision)
	require.Greater(t, wd.Revision, cur.Revision)
	ev := <-rch
	require.Equal(t, "r/a", ev.Path)
	require.Zero(t, ev.Revision)

	require.NoError(t, c.Delete(ctx, "r/a", nil))
	wd = <-ch
	require.ErrorIs(t, wd.Err, topo.NoNode)
	require.Zero(t, wd.Revision)
}
