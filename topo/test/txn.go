package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The Txn subtests: Conn.Txn's ops, failures, bad input and atomicity.

// requireTxnVersions fails t unless vs has one entry per op, a non-nil
// version for each CreateOp and UpdateOp, and nil for the others.
func requireTxnVersions(t *testing.T, ops []topo.TxnOp, vs []topo.Version, what string) {
	t.Helper()
	require.Lenf(t, vs, len(ops), "%s: Txn returns one version per op", what)
	for i, op := range ops {
		if op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate {
			require.NotNilf(t, vs[i], "%s: the version of op %d (%s)", what, i, op.Kind)
		} else {
			require.Nilf(t, vs[i], "%s: op %d (%s) writes no file, so its version is nil", what, i, op.Kind)
		}
	}
}

// testTxnOps: a transaction of every op kind, all holding, applies every
// write: each returned version is the one Get then reports, missing
// parents are created, an unconditional UpdateOp creates an absent file,
// List sees the new files and no deleted one, and Watch and
// WatchRecursive report the writes as they report plain writes.
func testTxnOps(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, w := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	va := mustCreate(t, ctx, c, "tx/a", "a0")
	vb := mustCreate(t, ctx, c, "tx/b", "b0")
	mustCreate(t, ctx, c, "tx/del", "del")
	vdv := mustCreate(t, ctx, c, "tx/delv", "delv")
	mustCreate(t, ctx, c, "tx/keep", "keep")
	l := mustLock(t, ctx, c, "d", "holder")
	p := participate(t, c, "elec", "leader")
	_, err := p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)

	_, chA := mustWatch(t, ctx, w, "tx/a", "Watch(tx/a)")
	_, chDel := mustWatch(t, ctx, w, "tx/del", "Watch(tx/del)")
	_, chRec := mustWatchRecursive(t, ctx, w, "tx/", "WatchRecursive(tx/)")

	ops := []topo.TxnOp{
		topo.IfVersion("tx/keep", mustVersion(t, ctx, c, "tx/keep")),
		topo.IfAbsent("tx/none"),
		topo.IfPresent("/tx/keep"),
		topo.IfHeld(l),
		topo.IfHeld(term),
		topo.CreateOp("tx/new/deep/file", []byte("created")),
		topo.UpdateOp("tx/a", []byte("a1"), nil),
		topo.UpdateOp("tx/b", []byte("b1"), vb),
		topo.UpdateOp("tx/absent", []byte("made by update"), nil),
		topo.DeleteOp("tx/del", nil),
		topo.DeleteOp("tx/delv", vdv),
	}
	vs, err := c.Txn(ctx, ops...)
	require.NoError(t, err, "a transaction whose conditions all hold")
	requireTxnVersions(t, ops, vs, "a transaction of every op kind")
	require.NotEqual(t, va.String(), vs[6].String(), "UpdateOp returned the old version")
	require.NotEqual(t, vb.String(), vs[7].String(), "a compare-and-set UpdateOp returned the old version")

	requireFile(t, ctx, w, "tx/new/deep/file", "created", vs[5])
	requireFile(t, ctx, w, "tx/a", "a1", vs[6])
	requireFile(t, ctx, w, "tx/b", "b1", vs[7])
	requireFile(t, ctx, w, "tx/absent", "made by update", vs[8])
	requireNoFile(t, ctx, w, "tx/del")
	requireNoFile(t, ctx, w, "tx/delv")
	requireFile(t, ctx, w, "tx/keep", "keep", nil)
	entries, err := w.ListDir(ctx, "tx/new", false)
	require.NoError(t, err, "ListDir of a parent directory CreateOp created")
	requireSortedNames(t, entries, []string{"deep"}, "ListDir(tx/new)")

	kvs, err := w.List(ctx, "tx/")
	require.NoError(t, err)
	require.Equal(t, []string{"tx/a", "tx/absent", "tx/b", "tx/keep", "tx/new/deep/file"}, kvPaths(kvs), "List after the transaction")
	for _, kv := range kvs {
		_, v, err := w.Get(ctx, kv.Path)
		require.NoError(t, err)
		require.Equalf(t, v.String(), kv.Version.String(), "List's version of %q", kv.Path)
	}

	wd := waitWatchValue(t, chA, "a1", "Watch(tx/a) after the transaction")
	require.Equal(t, vs[6].String(), wd.Version.String(), "the version of the watch event of a transaction's write")
	waitWatchErr(t, chDel, topo.NoNode, "Watch(tx/del) after the transaction deleted it")
	seen := map[string]bool{}
	waitRecursive(t, chRec, "tx/", "WatchRecursive(tx/) after the transaction", func(wd *topo.WatchDataRecursive) bool {
		switch {
		case wd.Path == "tx/new/deep/file" && wd.Err == nil && string(wd.Contents) == "created":
			require.Equal(t, vs[5].String(), wd.Version.String())
			seen[wd.Path] = true
		case wd.Path == "tx/absent" && wd.Err == nil:
			seen[wd.Path] = true
		case wd.Path == "tx/delv" && topo.IsErrType(wd.Err, topo.NoNode):
			seen[wd.Path] = true
		}
		return len(seen) == 3
	})

	// The versions a transaction returns chain into plain calls and back.
	nv := mustUpdate(t, ctx, c, "tx/a", "a2", vs[6])
	vs2, err := c.Txn(ctx, topo.UpdateOp("tx/a", []byte("a3"), nv), topo.DeleteOp("tx/b", vs[7]))
	require.NoError(t, err)
	requireFile(t, ctx, w, "tx/a", "a3", vs2[0])
	requireNoFile(t, ctx, w, "tx/b")
	require.NoError(t, c.Delete(ctx, "tx/a", vs2[0]))

	// A transaction of conditions only writes nothing.
	before := takeSnapshot(t, ctx, w)
	vs3, err := c.Txn(ctx, topo.IfPresent("tx/keep"), topo.IfAbsent("tx/a"), topo.IfHeld(l))
	require.NoError(t, err)
	require.Equal(t, []topo.Version{nil, nil, nil}, vs3)
	requireSameSnapshot(t, ctx, w, before, "a transaction of conditions only")
}

