package zk2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// emptyWriteFixture makes, under a fresh root, "dir" (a directory only:
// dir/x is a file) and "file" (a file holding "v" with file/x below it),
// and returns the Conn and a function returning the Stat.Version of a
// znode (-1 when absent), to show that nothing was written.
func emptyWriteFixture(t *testing.T) (context.Context, *Conn, func(p string) int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	c := openConn(t, []string{testServer}, freshRoot(t))
	for _, p := range []string{"dir/x", "file/x", "file"} {
		_, err := c.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	version := func(p string) int32 {
		t.Helper()
		r := c.statOn(ctx, nil, p, c.zkPath(p), false)
		require.NoError(t, r.err)
		if !r.exists {
			return -1
		}
		return r.st.Version
	}
	return ctx, c, version
}

// requireEmptyWithChildren checks that err is InvalidArgument with
// ErrEmptyFileWithChildren (inside a *topo.TxnError naming op index when
// index >= 0).
func requireEmptyWithChildren(t *testing.T, err error, index int) {
	t.Helper()
	require.Error(t, err)
	if index >= 0 {
		var te *topo.TxnError
		require.True(t, errors.As(err, &te), "%v", err)
		require.Equal(t, index, te.Index, "%v", err)
		err = te.Err
	}
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	require.ErrorIs(t, err, ErrEmptyFileWithChildren)
}

// TestEmptyWriteOntoDirectoryRefused: ZooKeeper cannot hold an empty file
// that has files below it (the znode, empty with children, reads as a
// directory). Create of empty contents, or an Update (unconditional or
// not) of empty contents, on a path that is only a directory or a file
// with files below it used to succeed and leave no file there (Get:
// NoNode): the write reported done and lost, or the file gone. They are
// refused with InvalidArgument, nothing written.
func TestEmptyWriteOntoDirectoryRefused(t *testing.T) {
	ctx, c, version := emptyWriteFixture(t)
	dirV, fileV := version("dir"), version("file")
	_, fv, err := c.Get(ctx, "file")
	require.NoError(t, err)

	_, err = c.Create(ctx, "dir", nil)
	requireEmptyWithChildren(t, err, -1)
	_, err = c.Update(ctx, "dir", nil, nil)
	requireEmptyWithChildren(t, err, -1)
	_, err = c.Update(ctx, "file", []byte{}, nil)
	requireEmptyWithChildren(t, err, -1)
	_, err = c.Update(ctx, "file", nil, fv)
	requireEmptyWithChildren(t, err, -1)
	_, err = c.Update(ctx, "file", nil, topo.NumericVersion(int64(fileV)+1))
	require.True(t, topo.IsErrType(err, topo.BadVersion), "a stale version is still BadVersion: %v", err)
	_, err = c.Update(ctx, "dir", nil, topo.NumericVersion(int64(dirV)))
	require.True(t, topo.IsErrType(err, topo.NoNode), "a directory is still NoNode to a compare-and-set: %v", err)

	require.Equal(t, dirV, version("dir"), "dir written")
	require.Equal(t, fileV, version("file"), "file written")
	_, _, err = c.Get(ctx, "dir")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
	data, _, err := c.Get(ctx, "file")
	require.NoError(t, err)
	require.Equal(t, "v", string(data))

	// Empty writes where the znode has no child, and non-empty ones onto
	// a directory, go on as before.
	_, err = c.Create(ctx, "leaf", nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "leaf", nil, nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "new/leaf", nil, nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "dir/x", nil, nil)
	require.NoError(t, err)
	_, err = c.Create(ctx, "dir", []byte("d"))
	require.NoError(t, err)
	for p, want := range map[string]string{"leaf": "", "new/leaf": "", "dir/x": "", "dir": "d", "file": "v"} {
		data, _, err := c.Get(ctx, p)
		require.NoError(t, err, p)
		require.Equal(t, want, string(data), p)
	}
}

// TestTxnEmptyWriteOntoDirectoryRefused: the same through Txn: a
// CreateOp or UpdateOp of empty contents onto a znode with children, and
// one whose path another write of the Txn creates a file below, fail
// with a *topo.TxnError wrapping InvalidArgument, nothing written.
func TestTxnEmptyWriteOntoDirectoryRefused(t *testing.T) {
	ctx, c, version := emptyWriteFixture(t)
	dirV, fileV := version("dir"), version("file")
	_, fv, err := c.Get(ctx, "file")
	require.NoError(t, err)
	keep := topo.UpdateOp("dir/x", []byte("w"), nil) // a write that must not land

	for _, ops := range [][]topo.TxnOp{
		{keep, topo.CreateOp("dir", nil)},
		{keep, topo.UpdateOp("dir", nil, nil)},
		{keep, topo.UpdateOp("file", nil, nil)},
		{keep, topo.UpdateOp("file", nil, fv)},
		{keep, topo.CreateOp("n", nil), topo.CreateOp("n/x", []byte("x"))},
		{keep, topo.UpdateOp("n", nil, nil), topo.CreateOp("n/x", []byte("x"))},
		{keep, topo.UpdateOp("n", nil, nil), topo.UpdateOp("n/m/x", []byte("x"), nil)},
	} {
		_, err := c.Txn(ctx, ops...)
		requireEmptyWithChildren(t, err, 1)
	}
	require.Equal(t, dirV, version("dir"), "dir written")
	require.Equal(t, fileV, version("file"), "file written")
	require.Equal(t, int32(-1), version("n"), "n created")
	data, _, err := c.Get(ctx, "dir/x")
	require.NoError(t, err)
	require.Equal(t, "v", string(data))

	// Empty writes of leaves go on as before.
	_, err = c.Txn(ctx, topo.CreateOp("leaf", nil), topo.UpdateOp("leaf2", nil, nil), topo.UpdateOp("dir/x", nil, nil))
	require.NoError(t, err)
	for _, p := range []string{"leaf", "leaf2", "dir/x"} {
		data, _, err := c.Get(ctx, p)
		require.NoError(t, err, p)
		require.Empty(t, data, p)
	}
}
