package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestTxnRetryReadsOnce counts the requests of Txns whose first multi
// fails where only reads tell why, then succeed: between the two multis,
// one round of reads (every op's Stat and its ancestors', pipelined), and
// nothing else. txn.failed used to read the failing op's Stat and its
// ancestors first, which that round reads again: an UpdateOp of a file in
// two missing directories sent 4 reads more (10 requests), an IfAbsent
// below a missing directory 2 (8). The Txns' results and the store are as
// before.
func TestTxnRetryReadsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rc rtCounter
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: rc.dial}, freshRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.Create(ctx, "keep", []byte("k"))
	require.NoError(t, err)
	flush := func() { _, _, err := c.Get(ctx, "keep"); require.NoError(t, err) } // see TestRequestCounts
	flush()

	count := func(ops ...topo.TxnOp) ([]topo.Version, error, int64) {
		flush()
		n0 := rc.load()
		vs, err := c.Txn(ctx, ops...)
		flush()
		return vs, err, rc.load() - n0 - 1
	}

	// The setData fails (NoNode); then the Stats of n/m/f, n/m, n and the
	// root, and the multi creating the three.
	vs, err, n := count(topo.UpdateOp("n/m/f", []byte("u"), nil))
	require.NoError(t, err)
	require.Equal(t, []topo.Version{topo.NumericVersion(0)}, vs)
	require.Equal(t, int64(6), n, "requests of an UpdateOp of a file in two missing directories")
	data, _, err := c.Get(ctx, "n/m/f")
	require.NoError(t, err)
	require.Equal(t, "u", string(data))

	// The probe's create fails (NoNode); then the Stats of x/y, x, the
	// root and z, and the multi probing x and creating z.
	vs, err, n = count(topo.IfAbsent("x/y"), topo.CreateOp("z", []byte("z")))
	require.NoError(t, err)
	require.Len(t, vs, 2)
	require.Equal(t, int64(6), n, "requests of an IfAbsent below a missing directory")
	_, _, err = c.Get(ctx, "x/y")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)

	// The same failures before a failing condition: the same op and code.
	_, err, _ = count(topo.UpdateOp("p/q/f", []byte("u"), nil), topo.IfAbsent("keep"))
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Index)
	require.True(t, topo.IsErrType(te.Err, topo.NodeExists), "%v", err)
	_, _, err = c.Get(ctx, "p/q/f")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
}
