package zk2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestTxnNamesFailingOpOfOneInstant: the op a failed Txn names fails,
// with every op before it passing, at one instant of the call. The Txn
// [CreateOp(a), IfVersion(b, v0)]: its first multi fails at b's check (b
// was written since v0), which comes first in the multi (conditions
// first), while a exists; the next multi, without b's check, tests a.
// Between the two another client, in one multi, deletes a and re-creates
// b at v0. Before, the Txn named b's IfVersion (BadVersion), true at no
// instant: before that write a's CreateOp failed first (NodeExists),
// after it nothing failed.
func TestTxnNamesFailingOpOfOneInstant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	raw := openRaw(t)
	fired := false
	opts := Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout}
	opts.txnRetry = func() {
		if fired {
			return
		}
		fired = true
		_, err := raw.Multi(
			&zk.DeleteRequest{Path: root + "/d/a", Version: -1},
			&zk.DeleteRequest{Path: root + "/d/b", Version: -1},
			&zk.CreateRequest{Path: root + "/d/b", Data: []byte("b0"), Acl: zk.WorldACL(zk.PermAll)},
		)
		require.NoError(t, err)
	}
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.Create(ctx, "d/a", []byte("a"))
	require.NoError(t, err)
	v0, err := c.Create(ctx, "d/b", []byte("b0"))
	require.NoError(t, err)
	_, err = c.Update(ctx, "d/b", []byte("b1"), v0)
	require.NoError(t, err)

	_, err = c.Txn(ctx, topo.CreateOp("d/a", []byte("new")), topo.IfVersion("d/b", v0))
	require.True(t, fired, "the Txn sent one multi: nothing tested")
	if err == nil {
		return // applied after the other client's write: true at that instant
	}
	te, ok := errors.AsType[*topo.TxnError](err)
	require.Truef(t, ok, "not a TxnError: %v", err)
	require.Truef(t, te.Index == 0 && topo.IsErrType(err, topo.NodeExists),
		"the Txn named op %d (%v): true at no instant (a's CreateOp failed first before the other client's write, nothing after)", te.Index, err)
}

// TestTxnNamesFirstFailingOpPinned: with no other writer, a Txn whose
// first multi fails at a condition sends that op again after the others
// (see TestTxnNamesFailingOpOfOneInstant) and names the first failing op
// in the caller's order, writing nothing.
func TestTxnNamesFirstFailingOpPinned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := openConn(t, []string{testServer}, freshRoot(t))
	_, err := c.Create(ctx, "d/exists", []byte("x"))
	require.NoError(t, err)
	v0, err := c.Create(ctx, "d/b", []byte("b0"))
	require.NoError(t, err)
	v1, err := c.Update(ctx, "d/b", []byte("b1"), v0)
	require.NoError(t, err)
	vc, err := c.Create(ctx, "d/c", []byte("c"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		ops   []topo.TxnOp
		index int
		code  topo.ErrorCode
	}{
		{"write passes, condition fails", []topo.TxnOp{topo.CreateOp("d/new", []byte("n")), topo.IfVersion("d/b", v0)}, 1, topo.BadVersion},
		{"write fails first", []topo.TxnOp{topo.CreateOp("d/exists", []byte("n")), topo.IfVersion("d/b", v0)}, 0, topo.NodeExists},
		{"later write fails too", []topo.TxnOp{topo.IfVersion("d/c", vc), topo.CreateOp("d/new", []byte("n")),
			topo.IfVersion("d/b", v0), topo.CreateOp("d/exists", []byte("n"))}, 2, topo.BadVersion},
		{"absent", []topo.TxnOp{topo.CreateOp("d/new", []byte("n")), topo.IfPresent("d/absent")}, 1, topo.NoNode},
		{"passes", []topo.TxnOp{topo.IfVersion("d/b", v1), topo.CreateOp("d/new2", []byte("n"))}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Txn(ctx, tc.ops...)
			if tc.index < 0 {
				require.NoError(t, err)
				return
			}
			te, ok := errors.AsType[*topo.TxnError](err)
			require.Truef(t, ok, "not a TxnError: %v", err)
			require.Equal(t, tc.index, te.Index, "%v", err)
			require.Truef(t, topo.IsErrType(err, tc.code), "%v", err)
			_, _, err = c.Get(ctx, "d/new")
			require.Truef(t, topo.IsErrType(err, topo.NoNode), "the failed Txn wrote: %v", err)
		})
	}
}
