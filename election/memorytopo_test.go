package election_test

import (
	"context"
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func TestHarnessOnMemorytopo(t *testing.T) {
	mf := memorytopo.NewFactory()
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		conn, err := mf.Create(topo.GlobalCell, "election-test", "/global")
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		return topoFactory(t, conn, id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			f.(*election.TopoFactory).Conn().(*memorytopo.Conn).ExpireSession()
		},
	})
}

// TestMemorytopoLeaseLapse checks that a lapsed lease (the process froze and
// stopped renewing its session) cancels the mastership context and hands
// mastership over, and that Leader and WatchLeader follow.
func TestMemorytopoLeaseLapse(t *testing.T) {
	mf := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newElection := func(id string) (*election.TopoElection, *memorytopo.Conn) {
		conn, err := mf.NewConn("lapse", "/global")
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		e, err := topoFactory(t, conn, id).NewTopoElection(ctx, "lapse")
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e, conn
	}
	a, aconn := newElection("a")
	b, _ := newElection("b")

	leaders, err := b.WatchLeader(ctx)
	require.NoError(t, err)
	id, err := b.Leader(ctx)
	require.NoError(t, err)
	require.Empty(t, id)

	require.NoError(t, a.Await(ctx))
	require.Equal(t, "a", <-leaders)
	mctx, err := a.WithMastership(ctx)
	require.NoError(t, err)
	bdone := make(chan error, 1)
	go func() { bdone <- b.Await(ctx) }()

	aconn.PauseKeepAlive()
	select {
	case <-mctx.Done():
	case <-ctx.Done():
		require.FailNow(t, "the lapsed lease did not end the mastership")
	}
	require.ErrorIs(t, context.Cause(mctx), topo.LockLost)
	require.NoError(t, <-bdone)
	require.Equal(t, "b", <-leaders)
	id, err = a.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", id)
}
