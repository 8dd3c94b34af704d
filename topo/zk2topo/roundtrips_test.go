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

// TestUnlockRequests: an uncontended Unlock of a directory that holds
// files sends the delete of its entry and one pipelined Stat read of the
// directory, and nothing else (it used to read the locks znode's Stat too,
// which only matters when the directory holds nothing else). A named lock's
// directory, which holds nothing but the locks znode, is still removed by
// Unlock, and so is a directory whose files were deleted while it was
// locked.
func TestUnlockRequests(t *testing.T) {
	ctx := context.Background()
	var rc rtCounter
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: rc.dial}, freshRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, p := range []string{"d/a", "e/a", "keep"} {
		_, err := c.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	_, _, err = c.Get(ctx, "d/a") // the session's first read syncs: done
	require.NoError(t, err)

	for range 5 {
		l, err := c.Lock(ctx, "d", "x")
		require.NoError(t, err)
		n0 := rc.load()
		require.NoError(t, l.Unlock(ctx))
		require.Equal(t, int64(2), rc.load()-n0, "requests of one Unlock")
	}
	names, err := c.ListDir(ctx, "d", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "a"}}, names)

	ln, err := c.LockName(ctx, "named/x", "holder")
	require.NoError(t, err)
	require.NoError(t, ln.Unlock(ctx))
	_, err = c.ListDir(ctx, "named", false)
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)

	l, err := c.Lock(ctx, "e", "x")
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "e/a", nil))
	require.NoError(t, l.Unlock(ctx))
	root, err := c.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "d"}, {Name: "keep"}}, root)
}
