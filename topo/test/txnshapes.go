package test

import (
	"fmt"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testTxnShapes: transactions whose writes turn a directory into a file,
// delete a file with the files below it, or hold several conditions on one
// path have the semantics of the same ops one by one on the state before
// the transaction; a failed one leaves no directory it would have created;
// version 0 is a version like any other for the transaction's conditions
// (NoNode for an absent file, BadVersion for a file at another version).
func testTxnShapes(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "keep", "k")

	// A directory's last file deleted and the directory written as a
	// file, by CreateOp after the delete or UpdateOp before it.
	for _, ops := range [][]topo.TxnOp{
		{topo.DeleteOp("d/x", nil), topo.CreateOp("d", []byte("file d"))},
		{topo.UpdateOp("d", []byte("file d"), nil), topo.DeleteOp("d/x", nil)},
	} {
		mustCreate(t, ctx, c, "d/x", "x")
		vs, err := c.Txn(ctx, ops...)
		require.NoErrorf(t, err, "%s(%s), %s(%s)", ops[0].Kind, ops[0].Path, ops[1].Kind, ops[1].Path)
		requireNoFile(t, ctx, r, "d/x")
		requireFile(t, ctx, r, "d", "file d", vs[opIndex(ops, "d")])
		_, err = r.ListDir(ctx, "d", false)
		requireCode(t, err, topo.NoNode, "ListDir of a directory made a file whose last file the transaction deleted")
		entries, err := r.ListDir(ctx, "", true)
		require.NoError(t, err)
		require.Equal(t, topo.TypeFile, entry(t, entries, "d").Type, "d is a file, no longer a directory")
		require.NoError(t, c.Delete(ctx, "d", nil))
	}

	// A file with a file below it: both deleted, a sibling created.
	mustCreate(t, ctx, c, "f", "f")
	mustCreate(t, ctx, c, "f/g", "g")
	vs, err := c.Txn(ctx, topo.DeleteOp("f/g", nil), topo.DeleteOp("f", nil), topo.CreateOp("f2", []byte("f2")))
	require.NoError(t, err)
	requireNoFile(t, ctx, r, "f")
	requireNoFile(t, ctx, r, "f/g")
	requireFile(t, ctx, r, "f2", "f2", vs[2])
	_, err = r.ListDir(ctx, "f", false)
	requireCode(t, err, topo.NoNode, "ListDir of a file and directory whose files a transaction deleted")

	// A file with a file below it: the file deleted, the one below updated.
	mustCreate(t, ctx, c, "h", "h")
	vi := mustCreate(t, ctx, c, "h/i", "i")
	vs, err = c.Txn(ctx, topo.DeleteOp("h", nil), topo.UpdateOp("h/i", []byte("i2"), vi))
	require.NoError(t, err)
	requireNoFile(t, ctx, r, "h")
	requireFile(t, ctx, r, "h/i", "i2", vs[1])

	// A directory's only file deleted and a file created deeper in it.
	mustCreate(t, ctx, c, "j/k", "k")
	vs, err = c.Txn(ctx, topo.DeleteOp("j/k", nil), topo.CreateOp("j/l/m", []byte("m")))
	require.NoError(t, err)
	requireFile(t, ctx, r, "j/l/m", "m", vs[1])
	entries, err := r.ListDir(ctx, "j", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"l"}, "ListDir(j)")

	// Conditions on one path: the first that fails is named.
	pv := mustCreate(t, ctx, c, "p", "p")
	pv2 := mustUpdate(t, ctx, c, "p", "p2", pv)
	_, err = c.Txn(ctx, topo.IfAbsent("q"), topo.IfPresent("q"))
	requireTxnErr(t, err, 1, topo.NoNode, "IfAbsent then IfPresent of an absent file")
	_, err = c.Txn(ctx, topo.IfPresent("p"), topo.IfAbsent("p"))
	requireTxnErr(t, err, 1, topo.NodeExists, "IfPresent then IfAbsent of a file")
	_, err = c.Txn(ctx, topo.IfVersion("p", pv2), topo.IfVersion("p", pv))
	requireTxnErr(t, err, 1, topo.BadVersion, "IfVersion at the version then at a stale one")
	_, err = c.Txn(ctx, topo.IfVersion("p", pv2), topo.UpdateOp("p", []byte("x"), pv))
	requireTxnErr(t, err, 1, topo.BadVersion, "IfVersion then a stale UpdateOp")
	_, err = c.Txn(ctx, topo.IfAbsent("p"), topo.DeleteOp("p", nil))
	requireTxnErr(t, err, 0, topo.NodeExists, "IfAbsent of the file a DeleteOp deletes")
	requireFile(t, ctx, r, "p", "p2", pv2)

	// IfAbsent holds for a directory, a path below a file and a path in a
	// missing directory, and creates none of them.
	mustCreate(t, ctx, c, "dir9/c", "c")
	mustCreate(t, ctx, c, "file9", "f")
	vs, err = c.Txn(ctx, topo.IfAbsent("dir9"), topo.IfAbsent("file9/below"), topo.IfAbsent("none9/a/b"),
		topo.CreateOp("t10/x", []byte("x")), topo.IfAbsent("t10/x"), topo.IfAbsent("t10"),
		topo.UpdateOp("t10/y", []byte("y"), nil), topo.IfAbsent("t10/y"))
	require.NoError(t, err, "IfAbsent of a directory, of a path below a file, of a path in a missing directory, of files the transaction creates")
	requireFile(t, ctx, r, "t10/x", "x", vs[3])
	requireFile(t, ctx, r, "t10/y", "y", vs[6])
	requireFile(t, ctx, r, "file9", "f", nil)
	for _, d := range []string{"file9", "none9", "dir9/c"} {
		_, err = r.ListDir(ctx, d, false)
		requireCode(t, err, topo.NoNode, "ListDir("+d+") after IfAbsent below it")
	}

	// A failed transaction creating files in new directories leaves none.
	mustCreate(t, ctx, c, "x/keep", "k")
	for _, last := range []struct {
		op   topo.TxnOp
		code topo.ErrorCode
	}{
		{topo.IfAbsent("keep"), topo.NodeExists},
		{topo.IfVersion("p", pv), topo.BadVersion},
		{topo.DeleteOp("none", nil), topo.NoNode},
		{topo.CreateOp("keep", nil), topo.NodeExists},
	} {
		_, err = c.Txn(ctx, topo.CreateOp("x/n1/n2/f", []byte("f")), topo.UpdateOp("x/n3/f", []byte("f"), nil), last.op)
		what := fmt.Sprintf("creates in new directories, then a failing %s", last.op.Kind)
		requireTxnErr(t, err, 2, last.code, what)
		entries, err = r.ListDir(ctx, "x", false)
		require.NoError(t, err)
		requireSortedNames(t, entries, []string{"keep"}, "ListDir(x) after "+what)
	}

	// Deleting a file and the file below it, then failing: both stay.
	mustCreate(t, ctx, c, "y", "y")
	mustCreate(t, ctx, c, "y/z", "z")
	before := takeSnapshot(t, ctx, r)
	_, err = c.Txn(ctx, topo.DeleteOp("y/z", nil), topo.DeleteOp("y", nil), topo.CreateOp("keep", []byte("k")))
	requireTxnErr(t, err, 2, topo.NodeExists, "deletes of a file and the file below it, then a failing CreateOp")
	requireSameSnapshot(t, ctx, r, before, "a failed transaction deleting a file and the file below it")
	requireFile(t, ctx, r, "y", "y", nil)
	requireFile(t, ctx, r, "y/z", "z", nil)

	// Version 0.
	for _, op := range []topo.TxnOp{
		topo.IfVersion("none", topo.NumericVersion(0)),
		topo.UpdateOp("none", []byte("x"), topo.NumericVersion(0)),
		topo.DeleteOp("none", topo.NumericVersion(0)),
	} {
		_, err := c.Txn(ctx, op)
		requireTxnErr(t, err, 0, topo.NoNode, "version 0 of an absent file: "+op.Kind.String())
	}
	requireNoFile(t, ctx, r, "none")
	for _, op := range []topo.TxnOp{
		topo.IfVersion("p", topo.NumericVersion(0)),
		topo.UpdateOp("p", []byte("x"), topo.NumericVersion(0)),
		topo.DeleteOp("p", topo.NumericVersion(0)),
	} {
		_, err := c.Txn(ctx, op)
		requireTxnErr(t, err, 0, topo.BadVersion, "version 0 of a file at another version: "+op.Kind.String())
	}
	requireFile(t, ctx, r, "p", "p2", pv2)
}

