package test

import (
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testTxnEmptiesLockedDirectory: a guarded Txn deleting every file of
// the directory its lock is on (and of a subdirectory, with files
// created elsewhere) leaves the directory listed while locked, as after
// a plain Delete, and gone once unlocked; no lock internals are listed
// as files.
func testTxnEmptiesLockedDirectory(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "p/d/f", "f")
	mustCreate(t, ctx, c, "p/d/sub/g", "g")
	mustCreate(t, ctx, c, "p/keep", "keep")
	l := mustLock(t, ctx, c, "p/d", "holder")
	ls := mustLock(t, ctx, c, "p/d/sub", "holder")
	_, err := c.Txn(ctx, topo.IfHeld(l), topo.DeleteOp("p/d/f", nil), topo.DeleteOp("p/d/sub/g", nil), topo.CreateOp("p/new", []byte("n")))
	require.NoError(t, err)
	kvs, err := r.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"p/keep", "p/new"}, kvPaths(kvs), "files after the transaction")
	require.NoError(t, ls.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
	entries, err := r.ListDir(ctx, "p", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"keep", "new"}, "ListDir(p) once the emptied directories are unlocked")
	_, err = r.ListDir(ctx, "p/d", false)
	requireCode(t, err, topo.NoNode, "ListDir of a directory a Txn emptied while it was locked, once unlocked")
	// The directory can be used again.
	mustCreate(t, ctx, c, "p/d/f", "again")
	l = mustLock(t, ctx, c, "p/d", "holder")
	require.NoError(t, l.Unlock(ctx))
}
