package memorytopo_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestLateRootIndex: a Conn opened on a root after files were written
// there reads them, with their history, and both Conns see each other's
// later writes, deletes and re-creations.
func TestLateRootIndex(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{History: 3})
	top, err := f.NewConn("s", "")
	require.NoError(t, err)
	defer top.Close()
	var vs []int64
	for i := range 5 {
		v, err := top.Update(ctx, "x/d/f", fmt.Appendf(nil, "v%d", i), nil)
		require.NoError(t, err)
		vs = append(vs, int64(v.(topo.NumericVersion)))
	}
	late, err := f.NewConn("s", "x")
	require.NoError(t, err)
	defer late.Close()

	got, v, err := late.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "v4", string(got))
	require.Equal(t, topo.NumericVersion(vs[4]), v)
	for i, want := range map[int]string{2: "v2", 3: "v3", 4: "v4"} {
		b, err := late.GetVersion(ctx, "d/f", vs[i])
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
	for _, i := range []int{0, 1} {
		_, err := late.GetVersion(ctx, "d/f", vs[i])
		require.True(t, topo.IsErrType(err, topo.Compacted), "version %d: %v", vs[i], err)
	}

	v5, err := top.Update(ctx, "x/d/f", []byte("v5"), nil)
	require.NoError(t, err)
	got, v, err = late.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "v5", string(got))
	require.Equal(t, v5, v)

	require.NoError(t, late.Delete(ctx, "d/f", nil))
	_, _, err = top.Get(ctx, "x/d/f")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
	_, err = top.GetVersion(ctx, "x/d/f", vs[4])
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)

	v6, err := late.Create(ctx, "d/f", []byte("v6"))
	require.NoError(t, err)
	got, v, err = top.Get(ctx, "x/d/f")
	require.NoError(t, err)
	require.Equal(t, "v6", string(got))
	require.Equal(t, v6, v)
	_, err = top.GetVersion(ctx, "x/d/f", vs[4])
	require.True(t, topo.IsErrType(err, topo.NoNode), "a deleted file's history is discarded: %v", err)
}

// TestHistoryOne: with History 1 only the current version is kept.
func TestHistoryOne(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{History: 1})
	c, err := f.NewConn("s", "")
	require.NoError(t, err)
	defer c.Close()
	v1, err := c.Create(ctx, "f", []byte("a"))
	require.NoError(t, err)
	v2, err := c.Update(ctx, "f", []byte("b"), v1)
	require.NoError(t, err)
	_, err = c.GetVersion(ctx, "f", int64(v1.(topo.NumericVersion)))
	require.True(t, topo.IsErrType(err, topo.Compacted), "%v", err)
	b, err := c.GetVersion(ctx, "f", int64(v2.(topo.NumericVersion)))
	require.NoError(t, err)
	require.Equal(t, "b", string(b))
}

// TestRepublishedPathReads reads a file that is also a directory (its
// node stays while it is deleted and created again, and so does the index
// slot its value is read through) while another goroutine deletes and
// creates it: every Get, through either root's index, returns NoNode or a
// value written, never an older one than the previous Get of that reader.
func TestRepublishedPathReads(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	open := func(root string) *memorytopo.Conn {
		c, err := f.NewConn("mem", root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	top, sub := open("/root"), open("/root/a")
	_, err := top.Create(ctx, "a/d/child", []byte("c"))
	require.NoError(t, err)
	const rounds = 3000
	var wg sync.WaitGroup
	read := func(c *memorytopo.Conn, p string) {
		defer wg.Done()
		last := -1
		for last < rounds-1 {
			b, _, err := c.Get(ctx, p)
			if topo.IsErrType(err, topo.NoNode) {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			var i int
			if _, err := fmt.Sscanf(string(b), "v%d", &i); err != nil {
				t.Errorf("Get %s = %q, a value never written", p, b)
				return
			}
			if i < last {
				t.Errorf("Get %s = v%d after v%d", p, i, last)
				return
			}
			last = i
		}
	}
	wg.Add(2)
	go read(top, "a/d")
	go read(sub, "d")
	for i := range rounds {
		_, err := top.Create(ctx, "a/d", fmt.Appendf(nil, "v%d", i))
		require.NoError(t, err)
		if i < rounds-1 {
			require.NoError(t, top.Delete(ctx, "a/d", nil))
		}
	}
	wg.Wait()
}

// TestConnRootPruned: a Conn keeps its root's node between calls; once
// the root empties and leaves the tree, that Conn's Create and Lock work
// on the root's new node, which other Conns see.
func TestConnRootPruned(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c, err := f.NewConn("mem", "/r")
	require.NoError(t, err)
	defer c.Close()
	top, err := f.NewConn("mem", "")
	require.NoError(t, err)
	defer top.Close()
	for round := range 3 {
		_, err := c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		ld, err := c.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		require.NoError(t, ld.Unlock(ctx))
		require.NoError(t, c.Delete(ctx, "d/f", nil)) // the root empties
		_, err = top.ListDir(ctx, "r", false)
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "round %d: ListDir of the emptied root: %v", round, err)

		// The root comes back through another Conn: c's Lock finds it.
		_, err = top.Create(ctx, "r/e/f", []byte("y"))
		require.NoError(t, err)
		ld, err = c.Lock(ctx, "e", "holder")
		require.NoErrorf(t, err, "round %d: Lock in the root made again by another Conn", round)
		b, _, err := top.Get(ctx, "r/e/locks/"+lockEntryName(t, top, "r/e"))
		require.NoError(t, err)
		require.Equal(t, "holder", string(b))
		require.NoError(t, ld.Unlock(ctx))
		require.NoError(t, top.Delete(ctx, "r/e/f", nil))

		// And once more empty, c's Create makes it again for everyone.
		_, err = c.Create(ctx, "g", []byte("z"))
		require.NoError(t, err)
		b, _, err = top.Get(ctx, "r/g")
		require.NoErrorf(t, err, "round %d: Get of a file created in the root made again", round)
		require.Equal(t, "z", string(b))
		require.NoError(t, c.Delete(ctx, "g", nil))
	}
}

// lockEntryName returns the name of the only lock entry of dir.
func lockEntryName(t *testing.T, c topo.Conn, dir string) string {
	t.Helper()
	entries, err := c.ListDir(testCtx(t), dir+"/locks", false)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0].Name
}