// opIndex returns the index of the op of ops at path.
func opIndex(ops []topo.TxnOp, path string) int {
	for i, op := range ops {
		if op.Path == path {
			return i
		}
	}
	return -1
}

// testTxnWriteBelowDeletedFile: a transaction deleting a file (with no
// file below it) and writing a file below its name, in either order,
// succeeds: the file is gone, the one below it holds what was written,
// and the path is a directory.
func testTxnWriteBelowDeletedFile(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	for i, ops := range [][]topo.TxnOp{
		{topo.DeleteOp("a", nil), topo.CreateOp("a/b", []byte("b"))},
		{topo.CreateOp("a/b", []byte("b")), topo.DeleteOp("a", nil)},
		{topo.DeleteOp("a", nil), topo.UpdateOp("a/b", []byte("b"), nil)},
		{topo.UpdateOp("a/b/c", []byte("b"), nil), topo.DeleteOp("a", nil)},
	} {
		mustCreate(t, ctx, c, "a", "a")
		w := ops[0]
		if w.Kind == topo.TxnDelete {
			w = ops[1]
		}
		what := fmt.Sprintf("transaction %d: %s(%s), %s(%s)", i, ops[0].Kind, ops[0].Path, ops[1].Kind, ops[1].Path)
		vs, err := c.Txn(ctx, ops...)
		require.NoError(t, err, what)
		requireNoFile(t, ctx, r, "a")
		requireFile(t, ctx, r, w.Path, "b", vs[opIndex(ops, w.Path)])
		entries, err := r.ListDir(ctx, "", true)
		require.NoError(t, err)
		require.Equal(t, topo.TypeDirectory, entry(t, entries, "a").Type, what+": a is a directory")
		require.NoError(t, c.Delete(ctx, w.Path, nil))
		_, err = r.ListDir(ctx, "a", false)
		requireCode(t, err, topo.NoNode, what+": ListDir(a) once the file below it went")
	}
}
