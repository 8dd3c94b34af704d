package test

import (
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testReplacedByDirectory: a write conditioned on the version of a file
// that another Conn has since deleted, leaving files below its path (it
// is only a directory now), fails with NoNode or BadVersion and changes
// nothing, through Delete, Update and a Txn's DeleteOp, UpdateOp and
// IfVersion; also when the file had files below it and was deleted
// while they stayed. On ZooKeeper the directory is a new znode whose
// data version may be the file's again (0), which a multi cannot tell
// apart. The reverse: Create, an unconditional Update and a Txn's
// CreateOp at a path that is only a directory make it a file, keeping
// the files below; a second Create is NodeExists.
func testReplacedByDirectory(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a, b := s.conn(), s.conn()

	requireRefused := func(p string, v topo.Version, what string) {
		t.Helper()
		before := takeSnapshot(t, ctx, b)
		requireOneOf(t, a.Delete(ctx, p, v), "Delete "+what, topo.NoNode, topo.BadVersion)
		_, err := a.Update(ctx, p, []byte("x"), v)
		requireOneOf(t, err, "Update "+what, topo.NoNode, topo.BadVersion)
		for _, ops := range [][]topo.TxnOp{
			{topo.DeleteOp(p, v)},
			{topo.UpdateOp(p, []byte("x"), v)},
			{topo.IfVersion(p, v), topo.CreateOp("elsewhere", []byte("e"))},
		} {
			_, err := a.Txn(ctx, ops...)
			var te *topo.TxnError
			require.Truef(t, errors.As(err, &te), "Txn %s: want a *topo.TxnError, got %v", what, err)
			require.Equalf(t, 0, te.Index, "Txn %s: the failing op (%v)", what, err)
			requireOneOf(t, err, "Txn "+what, topo.NoNode, topo.BadVersion)
		}
		requireSameSnapshot(t, ctx, b, before, "writes "+what)
		requireNoFile(t, ctx, b, p)
	}

	// A file without children, deleted; a file created below its path.
	v := mustCreate(t, ctx, a, "r/f", "f")
	require.NoError(t, b.Delete(ctx, "r/f", nil))
	vc := mustCreate(t, ctx, b, "r/f/c", "c")
	requireRefused("r/f", v, "conditioned on a file replaced by a directory")
	requireFile(t, ctx, b, "r/f/c", "c", vc)

	// A file with files below it, deleted (its children stay).
	w := mustCreate(t, ctx, a, "r/g", "g")
	wc := mustCreate(t, ctx, a, "r/g/c", "c")
	require.NoError(t, b.Delete(ctx, "r/g", nil))
	requireRefused("r/g", w, "conditioned on a file deleted under which files stay")
	requireFile(t, ctx, b, "r/g/c", "c", wc)

	// Deleted with its children, then a file created below its path.
	x := mustCreate(t, ctx, a, "r/h", "h")
	mustCreate(t, ctx, a, "r/h/c", "c")
	require.NoError(t, b.Delete(ctx, "r/h/c", nil))
	require.NoError(t, b.Delete(ctx, "r/h", nil))
	xc := mustCreate(t, ctx, b, "r/h/d", "d")
	requireRefused("r/h", x, "conditioned on a file deleted with its children, then a directory")
	requireFile(t, ctx, b, "r/h/d", "d", xc)

	// The reverse: writes that make a directory a file.
	vf := mustCreate(t, ctx, a, "r/f", "file f")
	requireFile(t, ctx, b, "r/f", "file f", vf)
	requireFile(t, ctx, b, "r/f/c", "c", vc)
	_, err := b.Create(ctx, "r/f", []byte("again"))
	requireCode(t, err, topo.NodeExists, "Create of a file created at a directory's path")
	requireFile(t, ctx, b, "r/f", "file f", vf)
	vg := mustUpdate(t, ctx, a, "r/g", "file g", nil)
	requireFile(t, ctx, b, "r/g", "file g", vg)
	requireFile(t, ctx, b, "r/g/c", "c", wc)
	vs, err := a.Txn(ctx, topo.CreateOp("r/h", []byte("file h")))
	require.NoError(t, err, "Txn CreateOp at a directory's path")
	requireFile(t, ctx, b, "r/h", "file h", vs[0])
	requireFile(t, ctx, b, "r/h/d", "d", xc)
	_, err = b.Txn(ctx, topo.CreateOp("r/h", []byte("again")))
	requireTxnErr(t, err, 0, topo.NodeExists, "Txn CreateOp of a file created at a directory's path")
	requireFile(t, ctx, b, "r/h", "file h", vs[0])
}
