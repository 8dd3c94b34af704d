package test

import (
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testTermGuardsAcrossValues: a leadership term keeps guarding writes
// across Proclaim and Campaign while leading (which publish a value, not
// a new term): its Token is unchanged and IfHeld(term) holds; after
// Resign it is refused with LockLost, and a new Campaign's term has a
// greater token and guards again while the earlier term stays refused.
func testTermGuardsAcrossValues(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, r := s.conn(), s.conn()
	mustCreate(t, ctx, r, "g/data", "0")
	p := participate(t, c, "elec", "id1")
	campaign(t, ctx, p, "v1")
	term, err := p.Term()
	require.NoError(t, err)
	tok := term.Token()
	guarded := func(f topo.Fence, what string) {
		t.Helper()
		_, err := topo.GuardedUpdate(ctx, c, f, "g/data", []byte(what), nil)
		require.NoError(t, err, what)
		requireFile(t, ctx, r, "g/data", what, nil)
	}
	guarded(term, "leading")
	require.NoError(t, p.Proclaim(ctx, []byte("v2")))
	guarded(term, "after Proclaim")
	_, err = p.Campaign(ctx, []byte("v3"))
	require.NoError(t, err)
	guarded(term, "after Campaign while leading")
	t2, err := p.Term()
	require.NoError(t, err)
	require.Equal(t, tok, t2.Token(), "the term's token after Proclaim and Campaign")
	guarded(t2, "Term() again")

	require.NoError(t, p.Resign(ctx))
	before := takeSnapshot(t, ctx, r)
	_, err = topo.GuardedUpdate(ctx, c, term, "g/data", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost, "a guarded write of a resigned term")
	requireSameSnapshot(t, ctx, r, before, "a guarded write of a resigned term")

	campaign(t, ctx, p, "v4")
	t3, err := p.Term()
	require.NoError(t, err)
	require.Greater(t, t3.Token(), tok, "a new term's token")
	guarded(t3, "a new term")
	_, err = topo.GuardedUpdate(ctx, c, term, "g/data", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost, "a guarded write of the earlier term while a new one leads")
}
