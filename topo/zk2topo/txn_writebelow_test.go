package zk2topo

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestTxnWriteBelowDeletedFile: a Txn deleting a file without files below
// it and writing a file below its name, in either order and one or two
// levels down, empties the file's znode instead of deleting it (the write
// below needs it as its parent): the znode stays as a directory (no data,
// the new file below), in one multi after one round of Stat reads (the
// directories between the two known missing, as the file had no children,
// and the Stats of the emptied znode and its "locks" child pipelined
// behind the multi, see unfiledPaths). It used to delete the
// znode in every multi, which failed at the write below (or at the delete,
// after it), and the Txn gave up after ten multis with ResourceExhausted
// (ErrTxnContention), although no one else wrote.
func TestTxnWriteBelowDeletedFile(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	cases := []struct {
		name           string
		ops            func(p string) []topo.TxnOp
		multis, exists int
		want           string // the file written below p, holding "b"
	}{
		{"delete then create", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.DeleteOp(p, nil), topo.CreateOp(p+"/b", []byte("b"))}
		}, 1, 3, "b"},
		{"create then delete", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.CreateOp(p+"/b", []byte("b")), topo.DeleteOp(p, nil)}
		}, 1, 3, "b"},
		{"delete at its version then create", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.DeleteOp(p, topo.NumericVersion(0)), topo.CreateOp(p+"/b", []byte("b"))}
		}, 1, 3, "b"},
		{"delete then update", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.DeleteOp(p, nil), topo.UpdateOp(p+"/b", []byte("b"), nil)}
		}, 1, 4, "b"},
		{"update then delete", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.UpdateOp(p+"/b", []byte("b"), nil), topo.DeleteOp(p, nil)}
		}, 1, 4, "b"},
		{"delete then create deeper", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.DeleteOp(p, nil), topo.CreateOp(p+"/b/c", []byte("b"))}
		}, 1, 3, "b/c"},
		{"update deeper then delete", func(p string) []topo.TxnOp {
			return []topo.TxnOp{topo.UpdateOp(p+"/b/c", []byte("b"), nil), topo.DeleteOp(p, nil)}
		}, 1, 4, "b/c"},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fmt.Sprintf("d%d/a", k)
			_, err := c.Create(ctx, p, []byte("a"))
			require.NoError(t, err)
			oc.reset()
			vs, err := c.Txn(ctx, tc.ops(p)...)
			require.NoError(t, err)
			require.Equal(t, tc.multis, oc.count(opcodeMulti), "multis")
			// The DeleteOp's Stat comes with its children's names (kindOn).
			require.Equal(t, tc.exists, oc.count(opcodeExists)+oc.count(opcodeGetChildren2), "Stat reads")
			for i, op := range tc.ops(p) {
				if op.Kind != topo.TxnDelete {
					require.Equal(t, topo.NumericVersion(0), vs[i])
				}
			}
			_, _, err = c.Get(ctx, p)
			require.ErrorIs(t, err, topo.NoNode, "the deleted file")
			data, _, err := c.Get(ctx, p+"/"+tc.want)
			require.NoError(t, err)
			require.Equal(t, "b", string(data))
			entries, err := c.ListDir(ctx, fmt.Sprintf("d%d", k), true)
			require.NoError(t, err)
			require.Len(t, entries, 1)
			require.Equal(t, topo.TypeDirectory, entries[0].Type, "a is a directory")
			// The layout: the emptied znode, the directories between, the
			// file below.
			want := fmt.Sprintf("%s/%s \"\" v1", root, p)
			if tc.want == "b/c" {
				want += fmt.Sprintf("\n%s/%s/b \"\" v0", root, p)
			}
			want += fmt.Sprintf("\n%s/%s/%s \"b\" v0", root, p, tc.want)
			require.Equal(t, want, fileTree(t, raw, root+"/"+p), "znodes")
		})
	}
	t.Run("a directory between created by another write", func(t *testing.T) {
		_, err := c.Create(ctx, "e/a", []byte("a"))
		require.NoError(t, err)
		oc.reset()
		_, err = c.Txn(ctx, topo.CreateOp("e/a/b/c", []byte("c")), topo.DeleteOp("e/a", nil), topo.CreateOp("e/a/b", []byte("b")))
		require.NoError(t, err)
		require.Equal(t, 1, oc.count(opcodeMulti), "multis")
		require.Equal(t, fmt.Sprintf("%[1]s/e/a \"\" v1\n%[1]s/e/a/b \"b\" v0\n%[1]s/e/a/b/c \"c\" v0", root),
			fileTree(t, raw, root+"/e/a"), "znodes")
	})
	t.Run("a directory between created meanwhile", func(t *testing.T) {
		// Another client creates a/b between the Stat reads and the
		// multi, which then fails at a/b's create: the Txn reads the
		// ancestors and succeeds, keeping that a/b.
		_, err := c.Create(ctx, "f/a", []byte("a"))
		require.NoError(t, err)
		oc.reset()
		oc.setBefore(func(op int32) {
			if op == opcodeMulti {
				oc.setBefore(nil)
				_, err := raw.Create(root+"/f/a/b", nil, 0, zk.WorldACL(zk.PermAll))
				assert.NoError(t, err) // on the client's send goroutine
			}
		})
		_, err = c.Txn(ctx, topo.DeleteOp("f/a", nil), topo.CreateOp("f/a/b/c", []byte("c")))
		require.NoError(t, err)
		require.Equal(t, 2, oc.count(opcodeMulti), "multis")
		require.Equal(t, fmt.Sprintf("%[1]s/f/a \"\" v1\n%[1]s/f/a/b \"\" v0\n%[1]s/f/a/b/c \"c\" v0", root),
			fileTree(t, raw, root+"/f/a"), "znodes")
	})
}

// TestTxnWriteBelowDeletedFileFails: a Txn deleting what is not a file
// there (a directory, nothing) or a file at another version, and writing
// below it, fails at the DeleteOp as alone, in either order, and writes
// nothing.
func TestTxnWriteBelowDeletedFileFails(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openCounted(t, &opCounter{}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "dir/x", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "file", []byte("f"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		p    string
		v    topo.Version
		code topo.ErrorCode
	}{
		{"a directory", "dir", nil, topo.NoNode},
		{"nothing", "none", nil, topo.NoNode},
		{"nothing in a missing directory", "none/deeper", nil, topo.NoNode},
		{"a file at another version", "file", topo.NumericVersion(3), topo.BadVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, raw, root)
			del, create := topo.DeleteOp(tc.p, tc.v), topo.CreateOp(tc.p+"/b/c", []byte("b"))
			_, err := c.Txn(ctx, del, create)
			requireTxnErr(t, err, 0, tc.code)
			require.Equal(t, before, tree(t, raw, root), "nothing written")
			_, err = c.Txn(ctx, create, del)
			requireTxnErr(t, err, 1, tc.code)
			require.Equal(t, before, tree(t, raw, root), "nothing written")
			_, _, err = raw.Get(root + "/" + tc.p + "/b")
			require.ErrorIs(t, err, zk.ErrNoNode)
		})
	}
}