// mustVersion returns the current version of path.
func mustVersion(t *testing.T, ctx context.Context, c topo.Conn, path string) topo.Version {
	t.Helper()
	_, v, err := c.Get(ctx, path)
	require.NoErrorf(t, err, "Get(%q)", path)
	return v
}

// testTxnFailures: for every condition and every write's implied
// condition, a transaction in which that op fails (after ops that hold and
// writes, before more writes) fails with a *TxnError naming it and the
// right code, and writes nothing at all; with several failing ops, the
// first is named.
func testTxnFailures(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, r := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	va := mustCreate(t, ctx, c, "tx/a", "a0")
	stale := va
	va = mustUpdate(t, ctx, c, "tx/a", "a1", va)
	mustCreate(t, ctx, c, "tx/b", "b0")
	mustCreate(t, ctx, c, "tx/dir/child", "child")
	released, err := c.TryLock(ctx, "d", "released")
	require.NoError(t, err)
	require.NoError(t, released.Unlock(ctx))
	p := participate(t, c, "elec", "stopped")
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	stoppedTerm, err := p.Term()
	require.NoError(t, err)
	p.Stop()

	failing := []struct {
		name string
		op   topo.TxnOp
		code topo.ErrorCode
	}{
		{"IfVersion of an absent file", topo.IfVersion("tx/none", va), topo.NoNode},
		{"IfVersion of a directory", topo.IfVersion("tx/dir", va), topo.NoNode},
		{"IfVersion with a stale version", topo.IfVersion("tx/a", stale), topo.BadVersion},
		{"IfAbsent of a file", topo.IfAbsent("tx/a"), topo.NodeExists},
		{"IfPresent of an absent file", topo.IfPresent("tx/none"), topo.NoNode},
		{"IfPresent of a directory", topo.IfPresent("tx/dir"), topo.NoNode},
		{"IfHeld of a released lock", topo.IfHeld(released), topo.LockLost},
		{"IfHeld of a stopped term", topo.IfHeld(stoppedTerm), topo.LockLost},
		{"CreateOp of an existing file", topo.CreateOp("tx/a", []byte("x")), topo.NodeExists},
		{"UpdateOp with a version of an absent file", topo.UpdateOp("tx/none", []byte("x"), va), topo.NoNode},
		{"UpdateOp with a version of a directory", topo.UpdateOp("tx/dir", []byte("x"), va), topo.NoNode},
		{"UpdateOp with a stale version", topo.UpdateOp("tx/a", []byte("x"), stale), topo.BadVersion},
		{"DeleteOp of an absent file", topo.DeleteOp("tx/none", nil), topo.NoNode},
		{"DeleteOp of a directory", topo.DeleteOp("tx/dir", nil), topo.NoNode},
		{"DeleteOp with a stale version", topo.DeleteOp("tx/a", stale), topo.BadVersion},
	}
	// Ops that hold and write, placed around the failing one; none of
	// them touches tx/a, tx/none or tx/dir.
	holding := []topo.TxnOp{
		topo.IfPresent("tx/b"),
		topo.UpdateOp("tx/b", []byte("written by a failed transaction"), nil),
		topo.CreateOp("tx/created", []byte("written by a failed transaction")),
		topo.UpdateOp("tx/dir/child", []byte("written by a failed transaction"), nil),
		topo.CreateOp("tx/new/deep/file", []byte("written by a failed transaction")),
	}
	before := takeSnapshot(t, ctx, r)
	for _, f := range failing {
		for pos := 0; pos <= len(holding); pos += 2 {
			ops := append(append(append([]topo.TxnOp{}, holding[:pos]...), f.op), holding[pos:]...)
			vs, err := c.Txn(ctx, ops...)
			what := fmt.Sprintf("%s at op %d of %d", f.name, pos, len(ops))
			require.Nilf(t, vs, "%s: a failed Txn returns no versions", what)
			requireTxnErr(t, err, pos, f.code, what)
			requireSameSnapshot(t, ctx, r, before, what)
		}
	}
	requireNoFile(t, ctx, r, "tx/created")
	requireNoFile(t, ctx, r, "tx/new/deep/file")
	requireFile(t, ctx, r, "tx/a", "a1", va)
	requireFile(t, ctx, r, "tx/b", "b0", nil)

	// Several failing ops: the first is named (also when a later one is an
	// IfHeld of a claim its holder ended, which a backend knows is lost
	// without asking the store).
	for i := range failing {
		j := (i + 5) % len(failing)
		if failing[i].op.Path == failing[j].op.Path && !failing[i].op.Kind.IsCondition() && !failing[j].op.Kind.IsCondition() {
			continue // two writes of one path: bad input, not a failure
		}
		ops := []topo.TxnOp{holding[0], failing[i].op, holding[2], failing[j].op, holding[4]}
		_, err := c.Txn(ctx, ops...)
		requireTxnErr(t, err, 1, failing[i].code, fmt.Sprintf("%s then %s", failing[i].name, failing[j].name))
	}
	requireSameSnapshot(t, ctx, r, before, "transactions with several failing ops")

	// The last op failing, after every other write.
	_, err = c.Txn(ctx, append(append([]topo.TxnOp{}, holding...), topo.IfVersion("tx/a", stale))...)
	requireTxnErr(t, err, len(holding), topo.BadVersion, "a stale IfVersion last")
	requireSameSnapshot(t, ctx, r, before, "a transaction whose last op fails")

	// The same transaction once its conditions hold succeeds, and
	// writes everything.
	vs, err := c.Txn(ctx, append(append([]topo.TxnOp{}, holding...), topo.IfVersion("tx/a", va))...)
	require.NoError(t, err)
	requireFile(t, ctx, r, "tx/created", "written by a failed transaction", vs[2])
	requireFile(t, ctx, r, "tx/new/deep/file", "written by a failed transaction", vs[4])
}

