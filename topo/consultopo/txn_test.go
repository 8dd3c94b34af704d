package consultopo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// requireTxnErr asserts err is a *topo.TxnError for op index with code.
func requireTxnErr(t *testing.T, err error, index int, code topo.ErrorCode) {
	t.Helper()
	var te *topo.TxnError
	require.Truef(t, errors.As(err, &te), "want a *topo.TxnError, got %v", err)
	require.Equal(t, index, te.Index, "failing op index (%v)", err)
	requireCode(t, err, code)
}

// snapshot returns every key (with value, flags and ModifyIndex) under
// root, read raw, so that a test sees any write, lock keys included.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	pairs, _, err := rawClient(t).KV().List(root+"/", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pairs {
		out[p.Key] = string(p.Value) + "|" + p.Session + "|" + strconv.FormatUint(p.Flags, 16) + "|" + topo.NumericVersion(p.ModifyIndex).String()
	}
	return out
}

// TestTxnOps (issue 11): every op kind applies as its Conn method would,
// with the returned versions those Get then reads; every failure gives
// the failing op's index and code and writes nothing.
func TestTxnOps(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	va, err := c.Create(ctx, "a", []byte("a0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/b", []byte("b0"))
	require.NoError(t, err)
	vc, err := c.Create(ctx, "c", []byte("c0"))
	require.NoError(t, err)

	vs, err := c.Txn(ctx,
		topo.IfVersion("a", va),
		topo.IfAbsent("n"),
		topo.IfPresent("d/b"),
		topo.CreateOp("new/deep/file", []byte("created")),
		topo.UpdateOp("a", []byte("a1"), va),
		topo.UpdateOp("u", []byte("upserted"), nil),
		topo.DeleteOp("d/b", nil),
		topo.DeleteOp("c", vc),
		topo.IfAbsent("new/deep/file"), // the state before the create
	)
	require.NoError(t, err)
	require.Len(t, vs, 9)
	for _, i := range []int{0, 1, 2, 6, 7, 8} {
		require.Nil(t, vs[i], "op %d returns no version", i)
	}
	for i, f := range map[int]string{3: "new/deep/file", 4: "a", 5: "u"} {
		_, v, err := c.Get(ctx, f)
		require.NoError(t, err)
		require.Equal(t, v, vs[i], "the version of op %d is what Get reads", i)
	}
	got, _, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "a1", string(got))
	for _, f := range []string{"d/b", "c"} {
		_, _, err = c.Get(ctx, f)
		requireCode(t, err, topo.NoNode)
	}
	entries, err := c.ListDir(ctx, "new", false)
	require.NoError(t, err, "the create made the parent directories")
	require.Equal(t, "deep", entries[0].Name)

	// Conditions only (Consul's read path, sent ?consistent).
	vs, err = c.Txn(ctx, topo.IfAbsent("n"), topo.IfPresent("u"), topo.IfVersion("u", vs[5]))
	require.NoError(t, err)
	require.Equal(t, []topo.Version{nil, nil, nil}, vs)
	_, err = c.Txn(ctx, topo.IfAbsent("n"), topo.IfPresent("n"), topo.IfAbsent("u"))
	requireTxnErr(t, err, 1, topo.NoNode)

	// An update of identical contents still yields a new version, as
	// Update's does.
	_, va1, err := c.Get(ctx, "a")
	require.NoError(t, err)
	vs, err = c.Txn(ctx, topo.UpdateOp("a", []byte("a1"), va1))
	require.NoError(t, err)
	require.NotEqual(t, va1, vs[0])
	va = vs[0]

	_, err = c.Create(ctx, "d/b", []byte("b0"))
	require.NoError(t, err)
	stale := topo.NumericVersion(uint64(va.(topo.NumericVersion)) - 1)
	l, err := c.Lock(ctx, "d", "guard")
	require.NoError(t, err)
	_, err = c.Create(ctx, "e/f", []byte("e"))
	require.NoError(t, err)
	gone, err := c.Lock(ctx, "e", "unlocked")
	require.NoError(t, err)
	require.NoError(t, gone.Unlock(ctx))
	behind, err := c.LockName(ctx, "g", "deleted behind its back")
	require.NoError(t, err)
	_, err = rawClient(t).KV().Delete(root+"/g/Lock", nil)
	require.NoError(t, err)

	w := topo.UpdateOp("w", []byte("must not be written"), nil)
	for _, tc := range []struct {
		name  string
		ops   []topo.TxnOp
		index int
		code  topo.ErrorCode
	}{
		{"if-version stale", []topo.TxnOp{w, topo.IfVersion("a", stale)}, 1, topo.BadVersion},
		{"if-version zero", []topo.TxnOp{w, topo.IfVersion("a", topo.NumericVersion(0))}, 1, topo.BadVersion},
		{"if-version absent", []topo.TxnOp{w, topo.IfVersion("n", va)}, 1, topo.NoNode},
		{"if-absent present", []topo.TxnOp{w, topo.IfAbsent("a")}, 1, topo.NodeExists},
		{"if-present absent", []topo.TxnOp{w, topo.IfPresent("n")}, 1, topo.NoNode},
		{"if-held unlocked", []topo.TxnOp{w, topo.IfHeld(gone)}, 1, topo.LockLost},
		{"if-held deleted behind", []topo.TxnOp{w, topo.IfHeld(behind)}, 1, topo.LockLost},
		{"create present", []topo.TxnOp{w, topo.CreateOp("a", []byte("x"))}, 1, topo.NodeExists},
		{"update stale", []topo.TxnOp{w, topo.UpdateOp("a", []byte("x"), stale)}, 1, topo.BadVersion},
		{"update zero", []topo.TxnOp{w, topo.UpdateOp("a", []byte("x"), topo.NumericVersion(0))}, 1, topo.BadVersion},
		{"update absent", []topo.TxnOp{w, topo.UpdateOp("n", []byte("x"), va)}, 1, topo.NoNode},
		{"update absent zero", []topo.TxnOp{w, topo.UpdateOp("n", []byte("x"), topo.NumericVersion(0))}, 1, topo.NoNode},
		{"delete absent", []topo.TxnOp{w, topo.DeleteOp("n", nil)}, 1, topo.NoNode},
		{"delete stale", []topo.TxnOp{w, topo.DeleteOp("a", stale)}, 1, topo.BadVersion},
		{"delete absent versioned", []topo.TxnOp{w, topo.DeleteOp("n", va)}, 1, topo.NoNode},
		{"a failure before an unlocked if-held", []topo.TxnOp{w, topo.IfPresent("n"), topo.IfHeld(gone)}, 1, topo.NoNode},
		{"first of two failures", []topo.TxnOp{w, topo.IfHeld(l), topo.IfAbsent("a"), topo.IfVersion("a", stale)}, 2, topo.NodeExists},
		{"held passes, version fails", []topo.TxnOp{topo.IfHeld(l), topo.UpdateOp("a", []byte("x"), stale), w}, 1, topo.BadVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, root)
			_, err := c.Txn(ctx, tc.ops...)
			requireTxnErr(t, err, tc.index, tc.code)
			require.Equal(t, before, snapshot(t, root), "a failed transaction wrote something")
		})
	}

	// Guarded writes pass while the lock is held.
	v, err := topo.GuardedUpdate(ctx, c, l, "a", []byte("guarded"), va)
	require.NoError(t, err)
	got, gv, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "guarded", string(got))
	require.Equal(t, v, gv)
	require.NoError(t, topo.GuardedDelete(ctx, c, l, "a", v))
	_, _, err = c.Get(ctx, "a")
	requireCode(t, err, topo.NoNode)
	require.NoError(t, l.Unlock(ctx))
	_, err = topo.GuardedUpdate(ctx, c, l, "a", []byte("after unlock"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
}

// TestTxnIfHeldStaleSameSession (issue 11): a lock taken again through the
// same Conn, hence the same Consul session, does not make an earlier
// descriptor of that session pass IfHeld: the check-index on the fencing
// token refuses it in the store, even when the holder's local state says
// it still holds the lock (a copy of the descriptor whose session looks
// alive).
func TestTxnIfHeldStaleSameSession(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l1, err := c.Lock(ctx, "d", "first")
	require.NoError(t, err)
	stale := frozen(t, l1)
	require.NoError(t, l1.Unlock(ctx))
	l2, err := c.Lock(ctx, "d", "second")
	require.NoError(t, err)
	require.Equal(t, fenceSession(t, l1).id, fenceSession(t, l2).id, "both locks use the Conn's shared session")
	require.Greater(t, l2.Token(), l1.Token())

	_, err = topo.GuardedUpdate(ctx, c, stale, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c, l1, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	got, gv, err := c.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "0", string(got))
	require.Equal(t, v, gv)
	_, err = topo.GuardedUpdate(ctx, c, l2, "d/f", []byte("current"), v)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(ctx))
}

