package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestRootInsideLocksLeavesEntries: a Conn rooted inside a "locks"
// directory (a reserved place, where its keys are lock entries) cannot
// rewrite or delete another holder's entry, by any write: Update (which,
// as a put without a lease, would also detach the entry from its lease)
// and Txn's UpdateOp find it there (NodeExists), Delete and DeleteOp find
// no file (NoNode), as memorytopo answers; the holder keeps its lock.
// Keys without a lease there stay writable files, and a Vitess-style root
// is untouched (the check is only made for roots at reserved places).
func TestRootInsideLocksLeavesEntries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("etcd", func(t *testing.T) {
		root := newRoot()
		h := openConn(t, serverAddr, root)
		q := openConn(t, serverAddr, root+"/d/locks")
		l := entryWritesRefused(t, ctx, h, q)
		resp, err := rawClient(t, serverAddr).Get(ctx, entryBehind(t, l).key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		require.Equal(t, "h", string(resp.Kvs[0].Value))
		require.EqualValues(t, entryBehind(t, l).lease.id, resp.Kvs[0].Lease, "the entry keeps its lease")
		require.NoError(t, l.Unlock(ctx))
	})
	t.Run("memorytopo", func(t *testing.T) {
		f := memorytopo.NewFactory()
		h, err := f.NewConn("", "/r")
		require.NoError(t, err)
		defer h.Close()
		q, err := f.NewConn("", "/r/d/locks")
		require.NoError(t, err)
		defer q.Close()
		l := entryWritesRefused(t, ctx, h, q)
		require.NoError(t, l.Unlock(ctx))
	})
}

// entryWritesRefused locks "d" through h and tries every write on the
// lock's entry through q, a Conn rooted at h's d/locks; it returns the
// lock, still held.
func entryWritesRefused(t *testing.T, ctx context.Context, h, q topo.Conn) topo.LockDescriptor {
	t.Helper()
	_, err := h.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := h.Lock(ctx, "d", "h")
	require.NoError(t, err)
	entries, err := q.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	name := entries[0].Name
	_, v, err := q.Get(ctx, name)
	require.NoError(t, err, "an entry reads as a file")

	_, err = q.Update(ctx, name, []byte("x"), nil)
	require.ErrorIs(t, err, topo.NodeExists, "Update")
	_, err = q.Update(ctx, name, []byte("x"), v)
	require.ErrorIs(t, err, topo.NodeExists, "Update at the entry's version")
	_, err = q.Create(ctx, name, []byte("x"))
	require.ErrorIs(t, err, topo.NodeExists, "Create")
	require.ErrorIs(t, q.Delete(ctx, name, nil), topo.NoNode, "Delete")
	require.ErrorIs(t, q.Delete(ctx, name, v), topo.NoNode, "Delete at the entry's version")
	for _, op := range []topo.TxnOp{topo.UpdateOp(name, []byte("x"), nil), topo.UpdateOp(name, []byte("x"), v)} {
		_, err = q.Txn(ctx, topo.IfPresent(name), op)
		var te *topo.TxnError
		require.ErrorAs(t, err, &te, "Txn UpdateOp")
		require.Equal(t, 1, te.Index)
		require.ErrorIs(t, err, topo.NodeExists, "Txn UpdateOp")
	}
	for _, op := range []topo.TxnOp{topo.DeleteOp(name, nil), topo.DeleteOp(name, v)} {
		_, err = q.Txn(ctx, op)
		var te *topo.TxnError
		require.ErrorAs(t, err, &te, "Txn DeleteOp")
		require.Equal(t, 0, te.Index)
		require.ErrorIs(t, err, topo.NoNode, "Txn DeleteOp")
	}
	require.NoError(t, l.Check(ctx), "the holder keeps its lock")
	data, _, err := q.Get(ctx, name)
	require.NoError(t, err)
	require.Equal(t, "h", string(data))

	// A file there (no lease) is written as anywhere else.
	fv, err := q.Create(ctx, "file", []byte("1"))
	require.NoError(t, err)
	fv, err = q.Update(ctx, "file", []byte("2"), fv)
	require.NoError(t, err)
	_, err = q.Update(ctx, "file", []byte("3"), nil)
	require.NoError(t, err)
	_, err = q.Txn(ctx, topo.UpdateOp("file", []byte("4"), nil))
	require.NoError(t, err)
	require.ErrorIs(t, q.Delete(ctx, "file", fv), topo.BadVersion)
	require.NoError(t, q.Delete(ctx, "file", nil))
	require.ErrorIs(t, q.Delete(ctx, "file", nil), topo.NoNode)
	return l
}

