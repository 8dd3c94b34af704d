package zk2topo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// txnCtx is the context of the transaction tests.
func txnCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// requireTxnErr asserts that err is a *topo.TxnError for op index with
// code.
func requireTxnErr(t *testing.T, err error, index int, code topo.ErrorCode) {
	t.Helper()
	var te *topo.TxnError
	require.Truef(t, errors.As(err, &te), "want a *topo.TxnError, got %v", err)
	require.Equal(t, index, te.Index, "failing op index (%v)", err)
	require.ErrorIs(t, err, code)
}

// tree returns every znode under root (path, data, data version and
// child version), to check that a failed Txn wrote nothing.
func tree(t *testing.T, raw *zk.Conn, root string) string {
	t.Helper()
	return walkTree(t, raw, root, true)
}

// fileTree is tree without "locks" znodes and child versions: what stays
// the same while the server reaps empty "locks" containers.
func fileTree(t *testing.T, raw *zk.Conn, root string) string {
	t.Helper()
	return walkTree(t, raw, root, false)
}

func walkTree(t *testing.T, raw *zk.Conn, root string, all bool) string {
	t.Helper()
	var lines []string
	var walk func(zp string)
	walk = func(zp string) {
		data, st, err := raw.Get(zp)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		require.NoError(t, err)
		if !all && strings.HasSuffix(zp, "/locks") {
			return
		}
		line := fmt.Sprintf("%s %q v%d", zp, data, st.Version)
		if all {
			line += fmt.Sprintf(" c%d", st.Cversion)
		}
		lines = append(lines, line)
		children, _, err := raw.Children(zp)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		require.NoError(t, err)
		for _, ch := range children {
			walk(zp + "/" + ch)
		}
	}
	walk(root)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestTxnOps runs every op kind in successful transactions and checks the
// versions returned and what Get, List and the raw znodes show.
func TestTxnOps(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)

	// Creates with missing parents (the root too), an unconditional update
	// of an absent file (created, with parents), and IfAbsent under a
	// missing parent, in one multi.
	vs, err := c.Txn(ctx,
		topo.IfAbsent("x/y/z"),
		topo.CreateOp("a/b/c", []byte("1")),
		topo.UpdateOp("u/v", []byte("2"), nil),
		topo.CreateOp("a/b/d", []byte("3")),
	)
	require.NoError(t, err)
	require.Equal(t, []topo.Version{nil, topo.NumericVersion(0), topo.NumericVersion(0), topo.NumericVersion(0)}, vs)
	for p, want := range map[string]string{"a/b/c": "1", "u/v": "2", "a/b/d": "3"} {
		data, v, err := c.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, want, string(data))
		require.Equal(t, topo.NumericVersion(0), v)
	}
	ok, _, err := raw.Exists(root + "/x")
	require.NoError(t, err)
	require.False(t, ok, "IfAbsent must leave nothing behind")

	// Conditions and versioned writes.
	vs, err = c.Txn(ctx,
		topo.IfVersion("a/b/c", topo.NumericVersion(0)),
		topo.IfPresent("u/v"),
		topo.IfAbsent("a/b/none"),
		topo.UpdateOp("a/b/c", []byte("4"), topo.NumericVersion(0)),
		topo.UpdateOp("u/v", []byte("5"), nil),
		topo.DeleteOp("a/b/d", topo.NumericVersion(0)),
	)
	require.NoError(t, err)
	require.Equal(t, []topo.Version{nil, nil, nil, topo.NumericVersion(1), topo.NumericVersion(1), nil}, vs)
	data, v, err := c.Get(ctx, "a/b/c")
	require.NoError(t, err)
	require.Equal(t, "4", string(data))
	require.Equal(t, topo.NumericVersion(1), v)
	_, _, err = c.Get(ctx, "a/b/d")
	require.ErrorIs(t, err, topo.NoNode)

	// A condition never sees the writes of the ops before it (Txn's
	// contract: the state before the transaction); see
	// TestTxnConditionsSeeStateBefore.
	_, err = c.Txn(ctx, topo.CreateOp("n", []byte("6")), topo.IfVersion("n", topo.NumericVersion(0)), topo.IfPresent("n"))
	requireTxnErr(t, err, 1, topo.NoNode)

	// Deleting the last files removes the directories left empty, as
	// Delete does.
	_, err = c.Txn(ctx, topo.DeleteOp("a/b/c", nil), topo.DeleteOp("u/v", nil))
	require.NoError(t, err)
	for _, zp := range []string{root + "/a", root + "/u"} {
		ok, _, err := raw.Exists(zp)
		require.NoError(t, err)
		require.False(t, ok, "%s should have been removed", zp)
	}
}

