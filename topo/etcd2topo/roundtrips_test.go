package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestRoundTrips: every Conn operation sends etcd at most the requests
// docs/roundtrips.md's etcd table gives it (unary calls and watches
// created, counted by a gRPC interceptor; see storeCounter), on a Conn
// whose shared lease is granted already. An operation that starts a
// watch in the background (a term's, a lock's Done) is counted once that
// watch is created.
func TestRoundTrips(t *testing.T) {
	table := test.RoundTripLimits(t, "../../docs/roundtrips.md", "etcd")
	var sc storeCounter
	root := newRoot()
	o := testOptions(serverAddr)
	o.LockTTL = 30 * time.Second // no lapse under load
	o.dialOptions = sc.dialOptions()
	c, err := NewConn(o, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	// other is uncounted; its lease is as long as c's, so that under load
	// neither lapses (a lapsed holder's entry going first would let "Lock
	// after a wait" be granted without waiting).
	oo := testOptions(serverAddr)
	oo.LockTTL = o.LockTTL
	other, err := NewConn(oo, root)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	ctx := context.Background()
	seen := map[string]bool{}
	count := func(op string, f func()) {
		t.Helper()
		want, ok := table[op]
		require.Truef(t, ok, "docs/roundtrips.md has no etcd row %q", op)
		seen[op] = true
		before := sc.reqs.Load()
		f()
		// Requests sent in the background are the operation's too.
		require.Eventuallyf(t, func() bool { return sc.reqs.Load()-before >= want }, 30*time.Second, time.Millisecond,
			"%s: %d requests, the table says %d", op, sc.reqs.Load()-before, want)
		require.LessOrEqualf(t, sc.reqs.Load()-before, want, "%s sends more requests than docs/roundtrips.md says", op)
	}

	// Files.
	var v topo.Version
	count("Create", func() { v, err = c.Create(ctx, "d/f", []byte("x")); require.NoError(t, err) })
	count("Get", func() { _, v, err = c.Get(ctx, "d/f"); require.NoError(t, err) })
	count("GetVersion", func() { _, err = c.GetVersion(ctx, "d/f", 1); require.Error(t, err) })
	count("Update with version", func() { v, err = c.Update(ctx, "d/f", []byte("y"), v); require.NoError(t, err) })
	count("Update without version", func() { v, err = c.Update(ctx, "d/f", []byte("z"), nil); require.NoError(t, err) })
	count("List", func() { _, err = c.List(ctx, "d/"); require.NoError(t, err) })
	count("ListDir", func() { _, err = c.ListDir(ctx, "d", false); require.NoError(t, err) })
	count("ListDir full", func() { _, err = c.ListDir(ctx, "d", true); require.NoError(t, err) })
	count("Txn", func() {
		_, err = c.Txn(ctx, topo.IfPresent("d/f"), topo.CreateOp("d/g", nil))
		require.NoError(t, err)
	})
	_, gv, err := c.Get(ctx, "d/g")
	require.NoError(t, err)
	count("Delete with version", func() { require.NoError(t, c.Delete(ctx, "d/g", gv)) })
	count("Delete without version", func() { require.NoError(t, c.Delete(ctx, "d/f", nil)) })
	_, err = c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	wctx, wcancel := context.WithCancel(ctx)
	count("Watch", func() { _, _, err = c.Watch(wctx, "d/f"); require.NoError(t, err) })
	count("WatchRecursive", func() { _, _, err = c.WatchRecursive(wctx, "d"); require.NoError(t, err) })
	wcancel()

	// Locks. The first lock grants the Conn's shared lease.
	ld, err := c.Lock(ctx, "d", "me")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
	count("Lock", func() { ld, err = c.Lock(ctx, "d", "me"); require.NoError(t, err) })
	count("Check", func() { require.NoError(t, ld.Check(ctx)) })
	count("Done", func() { _ = ld.Done() })
	count("TryLock, held by this Conn", func() { _, err = c.TryLock(ctx, "d", "me2"); require.ErrorIs(t, err, topo.NodeExists) })
	count("Unlock", func() { require.NoError(t, ld.Unlock(ctx)) })
	held, err := other.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	count("TryLock, held", func() { _, err = c.TryLock(ctx, "d", "me"); require.ErrorIs(t, err, topo.NodeExists) })
	require.NoError(t, held.Unlock(ctx))
	count("TryLock", func() { ld, err = c.TryLock(ctx, "d", "me"); require.NoError(t, err) })
	require.NoError(t, ld.Unlock(ctx))
	count("LockWithTTL", func() { ld, err = c.LockWithTTL(ctx, "d", "me", time.Minute); require.NoError(t, err) })
	count("Unlock of a lease of its own", func() { require.NoError(t, ld.Unlock(ctx)) })
	count("LockName", func() { ld, err = c.LockName(ctx, "d", "me"); require.NoError(t, err) })
	require.NoError(t, ld.Unlock(ctx))
	count("Lock after a wait", func() {
		held, err := other.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		start := sc.reqs.Load()
		got := make(chan error, 1)
		go func() {
			var err error
			ld, err = c.Lock(ctx, "d", "me")
			got <- err
		}()
		// The holder lets go once the Lock waits for it: once the Lock
		// has sent its Txn, the Range of the entries ahead and, that Range
		// having shown the holder, the holder's watch. Its entry in the
		// store is not enough: a Range that comes after the Unlock (the
		// waiter descheduled under load) finds nobody ahead and is
		// granted at once, with 2 requests.
		require.Eventually(t, func() bool { return sc.reqs.Load()-start >= 3 }, time.Minute, time.Millisecond,
			"the Lock behind a holder never watched it")
		require.NoError(t, held.Unlock(ctx))
		require.NoError(t, <-got)
	})
	require.NoError(t, ld.Unlock(ctx))

	// Elections.
	p, err := c.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	var lctx context.Context
	count("WaitForLeadership", func() { lctx, err = p.WaitForLeadership(); require.NoError(t, err) })
	count("First look at a term", func() { require.NoError(t, lctx.Err()) })
	count("Proclaim", func() { require.NoError(t, p.Proclaim(ctx, []byte("v"))) })
	count("Leader", func() { _, err = p.Leader(ctx); require.NoError(t, err) })
	count("GetCurrentLeaderID", func() { _, err = p.GetCurrentLeaderID(ctx); require.NoError(t, err) })
	octx, ocancel := context.WithCancel(ctx)
	var observed <-chan topo.Leader
	var newLeaders <-chan string
	count("Observe", func() { observed, err = p.Observe(octx); require.NoError(t, err) })
	count("WaitForNewLeader", func() { newLeaders, err = p.WaitForNewLeader(octx); require.NoError(t, err) })
	ocancel()
	// Both end in the background: wait until they have (their channels
	// close), so that nothing they send lands in a later count.
	for range observed {
	}
	for range newLeaders {
	}
	count("ResumeInfo", func() { _, err = p.ResumeInfo(); require.NoError(t, err) })
	count("Resign", func() { require.NoError(t, p.Resign(ctx)) })
	count("Campaign", func() { _, err = p.Campaign(ctx, []byte("v")); require.NoError(t, err) })
	count("Stop", func() { p.Stop() })

	for op := range table {
		require.Truef(t, seen[op], "docs/roundtrips.md's etcd row %q is not checked", op)
	}
}
