package claims_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// TestHooksSeeEveryCall: Count sees each call first, a call with bad
// arguments included; Enter sees it once its arguments are checked, and
// its error ends the call before the driver is asked (Resign still ends
// the candidacy); Stop ends an Enter that blocks WaitForLeadership.
func TestHooksSeeEveryCall(t *testing.T) {
	ctx := t.Context()
	s := newStore()
	var counted, entered []claims.Call
	var fail error
	hooks := claims.Hooks{
		Count: func(c claims.Call) { counted = append(counted, c) },
		Enter: func(ctx context.Context, c claims.Call, path string) error {
			entered = append(entered, c)
			if c == claims.CallWaitForLeadership && fail == errBlock {
				<-ctx.Done()
				return ctx.Err()
			}
			return fail
		},
	}
	e := claims.New(&driver{s: s}, claims.Options{Hooks: hooks})

	_, err := e.Lock(ctx, "d/locks", "x") // reserved: InvalidPath
	require.Error(t, err)
	ld, err := e.LockName(ctx, "d", "x")
	require.NoError(t, err)
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))
	require.Equal(t, []claims.Call{claims.CallLock, claims.CallLockName, claims.CallCheck, claims.CallUnlock}, counted)
	require.Equal(t, []claims.Call{claims.CallLockName, claims.CallCheck, claims.CallUnlock}, entered)

	counted, entered = nil, nil
	p, err := e.NewLeaderParticipation("e", "a")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	fail = topo.NewError(topo.Unavailable, "e")
	_, err = p.Leader(ctx)
	require.ErrorIs(t, err, fail)
	require.ErrorIs(t, p.Resign(ctx), fail)
	_, err = p.Term() // the candidacy ended all the same
	require.True(t, topo.IsErrType(err, topo.NotLeader))
	require.Equal(t, []claims.Call{claims.CallNewLeaderParticipation, claims.CallWaitForLeadership, claims.CallLeader, claims.CallResign}, counted)
	require.Equal(t, counted, entered)

	fail = errBlock
	got := make(chan error, 1)
	go func() { _, err := p.WaitForLeadership(); got <- err }()
	p.Stop()
	require.True(t, topo.IsErrType(<-got, topo.Interrupted))
}

var errBlock = errors.New("block until stopped")