// TestTxnFailures checks every failure code, the failing index, and that
// nothing is written.
func TestTxnFailures(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "f", []byte("f"))
	require.NoError(t, err)
	_, err = c.Update(ctx, "f", []byte("f1"), nil) // f at version 1
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/g", []byte("g"))
	require.NoError(t, err)

	cases := []struct {
		name string
		ops  []topo.TxnOp
		idx  int
		code topo.ErrorCode
	}{
		{"if-version absent", []topo.TxnOp{topo.CreateOp("new1", nil), topo.IfVersion("nope", topo.NumericVersion(0))}, 1, topo.NoNode},
		{"if-version bad", []topo.TxnOp{topo.CreateOp("new1", nil), topo.IfVersion("f", topo.NumericVersion(0))}, 1, topo.BadVersion},
		{"if-version huge", []topo.TxnOp{topo.IfVersion("f", topo.NumericVersion(1<<40))}, 0, topo.BadVersion},
		{"if-absent", []topo.TxnOp{topo.CreateOp("new/x", nil), topo.IfAbsent("f")}, 1, topo.NodeExists},
		{"if-present", []topo.TxnOp{topo.UpdateOp("f", []byte("x"), nil), topo.IfPresent("nope/x")}, 1, topo.NoNode},
		{"create exists", []topo.TxnOp{topo.CreateOp("new/y", nil), topo.CreateOp("d/g", nil)}, 1, topo.NodeExists},
		{"update absent", []topo.TxnOp{topo.CreateOp("new/z", nil), topo.UpdateOp("nope", nil, topo.NumericVersion(0))}, 1, topo.NoNode},
		{"update bad version", []topo.TxnOp{topo.UpdateOp("f", []byte("x"), topo.NumericVersion(0))}, 0, topo.BadVersion},
		{"delete absent", []topo.TxnOp{topo.CreateOp("new2", nil), topo.DeleteOp("nope", nil)}, 1, topo.NoNode},
		{"delete bad version", []topo.TxnOp{topo.CreateOp("new2", nil), topo.DeleteOp("f", topo.NumericVersion(0))}, 1, topo.BadVersion},
		{"first failure wins", []topo.TxnOp{topo.IfAbsent("f"), topo.IfPresent("nope")}, 0, topo.NodeExists},
		{"create under missing parent then fail", []topo.TxnOp{topo.CreateOp("p/q/r", nil), topo.UpdateOp("f", nil, topo.NumericVersion(7))}, 1, topo.BadVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, raw, root)
			_, err := c.Txn(ctx, tc.ops...)
			requireTxnErr(t, err, tc.idx, tc.code)
			require.Equal(t, before, tree(t, raw, root), "a failed Txn must write nothing")
		})
	}

	// Bad input: typed errors, nothing sent.
	_, err = c.Txn(ctx)
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.CreateOp("a", nil), topo.DeleteOp("a", nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.CreateOp("d/locks/x", nil))
	requireTxnErr(t, err, 0, topo.InvalidPath)
	_, err = c.Txn(ctx, topo.IfHeld(foreignFence{}))
	requireTxnErr(t, err, 0, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.UpdateOp("f", nil, topo.NumericVersion(-3)))
	requireTxnErr(t, err, 0, topo.InvalidArgument)

	cc := openConn(t, []string{testServer}, root)
	cc.Close()
	_, err = cc.Txn(ctx, topo.CreateOp("a", nil))
	require.ErrorIs(t, err, topo.Closed)
	_, err = cc.Txn(ctx, topo.CreateOp("a/../b", nil))
	requireTxnErr(t, err, 0, topo.InvalidPath) // bad input first, closed last
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Txn(cctx, topo.CreateOp("a/../b", nil))
	require.ErrorIs(t, err, topo.Interrupted) // the context first
}

