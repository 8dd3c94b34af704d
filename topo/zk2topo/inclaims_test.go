package zk2topo

import (
	"context"
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

// TestRootInsideElectionLeavesEntries: a Conn rooted inside an election
// (at <root>/elections/x, or at <root>/elections) of a Conn rooted
// elsewhere than the ZooKeeper root sees the candidate entries and their
// values as plain names: "elections" is a reserved first segment only
// below the root, so the root <root>/elections/x is not reserved by
// topo.IsReserved. Its writes must still leave them alone: Update and
// UpdateOp find them there (NodeExists), Delete and DeleteOp find no file
// (NoNode). The leader keeps its term, its id and its value; a file there
// stays writable.
func TestRootInsideElectionLeavesEntries(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	h := openConn(t, []string{testServer}, root)
	p, err := h.NewLeaderParticipation("x", "id1")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	raw := rawConn(t)
	values, _, err := raw.Children(root + "/elections/x/values")
	require.NoError(t, err)
	require.Len(t, values, 1)
	cand := entryNode(term)[len(root+"/elections/x/"):]

	for at, names := range map[string][]string{
		"/elections/x": {cand, "values/" + values[0]},
		"/elections":   {"x/" + cand, "x/values/" + values[0]},
	} {
		electionWritesRefused(ctx, t, openConn(t, []string{testServer}, root+at), names)
	}
	require.NoError(t, term.Check(ctx), "the leader keeps its term")
	id, err := p.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "id1", id)
	data, st, err := raw.Get(entryNode(term))
	require.NoError(t, err)
	require.Equal(t, "id1", string(data))
	require.EqualValues(t, 0, st.Version)
	require.NoError(t, p.Resign(ctx))
}

// TestRootAboveElectionLeavesEntries: a Conn rooted above another Conn's
// root (an ordinary root) names that Conn's candidate entries and values
// <dir>/elections/x/<sequence> and <dir>/elections/x/values/<name>:
// "elections" is reserved only as a path's first segment, and ZooKeeper's
// candidates have no "locks" segment (etcd's do: refused there). Its
// writes must leave them alone too.
func TestRootAboveElectionLeavesEntries(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	h := openConn(t, []string{testServer}, root+"/vt/global")
	p, err := h.NewLeaderParticipation("x", "id1")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	raw := rawConn(t)
	el := root + "/vt/global/elections/x"
	values, _, err := raw.Children(el + "/values")
	require.NoError(t, err)
	require.Len(t, values, 1)
	cand := entryNode(term)[len(el+"/"):]
	q := openConn(t, []string{testServer}, root)
	electionWritesRefused(ctx, t, q, []string{"vt/global/elections/x/" + cand, "vt/global/elections/x/values/" + values[0]})
	// A file of a path with a segment "elections" is a file as anywhere.
	fv, err := q.Create(ctx, "ks/elections/cfg", []byte("1"))
	require.NoError(t, err)
	fv, err = q.Update(ctx, "ks/elections/cfg", []byte("2"), fv)
	require.NoError(t, err)
	_, err = q.Update(ctx, "ks/elections/cfg", []byte("3"), nil)
	require.NoError(t, err)
	require.ErrorIs(t, q.Delete(ctx, "ks/elections/cfg", fv), topo.BadVersion)
	_, err = q.Txn(ctx, topo.UpdateOp("ks/elections/cfg", []byte("4"), nil), topo.UpdateOp("ks/elections/new", []byte("n"), nil))
	require.NoError(t, err)
	require.NoError(t, q.Delete(ctx, "ks/elections/new", nil))
	require.NoError(t, q.Delete(ctx, "ks/elections/cfg", nil))
	_, _, err = q.Get(ctx, "ks/elections/cfg")
	require.ErrorIs(t, err, topo.NoNode)
	require.NoError(t, term.Check(ctx), "the leader keeps its term")
	id, err := p.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "id1", id)
	data, st, err := raw.Get(entryNode(term))
	require.NoError(t, err)
	require.Equal(t, "id1", string(data))
	require.EqualValues(t, 0, st.Version)
	require.NoError(t, p.Resign(ctx))
}