// TestTxnLimits (issue 11): more than MaxTxnOps Consul operations, or a
// request larger than Options.TxnMaxRequestBytes, is InvalidArgument
// before anything is sent; the largest value Update sends in a
// transaction fits.
func TestTxnLimits(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	v, err := c.Create(ctx, "a", []byte("a"))
	require.NoError(t, err)

	ops := make([]topo.TxnOp, 0, MaxTxnOps+1)
	for i := range MaxTxnOps {
		ops = append(ops, topo.CreateOp("f/"+strings.Repeat("x", i+1), []byte("x")))
	}
	l, err := c.LockName(ctx, "l", "x")
	require.NoError(t, err)
	defer l.Unlock(ctx)
	before := snapshot(t, root)
	_, err = c.Txn(ctx, append(ops, topo.IfAbsent("n"))...)
	requireCode(t, err, topo.InvalidArgument)
	var te *topo.TxnError
	require.False(t, errors.As(err, &te), "a size limit is not an op's fault: %v", err)
	require.Equal(t, before, snapshot(t, root))

	// A DeleteOp takes two Consul operations, and so does an IfHeld.
	two := []topo.TxnOp{topo.IfHeld(l)}
	for i := range MaxTxnOps/2 - 1 {
		two = append(two, topo.DeleteOp("g/"+strings.Repeat("y", i+1), v))
	}
	_, err = c.Txn(ctx, append(two, topo.IfAbsent("n"))...) // 65
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.Txn(ctx, append(two, topo.DeleteOp("a", v))...) // 66
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.Txn(ctx, two...) // 64: sent
	requireTxnErr(t, err, 1, topo.NoNode)
	require.Equal(t, before, snapshot(t, root))

	vs, err := c.Txn(ctx, ops...) // exactly MaxTxnOps
	require.NoError(t, err)
	require.Len(t, vs, MaxTxnOps)

	big := bytes.Repeat([]byte("b"), maxTxnValue)
	_, err = c.Txn(ctx, topo.IfHeld(l), topo.UpdateOp("big", big, nil))
	require.NoError(t, err, "a value Update sends in a transaction fits in one")
	before = snapshot(t, root)
	_, err = c.Txn(ctx, topo.UpdateOp("big2", bytes.Repeat([]byte("c"), topo.MaxValueSize), nil))
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.Txn(ctx, topo.UpdateOp("h1", big[:200<<10], nil), topo.UpdateOp("h2", big[:200<<10], nil))
	requireCode(t, err, topo.InvalidArgument)
	require.Equal(t, before, snapshot(t, root))

	// A Conn told the agent takes more sends what this one refuses: the
	// agent's own 413 is InvalidArgument too.
	opts := testOptions()
	opts.TxnMaxRequestBytes = 4 << 20
	lax, err := NewConn(opts, root)
	require.NoError(t, err)
	defer lax.Close()
	_, err = lax.Txn(ctx, topo.UpdateOp("h1", big[:200<<10], nil), topo.UpdateOp("h2", big[:200<<10], nil))
	requireCode(t, err, topo.InvalidArgument)
	require.Equal(t, before, snapshot(t, root))
}