// foreignFence is a Fence no backend issued.
type foreignFence struct{}

func (foreignFence) Token() int64                { return 1 }
func (foreignFence) Done() <-chan struct{}       { return nil }
func (foreignFence) Check(context.Context) error { return nil }

// TestTxnFilesAndDirectories checks that the txn's writes follow the
// Conn methods on znodes that are files and directories at once.
func TestTxnFilesAndDirectories(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "dir/f", []byte("x")) // "dir" is only a directory, at version 0
	require.NoError(t, err)

	before := tree(t, raw, root)
	_, err = c.Txn(ctx, topo.IfPresent("dir"))
	requireTxnErr(t, err, 0, topo.NoNode)
	_, err = c.Txn(ctx, topo.IfVersion("dir", topo.NumericVersion(0)))
	requireTxnErr(t, err, 0, topo.NoNode)
	_, err = c.Txn(ctx, topo.UpdateOp("dir", []byte("y"), topo.NumericVersion(0)))
	requireTxnErr(t, err, 0, topo.NoNode)
	_, err = c.Txn(ctx, topo.DeleteOp("dir", nil))
	requireTxnErr(t, err, 0, topo.NoNode)
	_, err = c.Txn(ctx, topo.DeleteOp("dir", topo.NumericVersion(0)))
	requireTxnErr(t, err, 0, topo.NoNode)
	require.Equal(t, before, tree(t, raw, root))
	// No file is at a directory.
	_, err = c.Txn(ctx, topo.IfAbsent("dir"))
	require.NoError(t, err)

	// CreateOp over a directory turns it into the file (as Create).
	vs, err := c.Txn(ctx, topo.CreateOp("dir", []byte("d")))
	require.NoError(t, err)
	require.Equal(t, topo.NumericVersion(1), vs[0])
	data, v, err := c.Get(ctx, "dir")
	require.NoError(t, err)
	require.Equal(t, "d", string(data))
	require.Equal(t, topo.NumericVersion(1), v)
	_, err = c.Txn(ctx, topo.CreateOp("dir", []byte("again")))
	requireTxnErr(t, err, 0, topo.NodeExists)

	// DeleteOp of a file with files below it empties it (as Delete).
	_, err = c.Txn(ctx, topo.DeleteOp("dir", topo.NumericVersion(1)))
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "dir")
	require.ErrorIs(t, err, topo.NoNode)
	data, _, err = c.Get(ctx, "dir/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))

	// UpdateOp without version over a directory makes it the file (as
	// Update).
	vs, err = c.Txn(ctx, topo.UpdateOp("dir", []byte("u"), nil))
	require.NoError(t, err)
	data, v, err = c.Get(ctx, "dir")
	require.NoError(t, err)
	require.Equal(t, "u", string(data))
	require.Equal(t, vs[0], v)
}

// TestTxnTooLarge checks the request-size limit: refused before anything
// is sent at the default (ZooKeeper's default jute.maxbuffer), accepted
// with Options.MaxTxnBytes raised to what the test server takes.
func TestTxnTooLarge(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	big := bytes.Repeat([]byte("x"), 400*1024)
	ops := []topo.TxnOp{topo.CreateOp("a", big), topo.CreateOp("b", big), topo.CreateOp("c", big)}
	_, err := c.Txn(ctx, ops...)
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.Contains(t, err.Error(), "too large")
	ok, _, err := raw.Exists(root)
	require.NoError(t, err)
	require.False(t, ok, "nothing may be written")

	// With the limit raised to the test server's jute.maxbuffer (4 MiB)
	// they fit.
	c2, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, MaxTxnBytes: 4 << 20}, root)
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Txn(ctx, ops...)
	require.NoError(t, err)
	// Above the client library's buffer whatever the option says.
	_, err = c2.Txn(ctx, topo.UpdateOp("a", big, nil), topo.UpdateOp("b", big, nil), topo.UpdateOp("c", big, nil), topo.UpdateOp("d", big, nil))
	require.ErrorIs(t, err, topo.InvalidArgument)
}