// electionWritesRefused tries every write through q on each of names (a
// candidate entry or value) and requires each refused; a file next to
// them stays writable.
func electionWritesRefused(ctx context.Context, t *testing.T, q *Conn, names []string) {
	t.Helper()
	for _, name := range names {
		what := q.root + ": " + name
		_, err := q.Update(ctx, name, []byte("evil"), nil)
		require.ErrorIs(t, err, topo.NodeExists, "Update %s", what)
		_, err = q.Update(ctx, name, []byte("evil"), topo.NumericVersion(0))
		require.ErrorIs(t, err, topo.NodeExists, "Update at the entry's version %s", what)
		_, err = q.Txn(ctx, topo.UpdateOp(name, []byte("evil"), nil))
		requireTxnErr(t, err, 0, topo.NodeExists)
		require.ErrorIs(t, q.Delete(ctx, name, nil), topo.NoNode, "Delete %s", what)
		require.ErrorIs(t, q.Delete(ctx, name, topo.NumericVersion(0)), topo.NoNode, "Delete at the entry's version %s", what)
		_, err = q.Txn(ctx, topo.DeleteOp(name, nil))
		requireTxnErr(t, err, 0, topo.NoNode)
	}
	// A file next to them is written as anywhere else.
	_, err := q.Create(ctx, "plainfile", []byte("1"))
	require.NoError(t, err)
	_, err = q.Update(ctx, "plainfile", []byte("2"), nil)
	require.NoError(t, err)
	require.NoError(t, q.Delete(ctx, "plainfile", nil))
}

// TestRootInsideLocksMixedTxn: on a Conn rooted inside a "locks" znode,
// a Txn mixing writes of a file, an entry write and a failing condition
// names the first failing op in the caller's order (the multi puts the
// conditions first: an entry write before a failing condition is found
// by the multi that leaves the condition out), and writes nothing; as
// etcd2topo's test of the same name.
func TestRootInsideLocksMixedTxn(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	h := openConn(t, []string{testServer}, root)
	q := openConn(t, []string{testServer}, root+"/d/locks")
	_, err := h.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := h.Lock(ctx, "d", "h")
	require.NoError(t, err)
	name := entryNode(l)[len(root+"/d/locks/"):]
	fv, err := q.Create(ctx, "file", []byte("1"))
	require.NoError(t, err)
	bad := topo.NumericVersion(7)
	_, err = q.Txn(ctx, topo.UpdateOp("file", []byte("x"), fv), topo.DeleteOp(name, nil))
	requireTxnErr(t, err, 1, topo.NoNode)
	_, err = q.Txn(ctx, topo.UpdateOp(name, []byte("x"), nil), topo.IfVersion("file", bad))
	requireTxnErr(t, err, 0, topo.NodeExists)
	_, err = q.Txn(ctx, topo.IfVersion("file", bad), topo.UpdateOp(name, []byte("x"), nil))
	requireTxnErr(t, err, 0, topo.BadVersion)
	_, err = q.Txn(ctx, topo.CreateOp("new", []byte("n")), topo.UpdateOp("file", []byte("x"), nil), topo.DeleteOp(name, nil), topo.IfVersion("file", bad))
	requireTxnErr(t, err, 2, topo.NoNode)
	_, err = q.Txn(ctx, topo.IfHeld(l), topo.UpdateOp(name, []byte("x"), nil))
	requireTxnErr(t, err, 1, topo.NodeExists)
	data, v, err := q.Get(ctx, "file")
	require.NoError(t, err)
	require.Equal(t, "1", string(data))
	require.Equal(t, fv, v)
	_, _, err = q.Get(ctx, "new")
	require.ErrorIs(t, err, topo.NoNode)
	require.NoError(t, l.Check(ctx))
	_, err = q.Txn(ctx, topo.IfHeld(l), topo.CreateOp("new", []byte("n")), topo.UpdateOp("file", []byte("x"), fv))
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}
