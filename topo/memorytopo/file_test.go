package memorytopo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func TestGetVersionHistory(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{History: 3})
	c := newConn(t, f)

	var versions []int64
	v, err := c.Create(ctx, "a", []byte("v0"))
	require.NoError(t, err)
	versions = append(versions, int64(v.(topo.NumericVersion)))
	for i := 1; i < 5; i++ {
		v, err = c.Update(ctx, "a", fmt.Appendf(nil, "v%d", i), v)
		require.NoError(t, err)
		versions = append(versions, int64(v.(topo.NumericVersion)))
	}
	// Another file's version was never held by "a".
	other, err := c.Create(ctx, "b", []byte("x"))
	require.NoError(t, err)

	// The last 3 versions (current included) are kept.
	for i := 2; i < 5; i++ {
		got, err := c.GetVersion(ctx, "a", versions[i])
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("v%d", i), string(got))
	}
	for i := 0; i < 2; i++ {
		_, err := c.GetVersion(ctx, "a", versions[i])
		requireCode(t, err, topo.Compacted)
	}
	_, err = c.GetVersion(ctx, "a", int64(other.(topo.NumericVersion)))
	requireCode(t, err, topo.NoNode)
	_, err = c.GetVersion(ctx, "a", -1)
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.GetVersion(ctx, "missing", versions[4])
	requireCode(t, err, topo.NoNode)

	// Deleting a file discards its history.
	require.NoError(t, c.Delete(ctx, "a", nil))
	_, err = c.GetVersion(ctx, "a", versions[4])
	requireCode(t, err, topo.NoNode)
}

func TestVersionsIncreaseStoreWide(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	v1, err := c.Create(ctx, "x/a", nil)
	require.NoError(t, err)
	v2, err := c.Create(ctx, "y/b", nil)
	require.NoError(t, err)
	require.Greater(t, int64(v2.(topo.NumericVersion)), int64(v1.(topo.NumericVersion)))
}

func TestContentsAreCopied(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	in := []byte("abc")
	_, err := c.Create(ctx, "f", in)
	require.NoError(t, err)
	in[0] = 'X'
	out, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "abc", string(out))
	out[0] = 'Y'
	again, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "abc", string(again))
}

func TestStoresAndRoots(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	r1, err := f.NewConn("s1", "/r1")
	require.NoError(t, err)
	defer r1.Close()
	r2, err := f.NewConn("s1", "r2/")
	require.NoError(t, err)
	defer r2.Close()
	top, err := f.NewConn("s1", "")
	require.NoError(t, err)
	defer top.Close()
	other, err := f.NewConn("s2", "/r1")
	require.NoError(t, err)
	defer other.Close()

	_, err = r1.Create(ctx, "/a/b", []byte("1"))
	require.NoError(t, err)

	// Same store, other root: not visible.
	_, _, err = r2.Get(ctx, "a/b")
	requireCode(t, err, topo.NoNode)
	// Other store, same root: not visible.
	_, _, err = other.Get(ctx, "a/b")
	requireCode(t, err, topo.NoNode)
	// The store's top sees the root as a prefix.
	got, _, err := top.Get(ctx, "r1/a/b")
	require.NoError(t, err)
	require.Equal(t, "1", string(got))
	kvs, err := top.List(ctx, "r")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, "r1/a/b", kvs[0].Path)
	kvs, err = r1.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, "a/b", kvs[0].Path)

	_, err = f.NewConn("s1", "bad//root")
	requireCode(t, err, topo.InvalidPath)
}

func TestFileAndDirectoryAtOnePath(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "a", []byte("file"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "a/b", []byte("child"))
	require.NoError(t, err)
	entries, err := c.ListDir(ctx, "", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "a", Type: topo.TypeDirectory}}, entries)
	require.NoError(t, c.Delete(ctx, "a/b", nil))
	entries, err = c.ListDir(ctx, "", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "a", Type: topo.TypeFile}}, entries)
	// Deleting a directory that is not a file is NoNode.
	_, err = c.Create(ctx, "d/e", nil)
	require.NoError(t, err)
	requireCode(t, c.Delete(ctx, "d", nil), topo.NoNode)
}

