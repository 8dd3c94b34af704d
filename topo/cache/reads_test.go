package cache_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
)

// TestCachedReads: reads under the prefix come from memory and equal the
// store's; reads outside it, and ListDir unless asked, go to the store;
// ListDir from memory lists files and directories but not lock entries.
func TestCachedReads(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	raw := open()
	defer raw.Close()
	for _, p := range []string{"c/a", "c/b/x", "c/b/y", "c/bb", "other"} {
		_, err := raw.Create(ctx, p, []byte(p))
		require.NoError(t, err)
	}
	c, err := cache.New(open(), "c/", cache.Options{ListDirFromMemory: true})
	require.NoError(t, err)
	defer c.Close()

	info := requireGet(t, ctx, c, "c/a", "c/a", true)
	require.False(t, info.Stale)
	require.False(t, info.Confirmed.IsZero())
	requireGet(t, ctx, c, "other", "other", false)
	_, _, info, err = c.GetWithInfo(ctx, "c/none")
	require.True(t, topo.IsErrType(err, topo.NoNode), "Get of an absent file: %v", err)
	require.True(t, info.FromMemory)

	// Versions are the store's.
	_, want, err := raw.Get(ctx, "c/b/x")
	require.NoError(t, err)
	_, got, err := c.Get(ctx, "c/b/x")
	require.NoError(t, err)
	require.Equal(t, want.String(), got.String())

	kvs, info, err := c.ListWithInfo(ctx, "c/b")
	require.NoError(t, err)
	require.True(t, info.FromMemory)
	rawKVs, err := raw.List(ctx, "c/b")
	require.NoError(t, err)
	require.Equal(t, rawKVs, kvs)
	_, err = c.List(ctx, "c/z")
	require.True(t, topo.IsErrType(err, topo.NoNode))

	for _, full := range []bool{false, true} {
		got, err := c.ListDir(ctx, "c", full)
		require.NoError(t, err)
		want, err := raw.ListDir(ctx, "c", full)
		require.NoError(t, err)
		require.Equal(t, want, got, "ListDir(c, %v)", full)
	}

	// A lock entry is listed by the store, not by memory.
	l, err := raw.Lock(ctx, "c/b", "holder")
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(ctx)) }()
	fromStore, err := raw.ListDir(ctx, "c/b", true)
	require.NoError(t, err)
	fromMemory, err := c.ListDir(ctx, "c/b", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "x", Type: topo.TypeFile}, {Name: "y", Type: topo.TypeFile}}, fromMemory)
	require.Greater(t, len(fromStore), len(fromMemory), "the store lists the lock entry: %v", fromStore)

	// Without ListDirFromMemory the Cache lists what the store lists.
	c2 := wrap(t, open(), cache.Options{})
	defer c2.Close()
	got2, err := c2.ListDir(ctx, "c/b", true)
	require.NoError(t, err)
	require.Equal(t, fromStore, got2)

	// A change by another Conn arrives through the watch.
	_, err = raw.Update(ctx, "c/a", []byte("a2"), nil)
	require.NoError(t, err)
	waitHolds(t, ctx, c, "c/a", "a2")
}

// TestReadYourWrites: while the Cache's watch is held back, a write made
// through the Cache is read back at once (from the store), by Get, List
// and Watch; once the watch delivers it, memory answers again.
func TestReadYourWrites(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	g := newGated(open())
	c := wrap(t, g, cache.Options{})
	defer c.Close()
	v, err := c.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "one")

	g.hold()
	_, err = c.Update(ctx, "f", []byte("two"), v)
	require.NoError(t, err)
	requireGet(t, ctx, c, "f", "two", false)
	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, "two", string(kvs[0].Value))
	_, err = c.Txn(ctx, topo.CreateOp("g", []byte("g")), topo.UpdateOp("f", []byte("three"), nil))
	require.NoError(t, err)
	requireGet(t, ctx, c, "g", "g", false)
	requireGet(t, ctx, c, "f", "three", false)
	require.NoError(t, c.Delete(ctx, "g", nil))
	_, _, err = c.Get(ctx, "g")
	require.True(t, topo.IsErrType(err, topo.NoNode), "Get after the Cache's own Delete: %v", err)

	// Another Conn's write is not waited for in Cached mode, but
	// Consistent and Bypass reads see it.
	other := open()
	defer other.Close()
	_, err = other.Create(ctx, "h", []byte("h"))
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "h")
	require.True(t, topo.IsErrType(err, topo.NoNode), "a Cached read while the watch is held: %v", err)
	for _, m := range []cache.Mode{cache.Consistent, cache.Bypass} {
		requireGet(t, cache.WithMode(ctx, m), c, "h", "h", false)
	}

	g.release()
	waitHolds(t, ctx, c, "f", "three")
	waitHolds(t, ctx, c, "h", "h")
	_, _, info, err := c.GetWithInfo(ctx, "g")
	require.True(t, topo.IsErrType(err, topo.NoNode))
	require.True(t, info.FromMemory, "memory answers for g once the watch delivered its deletion")
}

// TestClose: Close ends local watchers with Interrupted, and every later
// call returns Closed, from memory too.
func TestClose(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	c := wrap(t, open(), cache.Options{})
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "x")
	_, ch, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "")
	require.NoError(t, err)
	c.Close()
	c.Close()
	var last *topo.WatchData
	for wd := range ch {
		last = wd
	}
	require.True(t, topo.IsErrType(last.Err, topo.Interrupted), "%v", last.Err)
	var lastR *topo.WatchDataRecursive
	for wd := range rch {
		lastR = wd
	}
	require.True(t, topo.IsErrType(lastR.Err, topo.Interrupted), "%v", lastR.Err)
	_, _, err = c.Get(ctx, "f")
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
	_, err = c.List(ctx, "")
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
	_, _, err = c.Watch(ctx, "f")
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
	require.Zero(t, c.State().Watchers)
}

// TestCloseLeavesConnOpen: with LeaveConnOpen, Close ends the local
// watchers but the Conn still serves, directly and through the Cache (as
// in Bypass mode).
func TestCloseLeavesConnOpen(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	conn := open()
	defer conn.Close()
	c := wrap(t, conn, cache.Options{LeaveConnOpen: true})
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "x")
	_, ch, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	c.Close()
	var last *topo.WatchData
	for wd := range ch {
		last = wd
	}
	require.True(t, topo.IsErrType(last.Err, topo.Interrupted), "%v", last.Err)
	b, _, err := conn.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	requireGet(t, ctx, c, "f", "x", false)
}
