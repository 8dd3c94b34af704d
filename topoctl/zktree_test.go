package topoctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// requireHeld fails unless the lock l is held: a Txn guarded by it
// passes.
func requireHeld(t *testing.T, conn topo.Conn, l topo.LockDescriptor) {
	t.Helper()
	_, err := conn.Txn(t.Context(), topo.IfHeld(l), topo.IfAbsent("no-such-file"))
	require.NoError(t, err, "the lock is still held")
}

// import and copy on ZooKeeper tell zk2topo's Txn which directories they
// believe absent (from their listing), so that each batch is one multi. Where the listing cannot see what is
// there (a directory holding only a named lock's entry), the belief is wrong:
// the tree commands still do exactly what they do without it, and leave
// the lock and its directory alone.
func TestZkTreeWrongDirectoryHints(t *testing.T) {
	t.Parallel()
	addr := zktest.Start(t)
	in := manyFiles(t, 300)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const root = "/wronghints"
	conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, root)
	require.NoError(t, err)
	defer conn.Close()
	tg := target{impl: "zk2", addr: addr, root: root}

	// ks0/shards exists with nothing but a held lock's entry: no file
	// under it, so import believes it absent.
	l, err := conn.LockName(ctx, "ks0/shards", "held during import")
	require.NoError(t, err)
	assert.Contains(t, tg.ok(t, "import", in), "imported 300 files")
	mem := target{impl: "memory", addr: t.Name(), root: "/"}
	mem.ok(t, "import", in)
	mem.ok(t, "diff", "--to", tg.spec())
	requireHeld(t, conn, l)
	require.NoError(t, l.Unlock(ctx))

	// copy into a root where a directory is held the same way.
	dst := tg.withRoot(root + "-copy")
	dconn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, dst.root)
	require.NoError(t, err)
	defer dconn.Close()
	l, err = dconn.LockName(ctx, "ks3/shards/13", "held during copy")
	require.NoError(t, err)
	assert.Contains(t, mem.ok(t, "copy", "--to", dst.spec()), "copied 300 files")
	mem.ok(t, "diff", "--to", dst.spec())
	requireHeld(t, dconn, l)

	// rm -R: ks3/shards/13 holds the lock's entry too: every file goes,
	// that directory and its lock stay.
	r := dst.run(t, "", "rm", "-R", "--force", "/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 300 files under /")
	assert.Empty(t, strings.TrimSpace(dst.ok(t, "get", "-R", "--keys-only", "/")))
	requireHeld(t, dconn, l)
	des, err := dconn.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "ks3"}}, des, "only the locked directory's branch is left")
	require.NoError(t, l.Unlock(ctx))
	r = tg.run(t, "", "rm", "-R", "--force", "/")
	require.Equal(t, 0, r.code, r.stderr)
	des, err = conn.ListDir(ctx, "", false)
	require.True(t, err == nil && len(des) == 0 || topo.IsErrType(err, topo.NoNode), "%v %v", des, err)
}

// A batch the store gave up on because of concurrent writers, with
// nothing applied (zk2topo's ResourceExhausted wrapping
// ErrTxnContention), is written one file at a time, as any refused
// batch: nothing to revert, nothing lost. (Simulated on memorytopo; the
// real ZooKeeper case is zk2topo's TestTxnContention.)
func TestTreeBatchContention(t *testing.T) {
	t.Parallel()
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	mf := f.(*memorytopo.Factory)
	src := memoryTarget(t)
	dst := src.withRoot("/dst")
	for _, p := range []string{"contention/a", "contention/b", "contention/c"} {
		src.ok(t, "put", p, "v-"+p)
	}
	remove := mf.AddFault(memorytopo.Fault{Op: memorytopo.OpTxn, Prefix: "contention/",
		Err: backendkit.Wrap(topo.ResourceExhausted, "", zk2topo.ErrTxnContention)})
	defer remove()
	assert.Contains(t, src.ok(t, "copy", "--to", dst.spec()), "copied 3 files")
	src.ok(t, "diff", "--to", dst.spec())
	r := dst.run(t, "", "rm", "-R", "--force", "contention")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 3 files under /contention")
}

// rm -R on ZooKeeper never deletes a file that is a directory of the
// files it deletes but not itself under the directory removed: the file a
// (data, version 0, like a directory created empty) above a/x, and the
// file a/x/g (version 0, with data) is deleted only because it is listed
// under a/x. After rm -R a/x, a keeps its data, its other file a/y stays,
// and nothing of a/x is left (the clean-up after each batch reads a
// directory's Stat before it deletes it, and leaves a file alone).
func TestZkRmTreeKeepsFileParent(t *testing.T) {
	t.Parallel()
	addr := zktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const root = "/keepfileparent"
	conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, root)
	require.NoError(t, err)
	defer conn.Close()
	tg := target{impl: "zk2", addr: addr, root: root}
	for _, f := range [][2]string{{"a", "file a"}, {"a/y", "file y"}, {"a/x/g", "file g"},
		{"a/x/f1", "1"}, {"a/x/f2", "2"}, {"a/x/g/h1", "3"}, {"a/x/g/h2", "4"}} {
		tg.ok(t, "put", f[0], f[1])
	}
	_, v, err := conn.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, topo.NumericVersion(0), v, "a has the version of a directory created empty")

	r := tg.run(t, "", "rm", "-R", "--force", "a/x")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 5 files under /a/x")
	data, _, err := conn.Get(ctx, "a")
	require.NoError(t, err, "the file a is kept")
	assert.Equal(t, "file a", string(data))
	data, _, err = conn.Get(ctx, "a/y")
	require.NoError(t, err)
	assert.Equal(t, "file y", string(data))
	des, err := conn.ListDir(ctx, "a", false)
	require.NoError(t, err)
	assert.Equal(t, []topo.DirEntry{{Name: "y"}}, des, "nothing of a/x is left")
}
