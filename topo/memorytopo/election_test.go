package memorytopo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func TestElectionLayoutAndLeaderID(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	p1, err := c.NewLeaderParticipation("svc", "one")
	require.NoError(t, err)
	id, err := p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "", id)

	lctx, err := p1.WaitForLeadership()
	require.NoError(t, err)
	again, err := p1.WaitForLeadership()
	require.NoError(t, err)
	require.Equal(t, lctx, again, "the same context while leading")

	top, err := c.ListDir(ctx, "", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "elections", Type: topo.TypeDirectory, Ephemeral: true}}, top)
	names, err := c.ListDir(ctx, "elections", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "svc", Type: topo.TypeDirectory, Ephemeral: true}}, names)
	_, err = c.List(ctx, "")
	requireCode(t, err, topo.NoNode)

	id, err = p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", id)
	p1.Stop()
	p1.Stop()
	require.Error(t, lctx.Err())
	_, err = p1.WaitForLeadership()
	requireCode(t, err, topo.Interrupted)
	_, err = c.ListDir(ctx, "elections", false)
	requireCode(t, err, topo.NoNode)
}

func TestExpireSessionLeadership(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1, err := c1.NewLeaderParticipation("svc", "one")
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("svc", "two")
	require.NoError(t, err)

	ctx1, err := p1.WaitForLeadership()
	require.NoError(t, err)
	newLeaders, err := p2.WaitForNewLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", <-newLeaders)

	lead2 := make(chan context.Context, 1)
	go func() {
		lctx, err := p2.WaitForLeadership()
		if err != nil {
			lead2 <- nil
			return
		}
		lead2 <- lctx
	}()

	c1.ExpireSession()
	<-ctx1.Done()
	ctx2 := <-lead2
	require.NotNil(t, ctx2)
	require.NoError(t, ctx2.Err())
	require.Equal(t, "two", <-newLeaders)

	// p1 runs again under c1's new session and waits behind p2.
	lead1 := make(chan context.Context, 1)
	go func() {
		lctx, err := p1.WaitForLeadership()
		if err != nil {
			lead1 <- nil
			return
		}
		lead1 <- lctx
	}()
	require.Eventually(t, func() bool {
		es, err := c1.ListDir(ctx, "elections/svc", false)
		return err == nil && len(es) == 2
	}, waitLimit, poll)
	p2.Stop()
	require.Error(t, ctx2.Err())
	ctx1 = <-lead1
	require.NotNil(t, ctx1)
	require.Equal(t, "one", <-newLeaders)
	p1.Stop()
}

func TestWaitForNewLeaderCloses(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	p, err := c.NewLeaderParticipation("svc", "one")
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	ch, err := p.WaitForNewLeader(wctx)
	require.NoError(t, err)
	cancel()
	for range ch {
	}

	ch, err = p.WaitForNewLeader(ctx)
	require.NoError(t, err)
	c.Close()
	for range ch {
	}
	_, err = p.WaitForLeadership()
	requireCode(t, err, topo.Closed)
}

func TestStopWhileWaiting(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1, err := c1.NewLeaderParticipation("svc", "one")
	require.NoError(t, err)
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("svc", "two")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := p2.WaitForLeadership()
		done <- err
	}()
	p2.Stop()
	requireCode(t, <-done, topo.Interrupted)
	id, err := p1.GetCurrentLeaderID(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "one", id)
}

func TestElectionBadInput(t *testing.T) {
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.NewLeaderParticipation("", "id")
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.NewLeaderParticipation("name", "")
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.NewLeaderParticipation("a/../b", "id")
	requireCode(t, err, topo.InvalidPath)
}