// TestTxnRequestOfExactlyTheLimit: a transaction whose request body is
// exactly Options.TxnMaxRequestBytes, with a key and values JSON escapes
// heavily (quotes, <, >, &, non-ASCII in the key, invalid UTF-8 and NUL in the values), is
// sent and applied by the agent (which allows that many bytes); one byte
// more is InvalidArgument and writes nothing.
func TestTxnRequestOfExactlyTheLimit(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	limit := c.opts.TxnMaxRequestBytes
	small := bytes.Repeat([]byte{'"', '<', 0xff, 0}, 1000)
	txn := func(key string, n int) []topo.TxnOp {
		return []topo.TxnOp{
			topo.CreateOp(key+"/a", small),
			topo.CreateOp(key+"/b", bytes.Repeat([]byte{'&', 0xfe, '\\'}, n/3+1)[:n]),
		}
	}
	size := func(ops []topo.TxnOp) int {
		cops, err := backendkit.CheckTxn(ctx, ops)
		require.NoError(t, err)
		plan, err := c.planTxn(cops, nil)
		require.NoError(t, err)
		return txnRequestBytes(plan.ops)
	}
	// Values travel in base64, 4 bytes per 3: the key's length sets the
	// size modulo 4.
	for pad := range 4 {
		key := `q"<>&` + "\u00e9\u00ff" + strings.Repeat("x", pad)
		n := 0
		for range 4 {
			n += (limit - size(txn(key, n))) * 3 / 4
		}
		for n > 0 && size(txn(key, n)) > limit {
			n--
		}
		if size(txn(key, n)) != limit {
			continue
		}
		before := snapshot(t, root)
		_, err := c.Txn(ctx, txn(key+"x", n)...)
		requireCode(t, err, topo.InvalidArgument)
		require.Equal(t, before, snapshot(t, root))
		vs, err := c.Txn(ctx, txn(key, n)...)
		require.NoError(t, err)
		got, _, err := c.Get(ctx, key+"/b")
		require.NoError(t, err)
		require.Equal(t, txn(key, n)[1].Contents, got)
		require.NotNil(t, vs[1])
		return
	}
	t.Fatal("no key length gives a request of exactly the limit")
}