// TestRootInsideLocksMixedTxn: on a Conn rooted inside a "locks"
// directory, a Txn mixing writes of a file, an entry write and a failing
// condition names the first failing op in the caller's order, whichever
// it is, and writes nothing; on memorytopo the same.
func TestRootInsideLocksMixedTxn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Run("etcd", func(t *testing.T) {
		root := newRoot()
		mixedEntryTxns(t, ctx, openConn(t, serverAddr, root), openConn(t, serverAddr, root+"/d/locks"))
	})
	t.Run("memorytopo", func(t *testing.T) {
		f := memorytopo.NewFactory()
		h, err := f.NewConn("", "/r")
		require.NoError(t, err)
		defer h.Close()
		q, err := f.NewConn("", "/r/d/locks")
		require.NoError(t, err)
		defer q.Close()
		mixedEntryTxns(t, ctx, h, q)
	})
}

// mixedEntryTxns locks "d" through h and, through q (rooted at h's
// d/locks), runs Txns mixing the entry's writes with a file's.
func mixedEntryTxns(t *testing.T, ctx context.Context, h, q topo.Conn) {
	t.Helper()
	_, err := h.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := h.Lock(ctx, "d", "h")
	require.NoError(t, err)
	entries, err := q.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	name := entries[0].Name
	fv, err := q.Create(ctx, "file", []byte("1"))
	require.NoError(t, err)
	bad := topo.NumericVersion(1)
	requireTxn := func(err error, index int, code topo.ErrorCode) {
		t.Helper()
		var te *topo.TxnError
		require.ErrorAs(t, err, &te)
		require.Equal(t, index, te.Index, "%v", err)
		require.ErrorIs(t, err, code)
	}
	_, err = q.Txn(ctx, topo.UpdateOp("file", []byte("x"), fv), topo.DeleteOp(name, nil))
	requireTxn(err, 1, topo.NoNode)
	_, err = q.Txn(ctx, topo.UpdateOp(name, []byte("x"), nil), topo.IfVersion("file", bad))
	requireTxn(err, 0, topo.NodeExists)
	_, err = q.Txn(ctx, topo.IfVersion("file", bad), topo.UpdateOp(name, []byte("x"), nil))
	requireTxn(err, 0, topo.BadVersion)
	_, err = q.Txn(ctx, topo.CreateOp("new", []byte("n")), topo.UpdateOp("file", []byte("x"), nil), topo.DeleteOp(name, nil), topo.IfVersion("file", bad))
	requireTxn(err, 2, topo.NoNode)
	_, err = q.Txn(ctx, topo.IfHeld(l), topo.UpdateOp(name, []byte("x"), nil))
	requireTxn(err, 1, topo.NodeExists)
	data, v, err := q.Get(ctx, "file")
	require.NoError(t, err)
	require.Equal(t, "1", string(data))
	require.Equal(t, fv, v)
	_, _, err = q.Get(ctx, "new")
	require.ErrorIs(t, err, topo.NoNode)
	require.NoError(t, l.Check(ctx))
	// The same writes without the entry pass.
	_, err = q.Txn(ctx, topo.IfHeld(l), topo.CreateOp("new", []byte("n")), topo.UpdateOp("file", []byte("x"), fv))
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}
