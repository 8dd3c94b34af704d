package etcd2topo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// requireTxnErr asserts that err is a *topo.TxnError for op index with
// code.
func requireTxnErr(t *testing.T, err error, index int, code topo.ErrorCode) {
	t.Helper()
	require.ErrorIs(t, err, code)
	var te *topo.TxnError
	require.True(t, errors.As(err, &te), "not a *topo.TxnError: %v", err)
	require.Equal(t, index, te.Index, "failing op: %v", err)
}

// rootWrites returns every key under c's root with the revision of its
// last write: any put or delete under the root changes it. Tests that
// check that nothing was written compare it, not the store's revision,
// which every client of the package's shared server moves: another test's
// lease that expires (TestListDirKeyOrder's lasts a minute) deletes its
// keys at any moment.
func rootWrites(t *testing.T, cli *clientv3.Client, c *Conn) map[string]int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), c.key(""), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	keys := make(map[string]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv.ModRevision
	}
	return keys
}

// TestTxnOps: every write kind succeeds with the semantics of its Conn
// method, the versions returned are the files' new ModRevisions, and the
// conditions hold when they should.
func TestTxnOps(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	ctx := context.Background()
	va, err := c.Create(ctx, "a", []byte("a0"))
	require.NoError(t, err)
	vb, err := c.Create(ctx, "b", []byte("b0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "c", []byte("c0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d", []byte("d0"))
	require.NoError(t, err)

	vs, err := c.Txn(ctx,
		topo.IfVersion("a", va),
		topo.IfAbsent("new/x"),
		topo.IfPresent("c"),
		topo.CreateOp("new/deep/file", []byte("n")), // parents are implicit
		topo.UpdateOp("a", []byte("a1"), va),
		topo.UpdateOp("u", []byte("u"), nil), // creates
		topo.DeleteOp("b", vb),
		topo.DeleteOp("c", nil),
		topo.UpdateOp("d", []byte("d1"), nil),
	)
	require.NoError(t, err)
	require.Len(t, vs, 9)
	for i, v := range vs {
		switch i {
		case 3, 4, 5, 8:
			require.NotNil(t, v, "op %d", i)
		default:
			require.Nil(t, v, "op %d", i)
		}
	}
	for i, p := range map[int]string{3: "new/deep/file", 4: "a", 5: "u", 8: "d"} {
		_, v, err := c.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, v, vs[i], p)
	}
	for _, p := range []string{"b", "c"} {
		_, _, err := c.Get(ctx, p)
		require.ErrorIs(t, err, topo.NoNode, p)
	}
	data, _, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "a1", string(data))
	entries, err := c.ListDir(ctx, "new", false)
	require.NoError(t, err)
	require.Equal(t, "deep", entries[0].Name)
	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, kvs, 4) // a, d, new/deep/file, u

	// Conditions only: nothing is written, every version is nil.
	vs, err = c.Txn(ctx, topo.IfVersion("a", vs[4]), topo.IfAbsent("b"), topo.IfPresent("u"))
	require.NoError(t, err)
	require.Equal(t, []topo.Version{nil, nil, nil}, vs)
}