func TestRegisteredAsMemory(t *testing.T) {
	f, err := topo.GetFactory(memorytopo.Name)
	require.NoError(t, err)
	require.IsType(t, &memorytopo.Factory{}, f)

	ts, err := topo.OpenServer("memory", t.Name(), "/global")
	require.NoError(t, err)
	defer ts.Close()
	ctx := testCtx(t)
	// The registered Factory is process-wide: the store outlives this test
	// (and -count repeats), so write unconditionally.
	_, err = ts.GlobalCell().Update(ctx, "x", []byte("y"), nil)
	require.NoError(t, err)
}

func TestNewServerCells(t *testing.T) {
	ctx := testCtx(t)
	ts, f := memorytopo.NewServerAndFactory(ctx, "zone1", "zone2", "zone1")
	defer ts.Close()

	names, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2"}, names)

	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Equal(t, "/zone1", ci.GetRoot())

	z1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = z1.Create(ctx, "keyspaces/ks", []byte("z1"))
	require.NoError(t, err)
	z2, err := ts.ConnForCell(ctx, "zone2")
	require.NoError(t, err)
	_, _, err = z2.Get(ctx, "keyspaces/ks")
	requireCode(t, err, topo.NoNode)
	_, _, err = ts.GlobalCell().Get(ctx, "keyspaces/ks")
	requireCode(t, err, topo.NoNode)

	// The cells share the Factory's store: a Conn at the store's top sees
	// every cell under its root.
	top, err := f.NewConn("", "")
	require.NoError(t, err)
	defer top.Close()
	got, _, err := top.Get(ctx, "zone1/keyspaces/ks")
	require.NoError(t, err)
	require.Equal(t, "z1", string(got))

	require.NoError(t, ts.CreateCellInfo(ctx, "zone3", &topodatapb.CellInfo{Root: "/zone3"}))
	z3, err := ts.ConnForCell(ctx, "zone3")
	require.NoError(t, err)
	_, err = z3.Create(ctx, "a", nil)
	require.NoError(t, err)
}

func TestNewServerPanicsOnBadCell(t *testing.T) {
	require.Panics(t, func() { memorytopo.NewServer(context.Background(), "a/b") })
	require.Panics(t, func() { memorytopo.NewServer(context.Background(), "") })
}

// TestLateRootSeesExistingFiles checks that a Conn opened on a new root
// after files were written reads them (and later writes) with Get.
func TestLateRootSeesExistingFiles(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	w := newConn(t, f)
	_, err := w.Create(ctx, "a/b/c", []byte("1"))
	require.NoError(t, err)
	_, err = w.Lock(ctx, "a", "held")
	require.NoError(t, err)

	for root, p := range map[string]string{"": "root/a/b/c", "/root/a": "b/c", "root/a/b/": "c"} {
		c, err := f.NewConn("mem", root)
		require.NoError(t, err)
		got, _, err := c.Get(ctx, p)
		require.NoError(t, err, "root %q", root)
		require.Equal(t, "1", string(got))
		_, err = w.Update(ctx, "a/b/c", []byte("2"), nil)
		require.NoError(t, err)
		got, _, err = c.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "2", string(got))
		_, err = w.Update(ctx, "a/b/c", []byte("1"), nil)
		require.NoError(t, err)
		c.Close()
	}
	top, err := f.NewConn("mem", "")
	require.NoError(t, err)
	defer top.Close()
	es, err := top.ListDir(ctx, "root/a/locks", false)
	require.NoError(t, err)
	got, _, err := top.Get(ctx, "root/a/locks/"+es[0].Name)
	require.NoError(t, err)
	require.Equal(t, "held", string(got))
	// Sibling roots sharing a name prefix stay apart.
	r, err := f.NewConn("mem", "roo")
	require.NoError(t, err)
	defer r.Close()
	_, _, err = r.Get(ctx, "t/a/b/c")
	requireCode(t, err, topo.NoNode)
}