// testTxnFileAndDirectory: a transaction's writes have the semantics of
// the Conn methods of the same name on paths that are directories: a
// CreateOp or UpdateOp of a path that is only a directory makes it a file
// and a directory at once, and a DeleteOp of a file that is also a
// directory leaves what is below it.
func testTxnFileAndDirectory(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	mustCreate(t, ctx, c, "p/c", "child")
	mustCreate(t, ctx, c, "q/c", "child")
	vs, err := c.Txn(ctx, topo.CreateOp("p", []byte("file p")), topo.UpdateOp("q", []byte("file q"), nil))
	require.NoError(t, err, "CreateOp and UpdateOp of paths that are directories")
	requireFile(t, ctx, c, "p", "file p", vs[0])
	requireFile(t, ctx, c, "q", "file q", vs[1])
	requireFile(t, ctx, c, "p/c", "child", nil)
	entries, err := c.ListDir(ctx, "p", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"c"}, "ListDir of a path that is a file and a directory")

	_, err = c.Txn(ctx, topo.DeleteOp("p", vs[0]), topo.DeleteOp("q/c", nil))
	require.NoError(t, err)
	requireNoFile(t, ctx, c, "p")
	requireNoFile(t, ctx, c, "q/c")
	requireFile(t, ctx, c, "p/c", "child", nil)
	requireFile(t, ctx, c, "q", "file q", vs[1])
	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"p/c", "q"}, kvPaths(kvs))
}

