package etcd2topo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestNativeIfHeld: IfHeld on a native term works in Conn.Txn, through
// the term's Conn and another, across a Proclaim, and fails with
// LockLost (writing nothing) once the term ended.
func TestNativeIfHeld(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	c := openConn(t, serverAddr, root)
	other := openConn(t, serverAddr, root)
	p := native(t, c, nativePrefix(), "tk")
	_, err := p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfHeld(term), topo.CreateOp("f", []byte("1")))
	require.NoError(t, err)
	require.NoError(t, p.Proclaim(ctx, []byte("w")))
	_, err = other.Txn(ctx, topo.IfHeld(term), topo.UpdateOp("f", []byte("2"), nil))
	require.NoError(t, err, "IfHeld holds across a Proclaim and from another Conn")
	_, err = c.Txn(ctx, topo.IfPresent("f"), topo.IfHeld(term), topo.UpdateOp("f", []byte("3"), nil))
	require.NoError(t, err)
	require.NoError(t, p.Resign(ctx))
	_, err = other.Txn(ctx, topo.IfPresent("f"), topo.IfHeld(term), topo.UpdateOp("f", []byte("4"), nil))
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Index)
	require.True(t, topo.IsErrType(err, topo.LockLost), "%v", err)
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "3", string(got))
}

// TestNativeIfHeldSharedRead: when a Txn's IfHeld names a native term
// whose key is also a file of the Conn (the election's prefix, chosen
// through another Conn, is inside this Conn's root), the one failure read
// of that key includes its value whichever op comes first, so the term's
// lease is seen (etcd 3.7 leaves it out of keys-only reads) and the op
// that failed is named: here the IfAbsent, not the IfHeld. Run against
// etcd 3.7 (TOPOKIT_ETCDTEST_SERVER=v3.7.3) to see the difference.
func TestNativeIfHeldSharedRead(t *testing.T) {
	ctx := testCtx(t)
	a := openConn(t, serverAddr, newRoot())
	rootB := newRoot()
	b := openConn(t, serverAddr, rootB)
	p := native(t, a, rootB+"/x", "tk")
	_, err := p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	entries, err := b.ListDir(ctx, "x", false)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	_, err = b.Create(ctx, "other", []byte("1"))
	require.NoError(t, err)

	_, err = b.Txn(ctx, topo.IfPresent("x/"+entries[0].Name), topo.IfHeld(term), topo.IfAbsent("other"))
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 2, te.Index, "%v", err)
	require.True(t, topo.IsErrType(err, topo.NodeExists), "%v", err)
}
