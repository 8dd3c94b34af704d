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
	const sessionTTL = time.Second // what a partitioned Conn's session lapses after
	mf := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: sessionTTL})
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		conn, err := mf.Create(topo.GlobalCell, "election-test", "/global")
		require.NoError(t, err)
		t.Cleanup(conn.Close)
		return topoFactory(t, conn, id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			f.(*election.TopoFactory).Conn().(*memorytopo.Conn).ExpireSession()
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			conn, err := mf.NewConn("election-test", "/global")
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return electiontest.Partitioned{Factory: topoFactory(t, conn, id), Cut: conn.Partition, Heal: conn.Heal}
		},
		SessionBound: sessionTTL,
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

// TestRunnerRetriesStoreOutage runs a Runner on memorytopo while the store
// fails every campaign with Unavailable: the Runner keeps retrying with
// backoff instead of quitting, and becomes master once the outage ends.
func TestRunnerRetriesStoreOutage(t *testing.T) {
	mf := memorytopo.NewFactory()
	conn, err := mf.NewConn("outage", "/global")
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := topoFactory(t, conn, "a").NewElection(ctx, "outage")
	require.NoError(t, err)
	defer e.Close(context.Background())

	const failures = 5
	mf.AddFault(memorytopo.Fault{Op: memorytopo.OpWaitForLeadership, Err: topo.Unavailable, Times: failures})
	runCtx, stop := context.WithCancel(ctx)
	mastered := make(chan struct{})
	r := &election.Runner{
		Election:       e,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     10 * time.Millisecond,
		Work: func(mctx context.Context) error {
			close(mastered)
			<-mctx.Done()
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	select {
	case <-mastered:
	case err := <-done:
		require.FailNow(t, "Run returned during the outage", "%v", err)
	case <-ctx.Done():
		require.FailNow(t, "never became master after the outage")
	}
	require.GreaterOrEqual(t, mf.CallCount(memorytopo.OpWaitForLeadership), int64(failures+1))
	stop()
	require.NoError(t, <-done)
}
