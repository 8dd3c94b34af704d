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