// TestTxnSizeEstimate: txnRequestBytes is the size of the body the api
// package sends.
func TestTxnSizeEstimate(t *testing.T) {
	for _, key := range []string{"", "a", "a/b/c", `q"\<>&` + "\x01\xff\u00e9", strings.Repeat("k", 1000)} {
		for _, n := range []int{0, 1, 2, 3, 100, 1000} {
			ops := api.TxnOps{}
			for _, verb := range []api.KVOp{api.KVSet, api.KVCAS, api.KVCheckSession, api.KVCheckIndex, api.KVCheckNotExists, api.KVGet, api.KVDelete, api.KVUnlock} {
				ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: verb, Key: key, Value: bytes.Repeat([]byte{0xfe}, n),
					Flags: ^uint64(0), Index: ^uint64(0), Session: "8b1a9953-c461-1296-0e5e-dd7bd9f5e3b2"}})
			}
			var buf bytes.Buffer
			require.NoError(t, json.NewEncoder(&buf).Encode(ops))
			require.Equal(t, buf.Len(), txnRequestBytes(ops), "key %q, %d bytes", key, n)
		}
	}
}

// foreignFence is a Fence no backend issued.
type foreignFence struct{}

func (foreignFence) Token() int64                    { return 1 }
func (foreignFence) Done() <-chan struct{}           { return nil }
func (foreignFence) Check(ctx context.Context) error { return nil }