// TestTxnFailures: every condition (and implied condition) that does not
// hold fails with its code, names the first failing op by index, and
// writes nothing (an unconditional write earlier in the transaction is
// not applied, and no key under the root changes).
func TestTxnFailures(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	ctx := context.Background()
	v, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	stale := topo.NumericVersion(int64(v.(topo.NumericVersion)) - 1)
	ld, err := c.Lock(ctx, "d", "me")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
	ld2, err := c.Lock(ctx, "d", "me")
	require.NoError(t, err)
	defer ld2.Unlock(ctx)
	// A lock whose entry is deleted behind it: only the store knows.
	ld3, err := c.LockName(ctx, "other", "me")
	require.NoError(t, err)
	_, err = cli.Delete(ctx, entryBehind(t, ld3).key)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		op   topo.TxnOp
		code topo.ErrorCode
	}{
		{"if-version absent", topo.IfVersion("nope", v), topo.NoNode},
		{"if-version stale", topo.IfVersion("f", stale), topo.BadVersion},
		{"if-version 0 present", topo.IfVersion("f", topo.NumericVersion(0)), topo.BadVersion},
		{"if-version 0 absent", topo.IfVersion("nope", topo.NumericVersion(0)), topo.NoNode},
		{"if-absent", topo.IfAbsent("f"), topo.NodeExists},
		{"if-present", topo.IfPresent("nope"), topo.NoNode},
		{"if-held unlocked", topo.IfHeld(ld), topo.LockLost},
		{"if-held deleted behind", topo.IfHeld(ld3), topo.LockLost},
		{"create exists", topo.CreateOp("f", []byte("y")), topo.NodeExists},
		{"update absent", topo.UpdateOp("nope", []byte("y"), v), topo.NoNode},
		{"update stale", topo.UpdateOp("f", []byte("y"), stale), topo.BadVersion},
		{"update 0", topo.UpdateOp("f", []byte("y"), topo.NumericVersion(0)), topo.BadVersion},
		{"update 0 absent", topo.UpdateOp("nope", []byte("y"), topo.NumericVersion(0)), topo.NoNode},
		{"delete absent", topo.DeleteOp("nope", nil), topo.NoNode},
		{"delete absent version", topo.DeleteOp("nope", v), topo.NoNode},
		{"delete stale", topo.DeleteOp("f", stale), topo.BadVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rootWrites(t, cli, c)
			// Op 0 would write, op 1 holds, op 2 fails, op 3 fails too:
			// the first failing one, 2, is named.
			_, err := c.Txn(ctx,
				topo.UpdateOp("canary", []byte("written"), nil),
				topo.IfHeld(ld2),
				tc.op,
				topo.IfPresent("nope2"),
			)
			requireTxnErr(t, err, 2, tc.code)
			_, _, err = c.Get(ctx, "canary")
			require.ErrorIs(t, err, topo.NoNode, "a failed transaction wrote")
			require.Equal(t, before, rootWrites(t, cli, c), "a failed transaction wrote")

			// Alone, it fails at index 0.
			_, err = c.Txn(ctx, tc.op)
			requireTxnErr(t, err, 0, tc.code)
		})
	}
	data, v2, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
	require.Equal(t, v, v2)
}

// TestTxnBadInput: malformed transactions get a typed error and send
// nothing: an empty one, bad or reserved paths, two writes of one path, a
// Fence of another backend, and transactions larger than etcd takes (too
// many ops, too many bytes), counted against Options.MaxTxnOps and
// MaxRequestBytes.
func TestTxnBadInput(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	ctx := context.Background()
	before := rootWrites(t, cli, c)

	_, err := c.Txn(ctx)
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.CreateOp("a", nil), topo.CreateOp("d/locks/x", nil))
	requireTxnErr(t, err, 1, topo.InvalidPath)
	_, err = c.Txn(ctx, topo.CreateOp("a", nil), topo.IfPresent("../x"))
	requireTxnErr(t, err, 1, topo.InvalidPath)
	_, err = c.Txn(ctx, topo.CreateOp("a", nil), topo.DeleteOp("a", nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.CreateOp("a", nil), topo.IfHeld(foreignFence{}))
	requireTxnErr(t, err, 1, topo.InvalidArgument)

	// 129 writes: more than etcd's default --max-txn-ops.
	var ops []topo.TxnOp
	for i := range DefaultMaxTxnOps + 1 {
		ops = append(ops, topo.UpdateOp("f"+strings.Repeat("x", i), nil, nil))
	}
	_, err = c.Txn(ctx, ops...)
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.False(t, errors.As(err, new(*topo.TxnError)), "a size limit is no op's fault")
	require.Equal(t, before, rootWrites(t, cli, c), "bad input was written")
	// 128 go through.
	_, err = c.Txn(ctx, ops[:DefaultMaxTxnOps]...)
	require.NoError(t, err)
	// 129 ops, but 1 compare and 128 writes (unconditional updates
	// compare nothing): within the limits, which count each kind apart.
	_, err = c.Txn(ctx, append([]topo.TxnOp{topo.IfAbsent("zz")}, ops[:DefaultMaxTxnOps]...)...)
	require.NoError(t, err)
	before = rootWrites(t, cli, c)
	// 129 compares.
	var conds []topo.TxnOp
	for i := range DefaultMaxTxnOps + 1 {
		conds = append(conds, topo.IfPresent("f"+strings.Repeat("x", i)))
	}
	_, err = c.Txn(ctx, conds...)
	require.ErrorIs(t, err, topo.InvalidArgument)

	// Too many bytes: three values of topo.MaxValueSize exceed 1.5 MiB.
	big := []byte(strings.Repeat("v", topo.MaxValueSize))
	_, err = c.Txn(ctx, topo.UpdateOp("b1", big, nil), topo.UpdateOp("b2", big, nil), topo.UpdateOp("b3", big, nil))
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.Equal(t, before, rootWrites(t, cli, c), "bad input was written")
	_, err = c.Txn(ctx, topo.UpdateOp("b1", big, nil), topo.UpdateOp("b2", big, nil))
	require.NoError(t, err)
	before = rootWrites(t, cli, c)

	// The limits come from Options.
	small, err := NewConn(Options{Endpoints: []string{serverAddr}, MaxTxnOps: 2, MaxRequestBytes: 1000}, root)
	require.NoError(t, err)
	defer small.Close()
	_, err = small.Txn(ctx, topo.IfPresent("a"), topo.IfPresent("b"), topo.IfPresent("c"))
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = small.Txn(ctx, topo.UpdateOp("s", []byte(strings.Repeat("v", 1000)), nil))
	require.ErrorIs(t, err, topo.InvalidArgument)
	// A limit above the server's: etcd refuses, as InvalidArgument.
	loose, err := NewConn(Options{Endpoints: []string{serverAddr}, MaxTxnOps: 1000}, root)
	require.NoError(t, err)
	defer loose.Close()
	_, err = loose.Txn(ctx, conds...)
	require.ErrorIs(t, err, topo.InvalidArgument)

	require.Equal(t, before, rootWrites(t, cli, c), "bad input was written")

	closed, err := NewConn(testOptions(serverAddr), root)
	require.NoError(t, err)
	closed.Close()
	_, err = closed.Txn(ctx, topo.UpdateOp("a", nil, nil))
	require.ErrorIs(t, err, topo.Closed)
}

