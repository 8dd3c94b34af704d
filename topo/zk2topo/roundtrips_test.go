package zk2topo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestDeleteRequests: a Delete whose parent keeps one other file sends the
// delete and its two pipelined Stat reads (the parent's locks znode, then
// the parent) and nothing else: it used to read the parent's Stat a second
// time, one more round trip of waiting, because the two pipelined reads
// ran in either order. The file is gone and its parent and sibling stay;
// a parent left with nothing but an empty locks znode is removed.
func TestDeleteRequests(t *testing.T) {
	ctx := context.Background()
	var rc rtCounter
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: rc.dial}, freshRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, p := range []string{"d/a", "d/b", "e/a", "e/b"} {
		_, err := c.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	_, _, err = c.Get(ctx, "d/b") // the session's first read syncs: done
	require.NoError(t, err)

	for range 5 { // the pipelined reads' order is what used to vary
		n0 := rc.load()
		require.NoError(t, c.Delete(ctx, "d/a", nil))
		require.Equal(t, int64(3), rc.load()-n0, "requests of one Delete")
		_, err := c.Create(ctx, "d/a", []byte("v"))
		require.NoError(t, err)
	}

	_, _, err = c.Get(ctx, "d/a")
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "d/b")
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "d/a", nil))
	_, _, err = c.Get(ctx, "d/a")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
	names, err := c.ListDir(ctx, "d", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "b"}}, names)

	// A directory holding only an empty locks znode once its last file
	// goes is removed.
	l, err := c.Lock(ctx, "e", "x")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, c.Delete(ctx, "e/a", nil))
	require.NoError(t, c.Delete(ctx, "e/b", nil))
	_, err = c.ListDir(ctx, "e", false)
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
	root, err := c.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "d"}}, root)
}