// wrappedFence is a middleware's decorator of a Fence.
type wrappedFence struct{ topo.Fence }

func (w wrappedFence) Unwrap() topo.Fence { return w.Fence }

// TestTxnFences (issue 11): IfHeld with a Fence of another backend is
// InvalidArgument naming the op; one behind a decorator with Unwrap is
// found; after Close Txn is Closed.
func TestTxnFences(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	l, err := c.LockName(ctx, "l", "x")
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfAbsent("n"), topo.IfHeld(foreignFence{}), topo.CreateOp("n", nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument)
	vs, err := c.Txn(ctx, topo.IfHeld(wrappedFence{l}), topo.CreateOp("n", nil))
	require.NoError(t, err)
	require.NotNil(t, vs[1])
	require.NoError(t, l.Unlock(ctx))
	_, err = c.Txn(ctx, topo.IfHeld(wrappedFence{l}), topo.CreateOp("m", nil))
	requireTxnErr(t, err, 0, topo.LockLost)

	// A lock of another Conn on the same agent guards as well.
	other := newTestConn(t, root)
	ol, err := other.LockName(ctx, "o", "x")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, c, ol, "n", []byte("via another conn"), nil)
	require.NoError(t, err)
	require.NoError(t, ol.Unlock(ctx))

	c.Close()
	_, err = c.Txn(ctx, topo.IfAbsent("n"))
	requireCode(t, err, topo.Closed)
}

// TestTxnWatched (issue 11): watches see transaction writes like plain
// writes.
func TestTxnWatched(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	_, ch, err := c.Watch(ctx, "d/f")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "d/")
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	nv, err := topo.GuardedUpdate(ctx, c, l, "d/f", []byte("1"), v)
	require.NoError(t, err)
	select {
	case wd := <-ch:
		require.NoError(t, wd.Err)
		require.Equal(t, "1", string(wd.Contents))
		require.Equal(t, nv, wd.Version)
	case <-t.Context().Done():
		t.Fatal("the watch did not fire")
	}
	for wd := range rch {
		require.NoError(t, wd.Err)
		if wd.Path == "d/f" && wd.Version.String() == nv.String() {
			break
		}
	}
	require.NoError(t, l.Unlock(ctx))
}

// TestTxnPermissionDenied (issue 11): a read-only token's transaction
// with a write is PermissionDenied (not a condition outcome) and writes
// nothing; one of IfVersion and IfPresent conditions is answered, IfAbsent
// needs write permission in Consul.
func TestTxnPermissionDenied(t *testing.T) {
	_, admin, ro, _ := aclSetup(t)
	ctx := t.Context()
	v, err := admin.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for _, ops := range [][]topo.TxnOp{
		{topo.UpdateOp("d/f", []byte("y"), v)},
		{topo.IfVersion("d/f", v), topo.CreateOp("d/g", nil)},
		{topo.IfAbsent("d/f"), topo.CreateOp("d/g", nil)}, // a failing condition, and a refused write
		{topo.DeleteOp("d/f", nil)},
	} {
		_, err = ro.Txn(ctx, ops...)
		requireCode(t, err, topo.PermissionDenied)
		var te *topo.TxnError
		require.False(t, errors.As(err, &te), "%v", err)
	}
	_, err = ro.Txn(ctx, topo.IfVersion("d/f", v), topo.IfPresent("d/f"))
	require.NoError(t, err)
	// Consul wants key write permission for check-not-exists.
	_, err = ro.Txn(ctx, topo.IfVersion("d/f", v), topo.IfAbsent("d/g"))
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Txn(ctx, topo.IfVersion("d/f", topo.NumericVersion(1)))
	requireTxnErr(t, err, 0, topo.BadVersion)
	got, gv, err := admin.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	require.Equal(t, v, gv)
	_, _, err = admin.Get(ctx, "d/g")
	requireCode(t, err, topo.NoNode)
}