// TestTxnWatchSeesWrites checks that a Watch fires for a txn's update.
func TestTxnWatchSeesWrites(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "w", []byte("1"))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, ch, err := c.Watch(wctx, "w")
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfPresent("w"), topo.UpdateOp("w", []byte("2"), topo.NumericVersion(0)))
	require.NoError(t, err)
	select {
	case wd := <-ch:
		require.NoError(t, wd.Err)
		require.Equal(t, "2", string(wd.Contents))
	case <-time.After(hangGuard):
		t.Fatal("no watch event for the txn's write")
	}
}

// TestTxnTransfersKeepSum runs concurrent transfers between counters, each
// a Txn of two compare-and-set updates (retried on BadVersion), from
// several Conns: the sum is preserved and every counter's version counts
// its updates.
func TestTxnTransfersKeepSum(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	const counters, workers, transfers = 3, 4, 15
	conns := make([]*Conn, workers)
	for i := range conns {
		conns[i] = openConn(t, []string{testServer}, root)
	}
	for k := range counters {
		_, err := conns[0].Create(ctx, fmt.Sprintf("c/%d", k), []byte("100"))
		require.NoError(t, err)
	}
	get := func(c *Conn, k int) (int, topo.Version, error) {
		data, v, err := c.Get(ctx, fmt.Sprintf("c/%d", k))
		if err != nil {
			return 0, nil, err
		}
		var n int
		_, err = fmt.Sscan(string(data), &n)
		return n, v, err
	}
	read := func(c *Conn, k int) (int, topo.Version) {
		n, v, err := get(c, k)
		require.NoError(t, err)
		return n, v
	}
	done := make(chan int, workers)
	for w := range workers {
		go func() {
			c := conns[w]
			applied := 0
			for i := 0; applied < transfers; i++ {
				from, to := (w+i)%counters, (w+i+1)%counters
				a, va, err := get(c, from)
				if err != nil {
					t.Error(err)
					break
				}
				b, vb, err := get(c, to)
				if err != nil {
					t.Error(err)
					break
				}
				_, err = c.Txn(ctx,
					topo.UpdateOp(fmt.Sprintf("c/%d", from), []byte(fmt.Sprint(a-1)), va),
					topo.UpdateOp(fmt.Sprintf("c/%d", to), []byte(fmt.Sprint(b+1)), vb))
				if err == nil {
					applied++
					continue
				}
				if !topo.IsErrType(err, topo.BadVersion) {
					t.Error(err)
					break
				}
			}
			done <- applied
		}()
	}
	total := 0
	for range workers {
		total += <-done
	}
	require.Equal(t, workers*transfers, total)
	sum, versions := 0, 0
	for k := range counters {
		n, v := read(conns[0], k)
		sum += n
		versions += int(v.(topo.NumericVersion))
	}
	require.Equal(t, 100*counters, sum)
	require.Equal(t, 2*workers*transfers, versions, "each transfer writes two counters once")
}

// TestTxnIfAbsentProbe checks what IfAbsent leaves: no znode, the parent's
// child version raised by two (the probe's create and delete), and a
// WatchRecursive that reports nothing for it.
func TestTxnIfAbsentProbe(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, events, err := c.WatchRecursive(wctx, "d/")
	require.NoError(t, err)
	_, before, err := raw.Exists(root + "/d")
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfAbsent("d/g"))
	require.NoError(t, err)
	ok, _, err := raw.Exists(root + "/d/g")
	require.NoError(t, err)
	require.False(t, ok)
	_, after, err := raw.Exists(root + "/d")
	require.NoError(t, err)
	require.Equal(t, before.Cversion+2, after.Cversion)
	// The next event is the update below, not the probe.
	_, err = c.Update(ctx, "d/f", []byte("2"), nil)
	require.NoError(t, err)
	select {
	case ev := <-events:
		require.NoError(t, ev.Err)
		require.Equal(t, "d/f", ev.Path)
		require.Equal(t, "2", string(ev.Contents))
	case <-time.After(hangGuard):
		t.Fatal("no watch event")
	}
}