// foreignFence is a Fence no backend issued.
type foreignFence struct{}

func (foreignFence) Token() int64                    { return 1 }
func (foreignFence) Done() <-chan struct{}           { return nil }
func (foreignFence) Check(ctx context.Context) error { return nil }

// testTxnBadInput: malformed transactions are refused before anything is
// sent, with typed errors, writing nothing: an empty op list and a
// cancelled or expired context (*Error); bad and reserved paths, oversized
// contents, bad versions, a missing IfVersion version, two writes of one
// path, a nil Fence, a Fence of another backend (a *TxnError naming the
// op); a transaction too large for the store is either applied whole or
// refused with InvalidArgument; after Close, Closed.
func testTxnBadInput(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	va := mustCreate(t, ctx, c, "tx/a", "a0")
	l := mustLock(t, ctx, c, "d", "holder")
	before := takeSnapshot(t, ctx, r)
	ok := topo.CreateOp("tx/new", []byte("x"))

	_, err := c.Txn(ctx)
	requireCode(t, err, topo.InvalidArgument, "an empty transaction")
	_, err = c.Txn(ctx, []topo.TxnOp{}...)
	requireCode(t, err, topo.InvalidArgument, "an empty op list")
	_, err = c.Txn(cancelledCtx(t), ok)
	requireCode(t, err, topo.Interrupted, "Txn with a cancelled context")
	_, err = c.Txn(expiredCtx(t), ok)
	requireCode(t, err, topo.Timeout, "Txn with an expired context")

	big := make([]byte, topo.MaxValueSize+1)
	bad := []struct {
		name string
		op   topo.TxnOp
		code topo.ErrorCode
	}{
		{"an empty path", topo.CreateOp("", []byte("x")), topo.InvalidPath},
		{"a double slash", topo.UpdateOp("tx//b", []byte("x"), nil), topo.InvalidPath},
		{"a dot-dot segment", topo.DeleteOp("tx/../a", nil), topo.InvalidPath},
		{"a trailing slash", topo.IfPresent("tx/a/"), topo.InvalidPath},
		{"a NUL byte", topo.IfAbsent("tx/a\x00b"), topo.InvalidPath},
		{"a reserved locks segment", topo.CreateOp("d/locks/x", []byte("x")), topo.InvalidPath},
		{"a reserved Lock segment", topo.UpdateOp("svc/Lock", []byte("x"), nil), topo.InvalidPath},
		{"a reserved elections root", topo.DeleteOp("elections/x", nil), topo.InvalidPath},
		{"a condition on a reserved path", topo.IfAbsent("d/locks/y"), topo.InvalidPath},
		{"oversized contents", topo.UpdateOp("tx/big", big, nil), topo.InvalidArgument},
		{"oversized contents of a CreateOp", topo.CreateOp("tx/big", big), topo.InvalidArgument},
		{"IfVersion without a version", topo.IfVersion("tx/a", nil), topo.InvalidArgument},
		{"IfVersion with a foreign version", topo.IfVersion("tx/a", foreignVersion{}), topo.InvalidArgument},
		{"UpdateOp with a foreign version", topo.UpdateOp("tx/a", []byte("x"), foreignVersion{}), topo.InvalidArgument},
		{"DeleteOp with a negative version", topo.DeleteOp("tx/a", topo.NumericVersion(-5)), topo.InvalidArgument},
		{"IfHeld with a nil Fence", topo.IfHeld(nil), topo.InvalidArgument},
		{"IfHeld with a Fence of another backend", topo.IfHeld(foreignFence{}), topo.InvalidArgument},
		{"an unknown op kind", topo.TxnOp{Kind: 99, Path: "tx/a"}, topo.InvalidArgument},
	}
	for _, b := range bad {
		for _, pos := range []int{0, 2} {
			ops := []topo.TxnOp{topo.IfPresent("tx/a"), ok}
			ops = append(append(append([]topo.TxnOp{}, ops[:pos]...), b.op), ops[pos:]...)
			_, err := c.Txn(ctx, ops...)
			requireTxnErr(t, err, pos, b.code, fmt.Sprintf("%s at op %d", b.name, pos))
		}
	}
	for _, dup := range [][]topo.TxnOp{
		{topo.CreateOp("tx/b", []byte("x")), topo.UpdateOp("tx/b", []byte("y"), nil)},
		{topo.UpdateOp("tx/a", []byte("x"), va), topo.IfHeld(l), topo.DeleteOp("/tx/a", nil)},
		{topo.DeleteOp("tx/a", nil), topo.CreateOp("tx/a", []byte("again"))},
	} {
		_, err := c.Txn(ctx, dup...)
		requireTxnErr(t, err, len(dup)-1, topo.InvalidArgument, "two writes of one path")
	}
	requireSameSnapshot(t, ctx, r, before, "refused malformed transactions")
	require.NoError(t, l.Check(ctx), "the lock after refused transactions")

	// A condition and a write of one path are fine.
	vs, err := c.Txn(ctx, topo.IfVersion("tx/a", va), topo.UpdateOp("tx/a", []byte("a1"), va))
	require.NoError(t, err)
	requireFile(t, ctx, r, "tx/a", "a1", vs[1])

	// Many ops: applied whole, or refused as too large for the store.
	const many = 300
	var large []topo.TxnOp
	for i := range many {
		large = append(large, topo.UpdateOp(fmt.Sprintf("many/f%03d", i), []byte("v"), nil))
	}
	before = takeSnapshot(t, ctx, r)
	vs, err = c.Txn(ctx, large...)
	if err != nil {
		requireCode(t, err, topo.InvalidArgument, fmt.Sprintf("a transaction of %d writes (too large for the store?)", many))
		var te *topo.TxnError
		require.Falsef(t, errors.As(err, &te), "a transaction too large for the store is refused as a whole, not by op: %v", err)
		requireSameSnapshot(t, ctx, r, before, "a transaction refused as too large")
	} else {
		requireTxnVersions(t, large, vs, "a large transaction")
		kvs, err := r.List(ctx, "many/")
		require.NoError(t, err)
		require.Len(t, kvs, many, "the files a large transaction wrote")
		for i, kv := range kvs {
			require.Equal(t, vs[i].String(), kv.Version.String())
		}
	}

	// Error messages name the op.
	_, err = c.Txn(ctx, topo.IfPresent("tx/a"), topo.CreateOp("tx/a", []byte("x")))
	requireTxnErr(t, err, 1, topo.NodeExists, "CreateOp of an existing file")
	require.Truef(t, strings.HasPrefix(err.Error(), "transaction op 1 "), "the error %q names the failing op", err)

	// After Close.
	cl := s.conn()
	cl.Close()
	_, err = cl.Txn(ctx, ok)
	requireCode(t, err, topo.Closed, "Txn after Close")
	requireNoFile(t, ctx, r, "tx/new")
}

