package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// runBounded runs r until it returns, failing the test if it has not
// returned within 10 s (a generous bound, not a timing assertion); ctx is
// cancelled on the way out.
func runBounded(t *testing.T, r *election.Runner) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		require.FailNow(t, "Run kept retrying a permanent error")
		return nil
	}
}

// TestRunnerStopsOnPermissionDenied: a store that refuses the candidacy
// with PermissionDenied ends Run with that error after one attempt, instead
// of backing off and retrying forever.
func TestRunnerStopsOnPermissionDenied(t *testing.T) {
	mf := memorytopo.NewFactory()
	conn, err := mf.NewConn("denied", "/global")
	require.NoError(t, err)
	defer conn.Close()
	e, err := topoFactory(t, conn, "a").NewElection(t.Context(), "denied")
	require.NoError(t, err)
	defer e.Close(context.Background())

	mf.AddFault(memorytopo.Fault{Op: memorytopo.OpWaitForLeadership, Err: topo.PermissionDenied})
	r := &election.Runner{
		Election:       e,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     time.Millisecond,
		Work: func(context.Context) error {
			t.Error("Work ran without mastership")
			return nil
		},
	}
	err = runBounded(t, r)
	require.ErrorIs(t, err, topo.PermissionDenied)
	require.EqualValues(t, 1, mf.CallCount(memorytopo.OpWaitForLeadership), "a denied campaign was retried")
}

// TestRunnerStopsOnPermissionDeniedFromWork: Work failing with
// PermissionDenied (its writes are refused) ends Run, whether Work returns
// while still master or after mastership ended.
func TestRunnerStopsOnPermissionDeniedFromWork(t *testing.T) {
	for _, lose := range []bool{false, true} {
		mf := memorytopo.NewFactory()
		conn, err := mf.NewConn("work", "/global")
		require.NoError(t, err)
		e, err := topoFactory(t, conn, "a").NewElection(t.Context(), "work")
		require.NoError(t, err)

		var terms atomic.Int32
		r := &election.Runner{
			Election:       e,
			InitialBackoff: time.Millisecond,
			MaxBackoff:     time.Millisecond,
			Work: func(mctx context.Context) error {
				terms.Add(1)
				denied := &topo.Error{Code: topo.PermissionDenied, Path: "w", Err: errors.New("write refused")}
				if lose {
					conn.ExpireSession()
					<-mctx.Done()
				}
				return denied
			},
		}
		err = runBounded(t, r)
		require.ErrorIs(t, err, topo.PermissionDenied, "lose=%v", lose)
		require.EqualValues(t, 1, terms.Load(), "lose=%v", lose)
		require.NoError(t, e.Close(context.Background()))
		conn.Close()
	}
}

// TestIsPermanentCodes pins the classification Runner uses by default.
func TestIsPermanentCodes(t *testing.T) {
	for _, c := range []topo.ErrorCode{topo.PermissionDenied, topo.Closed, topo.InvalidArgument, topo.InvalidPath, topo.NoImplementation} {
		require.True(t, election.IsPermanent(topo.NewError(c, "e")), "%v", c)
	}
	for _, c := range []topo.ErrorCode{topo.Unavailable, topo.Timeout, topo.Interrupted, topo.LockLost, topo.ResourceExhausted} {
		require.False(t, election.IsPermanent(topo.NewError(c, "e")), "%v", c)
	}
	require.False(t, election.IsPermanent(nil))
}
