package memorytopo_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// TestRoundTrips: every Conn operation makes at most the store requests
// (acquisitions of the store's lock, the in-process round trip) that
// docs/roundtrips.md gives it, and every operation there is measured.
func TestRoundTrips(t *testing.T) {
	ctx := testCtx(t)
	table := test.RoundTripLimits(t, "../../docs/roundtrips.md", "memorytopo")
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	count, reset := memorytopo.CountRequests(c)
	measured := map[string]bool{}
	measure := func(op string, do func()) {
		t.Helper()
		reset()
		do()
		n, _ := count()
		want, ok := table[op]
		require.True(t, ok, "%s is not in docs/roundtrips.md", op)
		t.Logf("%s: %d store requests (table: %d)", op, n, want)
		require.LessOrEqual(t, n, want, "%s: store requests", op)
		measured[op] = true
	}
	must := func(err error) {
		t.Helper()
		require.NoError(t, err)
	}
	v, err := c.Create(ctx, "d/f", []byte("x"))
	must(err)
	_, err = c.Update(ctx, "d/f", []byte("y"), v)
	must(err)

	measure("Get", func() { _, _, err := c.Get(ctx, "d/f"); must(err) })
	measure("GetVersion", func() { _, err := c.GetVersion(ctx, "d/f", int64(v.(topo.NumericVersion))); must(err) })
	measure("Create", func() { _, err := c.Create(ctx, "d/g", nil); must(err) })
	measure("Update", func() { _, err := c.Update(ctx, "d/g", []byte("z"), nil); must(err) })
	measure("Update of a new file", func() { _, err := c.Update(ctx, "d/h", nil, nil); must(err) })
	measure("Delete", func() { must(c.Delete(ctx, "d/h", nil)) })
	measure("ListDir", func() { _, err := c.ListDir(ctx, "d", true); must(err) })
	measure("List", func() { _, err := c.List(ctx, "d/"); must(err) })
	measure("Txn", func() {
		_, err := c.Txn(ctx, topo.IfPresent("d/f"), topo.UpdateOp("d/g", nil, nil), topo.CreateOp("d/t", nil))
		must(err)
	})
	wctx, stop := context.WithCancel(ctx)
	var watches sync.WaitGroup
	measure("Watch", func() {
		_, ch, err := c.Watch(wctx, "d/f")
		must(err)
		watches.Go(func() {
			for range ch {
			}
		})
	})
	measure("WatchRecursive", func() {
		_, ch, err := c.WatchRecursive(wctx, "d/")
		must(err)
		watches.Go(func() {
			for range ch {
			}
		})
	})
	stop()
	watches.Wait()

	var ld topo.LockDescriptor
	measure("Lock", func() { ld, err = c.Lock(ctx, "d", "x"); must(err) })
	measure("Check", func() { must(ld.Check(ctx)) })
	measure("Unlock", func() { must(ld.Unlock(ctx)) })
	measure("TryLock", func() { ld, err = c.TryLock(ctx, "d", "x"); must(err) })
	must(ld.Unlock(ctx))
	measure("LockWithTTL", func() { ld, err = c.LockWithTTL(ctx, "d", "x", waitLimit); must(err) })
	must(ld.Unlock(ctx))
	measure("LockName", func() { ld, err = c.LockName(ctx, "n", "x"); must(err) })
	must(ld.Unlock(ctx))
	// Lock after a wait: a Lock behind a holder, parked on it, granted by
	// its Unlock (one request, its own row, left out of this one).
	holder, err := c.Lock(ctx, "d", "h")
	must(err)
	reset()
	got := make(chan error, 1)
	go func() {
		wld, err := c.Lock(ctx, "d", "w")
		if err == nil {
			ld = wld
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return memorytopo.Awaited(c, "d") == 1 }, waitLimit, poll)
	must(holder.Unlock(ctx))
	must(<-got)
	n, _ := count()
	n-- // the holder's Unlock
	t.Logf("Lock after a wait: %d store requests (table: %d)", n, table["Lock after a wait"])
	require.LessOrEqual(t, n, table["Lock after a wait"], "Lock after a wait: store requests")
	measured["Lock after a wait"] = true
	must(ld.Unlock(ctx))

	var p topo.LeaderParticipation
	measure("NewLeaderParticipation", func() { p, err = c.NewLeaderParticipation("e", "a"); must(err) })
	measure("WaitForLeadership", func() { _, err := p.WaitForLeadership(); must(err) })
	measure("Proclaim", func() { must(p.Proclaim(ctx, []byte("v"))) })
	measure("Leader", func() { _, err := p.Leader(ctx); must(err) })
	measure("GetCurrentLeaderID", func() { _, err := p.GetCurrentLeaderID(ctx); must(err) })
	octx, ostop := context.WithCancel(ctx)
	var leaders <-chan topo.Leader
	var ids <-chan string
	measure("Observe", func() { leaders, err = p.Observe(octx); must(err) })
	measure("WaitForNewLeader", func() { ids, err = p.WaitForNewLeader(octx); must(err) })
	ostop()
	for range leaders { // closed once the stream noticed ostop
	}
	for range ids {
	}
	info, err := p.ResumeInfo()
	must(err)
	c2 := newConn(t, f)
	var p2 topo.LeaderParticipation
	measure("ResumeLeaderParticipation", func() { p2, err = c2.ResumeLeaderParticipation(ctx, "e", "a", info); must(err) })
	measure("Resign", func() { must(p2.Resign(ctx)) })
	measure("Campaign", func() { _, err := p2.Campaign(ctx, []byte("w")); must(err) })
	measure("Stop", func() { p2.Stop() })
	for op := range table {
		require.True(t, measured[op], "%s is in docs/roundtrips.md but not measured", op)
	}
}
