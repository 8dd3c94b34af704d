package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo"
)

// topoFactory returns a TopoFactory over conn for instanceID.
func topoFactory(t *testing.T, conn topo.Conn, instanceID string) *election.TopoFactory {
	t.Helper()
	f, err := election.NewTopoFactory(conn, instanceID)
	require.NoError(t, err)
	return f
}

// fakeSessionBound is the fake store's session timeout in
// TestHarnessOnFake's partitions.
const fakeSessionBound = 100 * time.Millisecond

func TestHarnessOnFake(t *testing.T) {
	store := election.NewFakeStore()
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		return topoFactory(t, store.Conn(), id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			f.(*election.TopoFactory).Conn().(*election.FakeConn).ExpireSession()
		},
		// The fake store has no network: a partition makes the session's
		// leaders step down and the store drop the session a session
		// timeout (fakeSessionBound) later.
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			conn := store.Conn()
			return electiontest.Partitioned{
				Factory: topoFactory(t, conn, id),
				Cut:     func() { conn.Partition(fakeSessionBound) },
				Heal:    func() {},
			}
		},
		SessionBound: fakeSessionBound,
	})
}

func TestNewTopoFactoryRejectsBadArguments(t *testing.T) {
	_, err := election.NewTopoFactory(nil, "a")
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = election.NewTopoFactory(election.NewFakeStore().Conn(), "")
	require.ErrorIs(t, err, topo.InvalidArgument)

	f := topoFactory(t, election.NewFakeStore().Conn(), "a")
	_, err = f.NewElection(context.Background(), "")
	require.ErrorIs(t, err, topo.InvalidArgument)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = f.NewElection(ctx, "r")
	require.ErrorIs(t, err, topo.Interrupted)
}

func TestAwaitReturnsStoreErrorAndRetries(t *testing.T) {
	store := election.NewFakeStore()
	f := topoFactory(t, store.Conn(), "a")
	ctx := context.Background()
	e, err := f.NewElection(ctx, "r")
	require.NoError(t, err)
	defer e.Close(ctx)

	store.FailNext(1, topo.NewError(topo.Unavailable, "r"))
	require.ErrorIs(t, e.Await(ctx), topo.Unavailable)
	require.NoError(t, e.Await(ctx), "Await after a failed campaign starts a new one")
}

func TestAwaitCampaignsAgainAfterLoss(t *testing.T) {
	store := election.NewFakeStore()
	conn := store.Conn()
	f := topoFactory(t, conn, "a")
	ctx := context.Background()
	e, err := f.NewTopoElection(ctx, "r")
	require.NoError(t, err)
	defer e.Close(ctx)

	require.NoError(t, e.Await(ctx))
	mctx, err := e.WithMastership(ctx)
	require.NoError(t, err)
	conn.ExpireSession()
	<-mctx.Done()
	require.ErrorIs(t, context.Cause(mctx), topo.LockLost)

	require.NoError(t, e.Await(ctx), "a lost mastership is won again by Await")
	mctx, err = e.WithMastership(ctx)
	require.NoError(t, err)
	require.NoError(t, mctx.Err())
	id, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", id)
	require.NoError(t, e.Resign(ctx))
	require.ErrorIs(t, context.Cause(mctx), topo.Interrupted)
	require.Equal(t, 0, store.Candidates("r"))
}

func TestRunnerRetriesTransientErrors(t *testing.T) {
	store := election.NewFakeStore()
	f := topoFactory(t, store.Conn(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := f.NewElection(ctx, "r")
	require.NoError(t, err)
	defer e.Close(context.Background())

	store.FailNext(3, topo.NewError(topo.Unavailable, "r"))
	var terms atomic.Int32
	r := &election.Runner{
		Election:       e,
		InitialBackoff: 1,
		MaxBackoff:     1,
		Work: func(mctx context.Context) error {
			switch terms.Add(1) {
			case 1:
				// A failing term: the Runner resigns and tries again.
				return errors.New("work failed")
			case 2:
				// A term that ends with the loss of mastership.
				cancel()
			}
			<-mctx.Done()
			return mctx.Err()
		},
	}
	require.NoError(t, r.Run(ctx))
	require.Equal(t, int32(2), terms.Load())
	require.Equal(t, 0, store.Candidates("r"), "Run resigns on exit")
}

func TestRunnerStopsOnPermanentError(t *testing.T) {
	store := election.NewFakeStore()
	f := topoFactory(t, store.Conn(), "a")
	ctx := context.Background()
	e, err := f.NewElection(ctx, "r")
	require.NoError(t, err)
	require.NoError(t, e.Close(ctx))

	r := &election.Runner{Election: e, Work: func(context.Context) error { return nil }}
	require.ErrorIs(t, r.Run(ctx), topo.Closed)
	require.ErrorIs(t, (&election.Runner{}).Run(ctx), topo.InvalidArgument)
}

func TestRunnerRecampaignsAfterLoss(t *testing.T) {
	store := election.NewFakeStore()
	conn := store.Conn()
	f := topoFactory(t, conn, "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := f.NewElection(ctx, "r")
	require.NoError(t, err)
	defer e.Close(context.Background())

	var terms atomic.Int32
	r := &election.Runner{
		Election: e,
		Work: func(mctx context.Context) error {
			if terms.Add(1) == 1 {
				conn.ExpireSession()
			} else {
				cancel()
			}
			<-mctx.Done()
			return nil
		},
	}
	require.NoError(t, r.Run(ctx))
	require.Equal(t, int32(2), terms.Load())
}