// TestTxnStateBefore: every condition, and every implied condition of a
// write, sees the state before the transaction, although Consul evaluates
// its operations in order on the state the earlier ones left; and the
// error names the first failing op in the caller's order, also when a
// write fails before a condition that fails too (Txn sends the conditions
// first, so Consul's lowest OpIndex is then the later op).
func TestTxnStateBefore(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	va, err := c.Create(ctx, "a", []byte("a0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "b", []byte("b0"))
	require.NoError(t, err)
	stale := topo.NumericVersion(uint64(va.(topo.NumericVersion)) - 1)
	_, err = c.Create(ctx, "e/f", []byte("e"))
	require.NoError(t, err)
	gone, err := c.Lock(ctx, "e", "unlocked")
	require.NoError(t, err)
	require.NoError(t, gone.Unlock(ctx))

	w := topo.UpdateOp("w", []byte("must not be written"), nil)
	for _, tc := range []struct {
		name  string
		ops   []topo.TxnOp
		index int
		code  topo.ErrorCode
	}{
		{"if-present after its create", []topo.TxnOp{w, topo.CreateOp("n", nil), topo.IfPresent("n")}, 2, topo.NoNode},
		{"if-version after its create", []topo.TxnOp{topo.CreateOp("n", nil), topo.IfVersion("n", va)}, 1, topo.NoNode},
		{"if-absent after its delete", []topo.TxnOp{topo.DeleteOp("b", nil), topo.IfAbsent("b")}, 1, topo.NodeExists},
		{"if-version after its update", []topo.TxnOp{topo.UpdateOp("a", []byte("x"), va), topo.IfVersion("a", stale)}, 1, topo.BadVersion},
		{"a create failing before a condition", []topo.TxnOp{w, topo.CreateOp("a", nil), topo.IfPresent("n")}, 1, topo.NodeExists},
		{"an update failing before a condition", []topo.TxnOp{topo.UpdateOp("a", []byte("x"), stale), topo.IfAbsent("a")}, 0, topo.BadVersion},
		{"an absent update before a condition", []topo.TxnOp{topo.UpdateOp("n", []byte("x"), va), topo.IfVersion("a", stale)}, 0, topo.NoNode},
		{"a delete failing before a condition", []topo.TxnOp{topo.DeleteOp("n", nil), topo.IfHeld(gone)}, 0, topo.NoNode},
		{"a versioned delete before a condition", []topo.TxnOp{topo.DeleteOp("b", stale), topo.IfPresent("n")}, 0, topo.BadVersion},
		{"a condition before a failing write", []topo.TxnOp{topo.IfHeld(gone), topo.CreateOp("a", nil)}, 0, topo.LockLost},
		{"writes failing in order", []topo.TxnOp{w, topo.DeleteOp("n", nil), topo.CreateOp("a", nil), topo.IfAbsent("b")}, 1, topo.NoNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, root)
			_, err := c.Txn(ctx, tc.ops...)
			requireTxnErr(t, err, tc.index, tc.code)
			require.Equal(t, before, snapshot(t, root), "a failed transaction wrote something")
		})
	}

	// Conditions that hold on the state before the writes pass.
	vs, err := c.Txn(ctx,
		topo.DeleteOp("b", nil), topo.IfPresent("b"),
		topo.UpdateOp("a", []byte("a1"), va), topo.IfVersion("a", va),
		topo.CreateOp("n", []byte("n")), topo.IfAbsent("n"))
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "b")
	requireCode(t, err, topo.NoNode)
	for i, f := range map[int]string{2: "a", 4: "n"} {
		_, v, err := c.Get(ctx, f)
		require.NoError(t, err)
		require.Equal(t, v, vs[i], "the version of op %d is what Get reads", i)
	}
}
