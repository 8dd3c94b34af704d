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