// testTxnStateBefore: every condition, and every write's implied
// condition, is evaluated against the state before the transaction: an op
// never sees the writes of the ops before it. Several writes may create
// files under one new directory.
func testTxnStateBefore(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	vq := mustCreate(t, ctx, c, "sb/q", "q")
	vr := mustCreate(t, ctx, c, "sb/r", "r")
	mustCreate(t, ctx, c, "sb/q2", "q2")
	before := takeSnapshot(t, ctx, r)

	_, err := c.Txn(ctx, topo.CreateOp("sb/p", []byte("p")), topo.IfPresent("sb/p"))
	requireTxnErr(t, err, 1, topo.NoNode, "IfPresent of a file the transaction's CreateOp creates")
	_, err = c.Txn(ctx, topo.DeleteOp("sb/q2", nil), topo.IfAbsent("sb/q2"))
	requireTxnErr(t, err, 1, topo.NodeExists, "IfAbsent of a file the transaction's DeleteOp deletes")
	_, err = c.Txn(ctx, topo.UpdateOp("sb/r", []byte("r1"), vr), topo.IfVersion("sb/r", mustVersion(t, ctx, r, "sb/q")))
	requireTxnErr(t, err, 1, topo.BadVersion, "IfVersion with the version of another file")
	requireSameSnapshot(t, ctx, r, before, "transactions whose later conditions fail on the state before them")

	vs, err := c.Txn(ctx,
		topo.DeleteOp("sb/q", nil), topo.IfPresent("sb/q"), topo.IfVersion("sb/q", vq),
		topo.UpdateOp("sb/r", []byte("r1"), vr), topo.IfVersion("sb/r", vr),
		topo.CreateOp("sb/s", []byte("s")), topo.IfAbsent("sb/s"),
		topo.CreateOp("sb/new/a", []byte("a")), topo.CreateOp("sb/new/b", []byte("b")),
		topo.UpdateOp("sb/new/c", []byte("c"), nil), topo.UpdateOp("sb/new/deeper/d", []byte("d"), nil))
	require.NoError(t, err, "conditions that hold on the state before the transaction's writes")
	requireNoFile(t, ctx, r, "sb/q")
	requireFile(t, ctx, r, "sb/r", "r1", vs[3])
	requireFile(t, ctx, r, "sb/s", "s", vs[5])
	requireFile(t, ctx, r, "sb/new/a", "a", vs[7])
	requireFile(t, ctx, r, "sb/new/b", "b", vs[8])
	requireFile(t, ctx, r, "sb/new/c", "c", vs[9])
	requireFile(t, ctx, r, "sb/new/deeper/d", "d", vs[10])
	entries, err := r.ListDir(ctx, "sb/new", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"a", "b", "c", "deeper"}, "ListDir of the directory the transaction created")
}
