package test

import (
	"fmt"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testFenceOtherConn: a claim guards transactions of another Conn of the
// same store while held, and is refused there once ended by Unlock, by
// its session's expiry or by its Conn's Close (lock and term alike).
func testFenceOtherConn(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	r := s.conn()
	mustCreate(t, ctx, r, "d/f", "x")
	v := mustCreate(t, ctx, r, "d/data", "v0")
	for i, end := range []string{"Unlock", "ExpireSession", "Close"} {
		a, b := s.conn(), s.conn()
		l := mustLock(t, ctx, a, "d", "a")
		p := participate(t, a, fmt.Sprintf("el%d", i), "a")
		_, err := p.WaitForLeadership()
		require.NoError(t, err)
		term, err := p.Term()
		require.NoError(t, err)
		for _, f := range []topo.Fence{l, term} {
			nv, err := topo.GuardedUpdate(ctx, b, f, "d/data", []byte("b"), v)
			require.NoErrorf(t, err, "a guarded write of another Conn while the claim is held")
			v = nv
		}
		switch end {
		case "Unlock":
			require.NoError(t, l.Unlock(ctx))
			p.Stop()
		case "ExpireSession":
			s.opts.ExpireSession(t, a)
		case "Close":
			a.Close()
		}
		before := takeSnapshot(t, ctx, r)
		for j, f := range []topo.Fence{l, term} {
			_, err := topo.GuardedUpdate(ctx, b, f, "d/data", []byte("stale"), nil)
			requireTxnErr(t, err, 0, topo.LockLost, fmt.Sprintf("a guarded write of another Conn after %s (fence %d)", end, j))
			_, err = b.Txn(ctx, topo.IfPresent("d/data"), topo.IfHeld(f), topo.CreateOp("stale", nil))
			requireTxnErr(t, err, 1, topo.LockLost, fmt.Sprintf("an IfHeld Txn of another Conn after %s (fence %d)", end, j))
		}
		requireSameSnapshot(t, ctx, r, before, "guarded writes of a claim that ended")
		if end != "Unlock" {
			// The lock is free for another holder.
			l2 := mustLock(t, ctx, b, "d", "b")
			require.NoError(t, l2.Unlock(ctx))
		}
	}
}
