package etcd2topo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestGuardedUpdateSameAsGeneralTxn: topo.GuardedUpdate through the Conn
// that took the lock gives what it gives through another Conn of the
// cluster: the new version (the file's
// ModRevision), and for a stale version BadVersion at index 1, for an
// absent file NoNode at index 1, for version 0 BadVersion at index 1, for
// an entry deleted behind the holder's back LockLost at index 0 (also
// when the version is stale too), for an unlocked descriptor LockLost at
// index 0, for a Fence of no backend InvalidArgument at index 0, and
// Closed after Close; nothing is written when it fails. A failure whose
// revision was compacted before its diagnosis is named from the current
// state, as in the general path.
func TestGuardedUpdateSameAsGeneralTxn(t *testing.T) {
	ctx := context.Background()
	addr := etcdtest.Start(t) // compaction below: a server of its own
	root := newRoot()
	mine := openConn(t, addr, root)
	other := openConn(t, addr, root)
	raw := rawClient(t, addr)
	type result struct {
		err   error
		index int
		code  topo.ErrorCode
	}
	outcome := func(err error) result {
		var te *topo.TxnError
		if errors.As(err, &te) {
			var e *topo.Error
			require.True(t, errors.As(te.Err, &e), "%v", err)
			return result{err: err, index: te.Index, code: e.Code}
		}
		var e *topo.Error
		if errors.As(err, &e) {
			return result{err: err, index: -1, code: e.Code}
		}
		require.NoError(t, err)
		return result{index: -1, code: -1}
	}
	// both runs the update through each Conn on a file of its own set up
	// alike by setup, and returns both outcomes and whether each file
	// still holds what setup left.
	n := 0
	both := func(f topo.Fence, setup func(p string) topo.Version) (a, b result) {
		t.Helper()
		var res [2]result
		for i, c := range []*Conn{mine, other} {
			n++
			p := "d/f" + strings.Repeat("x", n)
			v := setup(p)
			before, _ := raw.Get(ctx, c.key(p))
			nv, err := topo.GuardedUpdate(ctx, c, f, p, []byte("new"), v)
			res[i] = outcome(err)
			after, gerr := raw.Get(ctx, c.key(p))
			require.NoError(t, gerr)
			if err == nil {
				require.Len(t, after.Kvs, 1)
				require.Equal(t, "new", string(after.Kvs[0].Value))
				require.Equal(t, topo.NumericVersion(after.Kvs[0].ModRevision), nv)
			} else {
				require.Equal(t, before.Kvs, after.Kvs, "a failed update wrote nothing")
			}
		}
		return res[0], res[1]
	}
	same := func(name string, f topo.Fence, setup func(p string) topo.Version, index int, code topo.ErrorCode) {
		t.Helper()
		a, b := both(f, setup)
		require.Equal(t, index, a.index, "%s: %v", name, a.err)
		require.Equal(t, code, a.code, "%s: %v", name, a.err)
		require.Equal(t, a.index, b.index, "%s: %v / %v", name, a.err, b.err)
		require.Equal(t, a.code, b.code, "%s: %v / %v", name, a.err, b.err)
	}
	create := func(p string) topo.Version {
		v, err := mine.Create(ctx, p, []byte("old"))
		require.NoError(t, err)
		return v
	}
	stale := func(p string) topo.Version {
		v := create(p)
		_, err := mine.Update(ctx, p, []byte("moved"), v)
		require.NoError(t, err)
		return v
	}

	for _, d := range []string{"d", "e", "u", "c"} {
		_, err := mine.Create(ctx, d+"/x", nil) // Lock needs the directory
		require.NoError(t, err)
	}
	ld, err := mine.Lock(ctx, "d", "held")
	require.NoError(t, err)
	same("current version", ld, create, -1, -1)
	same("stale version", ld, stale, 1, topo.BadVersion)
	same("absent file", ld, func(string) topo.Version { return topo.NumericVersion(12345) }, 1, topo.NoNode)
	same("version 0", ld, func(p string) topo.Version { create(p); return topo.NumericVersion(0) }, 1, topo.BadVersion)
	same("foreign fence", foreignFence{}, create, 0, topo.InvalidArgument)

	// The entry deleted behind the holder's back: the compare fails.
	gone, err := mine.Lock(ctx, "e", "gone")
	require.NoError(t, err)
	_, err = raw.Delete(ctx, entryBehind(t, gone).key)
	require.NoError(t, err)
	same("entry deleted", gone, create, 0, topo.LockLost)
	same("entry deleted, stale version", gone, stale, 0, topo.LockLost)

	unlocked, err := mine.Lock(ctx, "u", "unlocked")
	require.NoError(t, err)
	require.NoError(t, unlocked.Unlock(ctx))
	same("unlocked", unlocked, create, 0, topo.LockLost)

	// A failure diagnosed after its revision was compacted: the version
	// is stale then and now, so op 1 is named.
	p := "d/compacted"
	v := stale(p)
	_, err = mine.txn(ctx, func(rev int64) {
		resp, err := raw.Put(ctx, mine.key("other"), "y")
		require.NoError(t, err)
		require.Greater(t, resp.Header.Revision, rev)
		_, err = raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
		require.NoError(t, err)
	}, topo.IfHeld(ld), topo.UpdateOp(p, []byte("new"), v))
	requireTxnErr(t, err, 1, topo.BadVersion)

	// Closed: the holder's Conn refuses before sending, as the general
	// path does for a Conn closed with a Fence of another.
	v = create("d/closed")
	closing := openConn(t, addr, root)
	cl, err := closing.Lock(ctx, "c", "closing")
	require.NoError(t, err)
	closing.Close()
	_, err = topo.GuardedUpdate(ctx, closing, cl, "d/closed", []byte("new"), v)
	require.ErrorIs(t, err, topo.Closed)
	other2 := openConn(t, addr, root)
	other2.Close()
	_, err = topo.GuardedUpdate(ctx, other2, ld, "d/closed", []byte("new"), v)
	require.ErrorIs(t, err, topo.Closed)
	data, _, err := mine.Get(ctx, "d/closed")
	require.NoError(t, err)
	require.Equal(t, "old", string(data))
}