// TestTxnManyAbsentFiles is one Txn of 300 unconditional updates of absent
// files in a missing directory: it used to learn of one absent file per
// multi and give up after ten (Unavailable); it now reads every op's Stat
// after the first failure and succeeds with the second multi.
func TestTxnManyAbsentFiles(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	var ops []topo.TxnOp
	for i := range 300 {
		ops = append(ops, topo.UpdateOp(fmt.Sprintf("many/f%03d", i), []byte("v"), nil))
	}
	vs, err := c.Txn(ctx, ops...)
	require.NoError(t, err)
	kvs, err := c.List(ctx, "many/")
	require.NoError(t, err)
	require.Len(t, kvs, 300)
	for i, kv := range kvs {
		require.Equal(t, vs[i], kv.Version)
	}
}

// TestTxnConditionsSeeStateBefore checks Txn's contract that every
// condition is evaluated against the state before the transaction, not
// after the writes of earlier ops (a ZooKeeper multi runs its requests in
// order), and that the first failing op in the caller's order is named
// when a write and a later condition both fail.
func TestTxnConditionsSeeStateBefore(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "f", []byte("f")) // f at version 0
	require.NoError(t, err)
	_, err = c.Create(ctx, "q", []byte("q"))
	require.NoError(t, err)

	fails := []struct {
		name string
		ops  []topo.TxnOp
		idx  int
		code topo.ErrorCode
	}{
		{"if-present after its create", []topo.TxnOp{topo.CreateOp("p", nil), topo.IfPresent("p")}, 1, topo.NoNode},
		{"if-version after its create", []topo.TxnOp{topo.CreateOp("p", nil), topo.IfVersion("p", topo.NumericVersion(0))}, 1, topo.NoNode},
		{"if-absent after its delete", []topo.TxnOp{topo.DeleteOp("q", nil), topo.IfAbsent("q")}, 1, topo.NodeExists},
		{"if-version after its update", []topo.TxnOp{topo.UpdateOp("f", []byte("x"), nil), topo.IfVersion("f", topo.NumericVersion(1))}, 1, topo.BadVersion},
		{"write fails before a failing condition", []topo.TxnOp{topo.UpdateOp("nope", nil, topo.NumericVersion(0)), topo.IfVersion("f", topo.NumericVersion(5))}, 0, topo.NoNode},
		{"write passes before a failing condition", []topo.TxnOp{topo.CreateOp("p2", nil), topo.IfVersion("f", topo.NumericVersion(5))}, 1, topo.BadVersion},
		{"two writes and a condition fail", []topo.TxnOp{topo.CreateOp("p3", nil), topo.CreateOp("q", nil), topo.DeleteOp("nope", nil), topo.IfPresent("nope2")}, 1, topo.NodeExists},
	}
	for _, tc := range fails {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, raw, root)
			_, err := c.Txn(ctx, tc.ops...)
			requireTxnErr(t, err, tc.idx, tc.code)
			require.Equal(t, before, tree(t, raw, root), "a failed Txn must write nothing")
		})
	}

	// Conditions that hold before the transaction hold, whatever the
	// transaction's writes do to their paths.
	_, err = c.Txn(ctx, topo.DeleteOp("q", nil), topo.IfPresent("q"))
	require.NoError(t, err, "[DeleteOp(q), IfPresent(q)] on a present q")
	_, _, err = c.Get(ctx, "q")
	require.ErrorIs(t, err, topo.NoNode)
	_, err = c.Txn(ctx, topo.CreateOp("r", []byte("r")), topo.IfAbsent("r"))
	require.NoError(t, err, "[CreateOp(r), IfAbsent(r)] on an absent r")
	vs, err := c.Txn(ctx, topo.UpdateOp("f", []byte("x"), nil), topo.IfVersion("f", topo.NumericVersion(0)))
	require.NoError(t, err, "[UpdateOp(f), IfVersion(f, its version before)]")
	require.Equal(t, topo.NumericVersion(1), vs[0])
}