// foreignFence is a Fence no backend issued.
type foreignFence struct{}

func (foreignFence) Token() int64                    { return 1 }
func (foreignFence) Done() <-chan struct{}           { return nil }
func (foreignFence) Check(ctx context.Context) error { return nil }

// wrappedFence is a decorator's Fence (see topo.Fence).
type wrappedFence struct{ topo.Fence }

func (w wrappedFence) Unwrap() topo.Fence { return w.Fence }

// TestTxnIfHeld: IfHeld holds while the lock (or term) is held, also
// behind a decorator and from another Conn on the same cluster (with
// another root); it fails with LockLost once the lock was released or its
// entry is gone; a Fence from another etcd cluster is refused.
func TestTxnIfHeld(t *testing.T) {
	root := newRoot()
	c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, newRoot())
	ctx := context.Background()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c1.Lock(ctx, "d", "me")
	require.NoError(t, err)
	for _, conn := range []*Conn{c1, c2} {
		v, err := topo.GuardedUpdate(ctx, conn, ld, "g", []byte("1"), nil)
		require.NoError(t, err)
		_, err = topo.GuardedUpdate(ctx, conn, wrappedFence{ld}, "g", []byte("2"), v)
		require.NoError(t, err)
	}

	p, err := c1.NewLeaderParticipation("svc", "me")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, c2, term, "g", []byte("3"), nil)
	require.NoError(t, err)

	// A Conn on another etcd cluster.
	c3 := openConn(t, etcdtest.StartCluster(t, 1).Endpoints(), root)
	_, err = c3.Txn(ctx, topo.IfPresent("nope"), topo.IfHeld(ld))
	requireTxnErr(t, err, 1, topo.InvalidArgument)

	require.NoError(t, ld.Unlock(ctx))
	_, err = topo.GuardedUpdate(ctx, c1, ld, "g", []byte("4"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c2, wrappedFence{ld}, "g", []byte("4"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	p.Stop()
	err = topo.GuardedDelete(ctx, c2, term, "g", nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	data, _, err := c2.Get(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "3", string(data))
}

// TestTxnWatchSeesWrites: Watch and WatchRecursive see a transaction's
// writes like any other, with the versions Txn returned.
func TestTxnWatchSeesWrites(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.Create(ctx, "w/a", []byte("0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "w/b", []byte("0"))
	require.NoError(t, err)
	_, ch, err := c.Watch(ctx, "w/a")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "w/")
	require.NoError(t, err)
	vs, err := c.Txn(ctx, topo.UpdateOp("w/a", []byte("1"), v), topo.DeleteOp("w/b", nil), topo.CreateOp("w/c", []byte("c")))
	require.NoError(t, err)
	ev := <-ch
	require.NoError(t, ev.Err)
	require.Equal(t, "1", string(ev.Contents))
	require.Equal(t, vs[0], ev.Version)
	seen := map[string]*topo.WatchDataRecursive{}
	for len(seen) < 3 {
		ev := <-rch
		seen[ev.Path] = ev
	}
	require.Equal(t, vs[0], seen["w/a"].Version)
	require.ErrorIs(t, seen["w/b"].Err, topo.NoNode)
	require.Equal(t, vs[2], seen["w/c"].Version)
	require.Equal(t, "c", string(seen["w/c"].Contents))
}

// TestTxnOutcomeUnknown: a transaction whose answer is lost (its Conn cut
// off from etcd until the caller's deadline) reports Timeout or
// Unavailable, never success nor a condition's failure: the store may
// apply it (here the proxy delivers it once healed).
func TestTxnOutcomeUnknown(t *testing.T) {
	root := newRoot()
	c, px := proxiedConn(t, root)
	ctx := context.Background()
	v, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	px.Blackhole()
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = c.Txn(tctx, topo.UpdateOp("f", []byte("1"), v))
	require.Error(t, err)
	require.Truef(t, errors.Is(err, topo.Timeout) || errors.Is(err, topo.Unavailable), "got %v", err)
	require.False(t, errors.As(err, new(*topo.TxnError)), "an unknown outcome is no op's failure: %v", err)
	px.Heal()
}

// TestTxnConcurrentTransfers: Conns moving units between counters with
// compare-and-set transactions (IfVersion on both files, retried on
// BadVersion) under one lock's IfHeld never lose or duplicate a unit: the
// sum stays, and every successful transfer is applied exactly once.
func TestTxnConcurrentTransfers(t *testing.T) {
	root := newRoot()
	const conns, transfers, counters = 4, 15, 3
	cs := make([]*Conn, conns)
	for i := range cs {
		cs[i] = openConn(t, serverAddr, root)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := cs[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := cs[0].LockName(ctx, "d", "bank")
	require.NoError(t, err)
	defer ld.Unlock(ctx)
	name := func(i int) string { return "c" + string(rune('0'+i)) }
	for i := range counters {
		_, err := cs[0].Create(ctx, name(i), []byte{100})
		require.NoError(t, err)
	}
	errs := make(chan error, conns)
	for w := range conns {
		go func() {
			c := cs[w]
			for n := range transfers {
				from, to := name((w+n)%counters), name((w+n+1)%counters)
				for {
					fa, va, err := c.Get(ctx, from)
					if err != nil {
						errs <- err
						return
					}
					fb, vb, err := c.Get(ctx, to)
					if err != nil {
						errs <- err
						return
					}
					_, err = c.Txn(ctx, topo.IfHeld(ld),
						topo.UpdateOp(from, []byte{fa[0] - 1}, va),
						topo.UpdateOp(to, []byte{fb[0] + 1}, vb))
					if errors.Is(err, topo.BadVersion) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
			errs <- nil
		}()
	}
	for range conns {
		require.NoError(t, <-errs)
	}
	sum := 0
	for i := range counters {
		data, _, err := cs[0].Get(ctx, name(i))
		require.NoError(t, err)
		sum += int(data[0])
	}
	require.Equal(t, 100*counters, sum)
	// Each counter gave and received the same number of units here (the
	// transfers form rings), so each is back at 100.
	for i := range counters {
		data, _, err := cs[0].Get(ctx, name(i))
		require.NoError(t, err)
		require.Equal(t, byte(100), data[0], name(i))
	}
}

// TestTxnRoundTrips: a Txn that succeeds is one request to etcd; one
// whose condition fails is two (the failure reads at the failed
// revision name the op); GuardedUpdate and GuardedDelete too; a guarded
// write whose claim ended here sends nothing. (Counted with the benchmarks' gRPC interceptor; the lock has a
// lease of its own with LockName's 24 h TTL, so no keepalive runs meanwhile.)
func TestTxnRoundTrips(t *testing.T) {
	r := &rtCounter{}
	root := newRoot()
	c, err := NewConn(Options{Endpoints: []string{serverAddr}, dialOptions: r.dialOptions()}, root)
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	ld, err := c.LockName(ctx, "d", "me")
	require.NoError(t, err)
	v, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	requests := func(op func()) int64 {
		before := r.load()
		op()
		return r.load() - before
	}
	require.EqualValues(t, 1, requests(func() {
		v, err = topo.GuardedUpdate(ctx, c, ld, "f", []byte("1"), v)
		require.NoError(t, err)
	}))
	require.EqualValues(t, 2, requests(func() {
		_, err := topo.GuardedUpdate(ctx, c, ld, "f", []byte("2"), topo.NumericVersion(1))
		requireTxnErr(t, err, 1, topo.BadVersion)
	}))
	require.EqualValues(t, 2, requests(func() {
		_, err := c.Txn(ctx, topo.IfHeld(ld), topo.IfAbsent("f"), topo.CreateOp("g", nil))
		requireTxnErr(t, err, 1, topo.NodeExists)
	}))
	require.EqualValues(t, 1, requests(func() {
		require.NoError(t, topo.GuardedDelete(ctx, c, ld, "f", v))
	}))
	// Deleted behind the holder, before it heard of it (no watch follows
	// the entry: nobody asked for its Done): the failure reads say so.
	_, err = rawClient(t, serverAddr).Delete(ctx, entryBehind(t, ld).key)
	require.NoError(t, err)
	require.EqualValues(t, 2, requests(func() {
		_, err := topo.GuardedUpdate(ctx, c, ld, "f", []byte("3"), nil)
		requireTxnErr(t, err, 0, topo.LockLost)
	}))
	_ = ld.Unlock(ctx)
	require.EqualValues(t, 0, requests(func() {
		_, err := topo.GuardedUpdate(ctx, c, ld, "f", []byte("4"), nil)
		requireTxnErr(t, err, 0, topo.LockLost)
	}))
}

// TestTxnConditionsSeeStateBefore: every condition is evaluated against
// the state before the transaction, never after the writes of earlier
// ops (one etcd Txn: compares first, then the Success branch).
func TestTxnConditionsSeeStateBefore(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	ctx := context.Background()
	_, err := c.Txn(ctx, topo.CreateOp("n", []byte("x")), topo.IfPresent("n"))
	requireTxnErr(t, err, 1, topo.NoNode)
	_, _, err = c.Get(ctx, "n")
	require.ErrorIs(t, err, topo.NoNode)
	v, err := c.Create(ctx, "o", []byte("x"))
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.DeleteOp("o", v), topo.IfAbsent("o"))
	requireTxnErr(t, err, 1, topo.NodeExists)
	vs, err := c.Txn(ctx, topo.DeleteOp("o", v), topo.IfVersion("o", v))
	require.NoError(t, err)
	require.Nil(t, vs[0])
	_, _, err = c.Get(ctx, "o")
	require.ErrorIs(t, err, topo.NoNode)
}

// TestTxnFailureAfterCompaction: when the failed transaction's revision
// is compacted before its failure reads (forced through the txn seam),
// the failing op is diagnosed from the current state: the first op whose
// condition fails now, or the first op with a condition, with its kind's
// code, when every condition holds now. The transaction is never applied.
// (A server of its own: compaction would disturb the shared one's tests.)
func TestTxnFailureAfterCompaction(t *testing.T) {
	addr := etcdtest.Start(t)
	c := openConn(t, addr, newRoot())
	raw := rawClient(t, addr)
	ctx := context.Background()
	_, err := c.Create(ctx, "x", nil)
	require.NoError(t, err)
	_, err = c.Create(ctx, "h", nil)
	require.NoError(t, err)
	// compactAfter returns the seam that changes the state with change and
	// compacts past the failed transaction's revision.
	compactAfter := func(change func()) func(rev int64) {
		return func(rev int64) {
			change()
			resp, err := raw.Put(ctx, c.key("other"), "y")
			require.NoError(t, err)
			require.Greater(t, resp.Header.Revision, rev)
			_, err = raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
			require.NoError(t, err)
		}
	}
	// At its revision op 1 failed (h exists); now op 0 fails (x is gone).
	_, err = c.txn(ctx, compactAfter(func() {
		_, err := raw.Delete(ctx, c.key("x"))
		require.NoError(t, err)
	}), topo.IfPresent("x"), topo.IfAbsent("h"), topo.CreateOp("w", nil))
	requireTxnErr(t, err, 0, topo.NoNode)
	// Every condition holds now (h is gone): the first op with a condition
	// is named with its kind's code.
	_, err = c.txn(ctx, compactAfter(func() {
		_, err := raw.Delete(ctx, c.key("h"))
		require.NoError(t, err)
	}), topo.UpdateOp("u", nil, nil), topo.IfAbsent("h"), topo.CreateOp("w", nil))
	requireTxnErr(t, err, 1, topo.NodeExists)
	for _, p := range []string{"w", "u"} {
		_, _, err = c.Get(ctx, p)
		require.ErrorIs(t, err, topo.NoNode, p)
	}
	// Without compaction the seam changes nothing: the op that failed at
	// the transaction's revision is named even when the state changed.
	_, err = c.Create(ctx, "h", nil)
	require.NoError(t, err)
	_, err = c.txn(ctx, func(int64) {
		_, err := raw.Delete(ctx, c.key("h"))
		require.NoError(t, err)
	}, topo.IfPresent("h"), topo.IfAbsent("h"), topo.CreateOp("w", nil))
	requireTxnErr(t, err, 1, topo.NodeExists)
}
