package zk2topo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestRootInsideLocksLeavesEntries: a Conn rooted inside a "locks" znode
// (a reserved place, where its znodes are lock entries) cannot rewrite or
// delete another holder's entry, by any write: Update and Txn's UpdateOp
// find it there (NodeExists), Delete and DeleteOp find no file (NoNode),
// as memorytopo and etcd2topo answer; the holder keeps its lock. Znodes
// there that are not ephemeral stay writable files.
func TestRootInsideLocksLeavesEntries(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	h := openConn(t, []string{testServer}, root)
	q := openConn(t, []string{testServer}, root+"/d/locks")
	_, err := h.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := h.Lock(ctx, "d", "h")
	require.NoError(t, err)
	name := entryNode(l)[len(root+"/d/locks/"):]
	v := topo.NumericVersion(0) // the entry's data version (Get reads no entry: NoNode)

	_, err = q.Update(ctx, name, []byte("x"), nil)
	require.ErrorIs(t, err, topo.NodeExists, "Update")
	_, err = q.Update(ctx, name, []byte("x"), v)
	require.ErrorIs(t, err, topo.NodeExists, "Update at the entry's version")
	_, err = q.Create(ctx, name, []byte("x"))
	require.ErrorIs(t, err, topo.NodeExists, "Create")
	require.ErrorIs(t, q.Delete(ctx, name, nil), topo.NoNode, "Delete")
	require.ErrorIs(t, q.Delete(ctx, name, v), topo.NoNode, "Delete at the entry's version")
	for _, op := range []topo.TxnOp{topo.UpdateOp(name, []byte("x"), nil), topo.UpdateOp(name, []byte("x"), v)} {
		_, err = q.Txn(ctx, topo.IfAbsent("nothing"), op)
		requireTxnErr(t, err, 1, topo.NodeExists)
	}
	for _, op := range []topo.TxnOp{topo.DeleteOp(name, nil), topo.DeleteOp(name, v)} {
		_, err = q.Txn(ctx, op)
		requireTxnErr(t, err, 0, topo.NoNode)
	}
	require.NoError(t, l.Check(ctx), "the holder keeps its lock")
	data, st, err := rawConn(t).Get(entryNode(l))
	require.NoError(t, err)
	require.Equal(t, "h", string(data))
	require.EqualValues(t, 0, st.Version, "the entry was never rewritten")

	// A file there (persistent) is written as anywhere else.
	fv, err := q.Create(ctx, "file", []byte("1"))
	require.NoError(t, err)
	fv, err = q.Update(ctx, "file", []byte("2"), fv)
	require.NoError(t, err)
	_, err = q.Update(ctx, "file", []byte("3"), nil)
	require.NoError(t, err)
	_, err = q.Txn(ctx, topo.UpdateOp("file", []byte("4"), nil))
	require.NoError(t, err)
	require.ErrorIs(t, q.Delete(ctx, "file", fv), topo.BadVersion)
	_, err = q.Update(ctx, "new", []byte("n"), nil)
	require.NoError(t, err, "an unconditional Update creates an absent file")
	require.NoError(t, q.Delete(ctx, "new", nil))
	require.NoError(t, q.Delete(ctx, "file", nil))
	require.ErrorIs(t, q.Delete(ctx, "file", nil), topo.NoNode)
	require.NoError(t, l.Check(ctx))
	require.NoError(t, l.Unlock(ctx))
}
