package test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// RequireLossEndsClaims checks, for a backend's own tests, that declaring
// a session or lease lost ends every claim on it before the declaration
// returns. On conn, whose root must be empty, it writes d/f, holds the
// lock on d (its Done channel taken), leads election e through
// WaitForLeadership and election v through Campaign, and calls
// declareLost, which must declare lost, through the backend's internals,
// every session or lease of conn (what the backend does when its store
// says the session expired, or when it gives a lease up). The moment
// declareLost returns, with no wait, it requires the lock's Done closed,
// both leadership contexts cancelled and both terms' Done closed; then
// the lock's Check must report LockLost. It stops both participations
// before it returns; closing conn is the caller's. Failures go to t.
//
// A backend that ends the claims from goroutines a moment after the
// declaration leaves a window in which Check says LockLost (and a
// successor may hold) while the old holder's Done or context says it
// still holds; this check catches that in most calls, so call it in a
// loop (20 rounds catch it reliably). The shared suite cannot reach a
// backend's internals, and its ExpireSession checks see such a window
// only under load.
func RequireLossEndsClaims(t *testing.T, conn topo.Conn, declareLost func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), longWait)
	defer cancel()
	_, err := conn.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := conn.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	done := ld.Done()
	p, err := conn.NewLeaderParticipation("e", "leader")
	require.NoError(t, err)
	defer p.Stop()
	lead, err := p.WaitForLeadership()
	require.NoError(t, err)
	leadTerm, err := p.Term()
	require.NoError(t, err)
	vp, err := conn.NewLeaderParticipation("v", "leader")
	require.NoError(t, err)
	defer vp.Stop()
	campaigned, err := vp.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	campaignTerm, err := vp.Term()
	require.NoError(t, err)

	declareLost()
	for what, ch := range map[string]<-chan struct{}{
		"lock's Done":                   done,
		"WaitForLeadership context":     lead.Done(),
		"WaitForLeadership term's Done": leadTerm.Done(),
		"Campaign context":              campaigned.Done(),
		"Campaign term's Done":          campaignTerm.Done(),
	} {
		select {
		case <-ch:
		default:
			require.FailNowf(t, "a claim outlived its session", "the %s is still open the moment its session or lease was declared lost", what)
		}
	}
	requireCode(t, ld.Check(ctx), topo.LockLost, "Check after the session or lease was declared lost")
}
