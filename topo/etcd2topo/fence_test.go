package etcd2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// waitClosed fails the test unless ch closes within a generous bound (a
// bound on a hang, not a timing assertion).
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what+": nil Done channel")
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(what + ": Done not closed")
	}
}

// requireOpen asserts that ch is not closed (now).
func requireOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what+": nil Done channel")
	select {
	case <-ch:
		t.Fatal(what + ": Done closed while held")
	default:
	}
}

// createRevision reads key's CreateRevision with the raw client.
func createRevision(t *testing.T, cli *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	return resp.Kvs[0].CreateRevision
}

// TestLockToken: every kind of lock carries the CreateRevision of its
// entry as its token, fixed while held; each later holder's is greater;
// Done stays open while held and closes on Unlock.
func TestLockToken(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	var last int64
	for name, lock := range map[string]func() (topo.LockDescriptor, error){
		"Lock":        func() (topo.LockDescriptor, error) { return c.Lock(ctx, "d", "me") },
		"TryLock":     func() (topo.LockDescriptor, error) { return c.TryLock(ctx, "d", "me") },
		"LockWithTTL": func() (topo.LockDescriptor, error) { return c.LockWithTTL(ctx, "d", "me", 9*time.Second) },
		"LockName":    func() (topo.LockDescriptor, error) { return c.LockName(ctx, "d", "me") },
	} {
		ld, err := lock()
		require.NoError(t, err, name)
		tok := ld.Token()
		require.Positive(t, tok, name)
		require.Greater(t, tok, last, name)
		require.Equal(t, createRevision(t, cli, entryBehind(t, ld).key), tok, name)
		requireOpen(t, ld.Done(), name)
		_, err = c.Update(ctx, "d/g", []byte("x"), nil) // revisions move on
		require.NoError(t, err)
		require.Equal(t, tok, ld.Token(), name)
		requireOpen(t, ld.Done(), name)
		require.NoError(t, ld.Unlock(ctx), name)
		waitClosed(t, ld.Done(), name)
		last = tok
	}
	// Done obtained only after Unlock is closed too.
	ld, err := c.Lock(ctx, "d", "me")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
	waitClosed(t, ld.Done(), "Done after Unlock")
}

// TestLockDoneOnLoss: Done closes when etcd drops the lock behind the
// holder: its lease revoked (as etcd's expiry would), its entry deleted
// (the lease stays: only a watch tells), whether Done was asked for
// before or after; and on the Conn's Close.
func TestLockDoneOnLoss(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	ctx := context.Background()
	// Each case locks a directory of its own.
	for _, d := range []string{"d1", "d2", "d3", "d4", "d5", "d6"} {
		_, err := c.Create(ctx, d+"/f", []byte("x"))
		require.NoError(t, err)
	}

	t.Run("lease revoked", func(t *testing.T) {
		ld, err := c.Lock(ctx, "d1", "me")
		require.NoError(t, err)
		done := ld.Done()
		requireOpen(t, done, "held")
		_, err = cli.Revoke(ctx, entryBehind(t, ld).lease.id)
		require.NoError(t, err)
		waitClosed(t, done, "lease revoked")
		require.ErrorIs(t, ld.Check(ctx), topo.LockLost)
	})
	t.Run("session expired", func(t *testing.T) {
		ld, err := c.Lock(ctx, "d2", "me")
		require.NoError(t, err)
		expireSession(t, c)
		waitClosed(t, ld.Done(), "session expired")
	})
	t.Run("entry deleted, Done before", func(t *testing.T) {
		ld, err := c.LockName(ctx, "d3", "me")
		require.NoError(t, err)
		done := ld.Done()
		requireOpen(t, done, "held")
		_, err = cli.Delete(ctx, entryBehind(t, ld).key)
		require.NoError(t, err)
		waitClosed(t, done, "entry deleted")
		require.ErrorIs(t, ld.Unlock(ctx), topo.LockLost)
	})
	t.Run("entry deleted, Done after", func(t *testing.T) {
		ld, err := c.Lock(ctx, "d4", "me")
		require.NoError(t, err)
		_, err = cli.Delete(ctx, entryBehind(t, ld).key)
		require.NoError(t, err)
		waitClosed(t, ld.Done(), "entry deleted")
	})
	t.Run("entry rewritten", func(t *testing.T) {
		ld, err := c.Lock(ctx, "d5", "me")
		require.NoError(t, err)
		done := ld.Done()
		requireOpen(t, done, "held")
		key := entryBehind(t, ld).key
		_, err = cli.Put(ctx, key, "someone", clientv3.WithLease(entryBehind(t, ld).lease.id))
		require.NoError(t, err)
		waitClosed(t, done, "entry rewritten")
	})
	t.Run("Close", func(t *testing.T) {
		c2 := openConn(t, serverAddr, root)
		ld, err := c2.Lock(ctx, "d6", "me")
		require.NoError(t, err)
		done := ld.Done()
		c2.Close()
		waitClosed(t, done, "Close")
	})
}

// TestTerm: Term is NotLeader until WaitForLeadership wins, then the same
// Fence for the whole term, its token the candidate entry's
// CreateRevision, greater for every later term whoever leads it; its Done
// closes and Term turns NotLeader when the term ends (Stop, the lease
// revoked), and Check says why.
func TestTerm(t *testing.T) {
	root := newRoot()
	c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	ctx := context.Background()

	p1, err := c1.NewLeaderParticipation("svc", "one")
	require.NoError(t, err)
	defer p1.Stop()
	_, err = p1.Term()
	require.ErrorIs(t, err, topo.NotLeader)
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	t1, err := p1.Term()
	require.NoError(t, err)
	again, err := p1.Term()
	require.NoError(t, err)
	require.Same(t, t1, again)
	require.Equal(t, createRevision(t, cli, entryBehind(t, p1).key), t1.Token())
	requireOpen(t, t1.Done(), "leading")
	require.NoError(t, t1.Check(ctx))

	p2, err := c2.NewLeaderParticipation("svc", "two")
	require.NoError(t, err)
	defer p2.Stop()
	led := make(chan error, 1)
	go func() { _, err := p2.WaitForLeadership(); led <- err }()
	_, err = p2.Term()
	require.ErrorIs(t, err, topo.NotLeader)

	p1.Stop()
	waitClosed(t, t1.Done(), "Stop")
	_, err = p1.Term()
	require.ErrorIs(t, err, topo.NotLeader)
	require.ErrorIs(t, t1.Check(ctx), topo.Interrupted)
	require.NoError(t, <-led)
	t2, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, t2.Token(), t1.Token())

	// The lease goes: the term ends, and the next one (same participant)
	// has a greater token.
	_, err = cli.Revoke(ctx, entryBehind(t, p2).lease.id)
	require.NoError(t, err)
	waitClosed(t, t2.Done(), "lease revoked")
	require.ErrorIs(t, t2.Check(ctx), topo.LockLost)
	_, err = p2.Term()
	require.ErrorIs(t, err, topo.NotLeader)
	_, err = p2.WaitForLeadership()
	require.NoError(t, err)
	t3, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, t3.Token(), t2.Token())
	require.NotSame(t, t2, t3)
}

// TestStaleGuardedWriteAfterExpiry (store-side session expiry): the
// holder's leases expire in etcd, a successor takes the lock (and the
// leadership); the old holder's guarded writes are refused with LockLost
// and none is applied, the successor's go through.
func TestStaleGuardedWriteAfterExpiry(t *testing.T) {
	root := newRoot()
	old, next := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := old.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	p, err := old.NewLeaderParticipation("svc", "old")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	v, err := topo.GuardedUpdate(ctx, old, ld, "d/f", []byte("old-1"), nil)
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, old, term, "g", []byte("old-1"), nil)
	require.NoError(t, err)

	expireSession(t, old)
	ld2, err := next.Lock(ctx, "d", "next")
	require.NoError(t, err)
	defer ld2.Unlock(ctx)
	p2, err := next.NewLeaderParticipation("svc", "next")
	require.NoError(t, err)
	defer p2.Stop()
	_, err = p2.WaitForLeadership()
	require.NoError(t, err)
	term2, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, ld2.Token(), ld.Token())
	require.Greater(t, term2.Token(), term.Token())

	for _, conn := range []*Conn{old, next} {
		_, err = topo.GuardedUpdate(ctx, conn, ld, "d/f", []byte("stale"), v)
		requireTxnErr(t, err, 0, topo.LockLost)
		_, err = topo.GuardedUpdate(ctx, conn, term, "g", []byte("stale"), nil)
		requireTxnErr(t, err, 0, topo.LockLost)
		requireTxnErr(t, topo.GuardedDelete(ctx, conn, ld, "d/f", nil), 0, topo.LockLost)
	}
	_, err = topo.GuardedUpdate(ctx, next, ld2, "d/f", []byte("next-1"), v)
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, next, term2, "g", []byte("next-1"), nil)
	require.NoError(t, err)
	for _, p := range []string{"d/f", "g"} {
		data, _, err := next.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "next-1", string(data), p)
	}
}

// TestStaleGuardedWriteAfterPartition (client-side partition): the
// holder is cut off from etcd (a blackholing proxy in front of its
// Conn) while a guarded write of it is in flight; etcd expires its lease
// and a successor takes the lock; the partition heals. The write in
// flight is not applied (whatever it returns), and every later guarded
// write of the old holder is refused with LockLost.
func TestStaleGuardedWriteAfterPartition(t *testing.T) {
	root := newRoot()
	old, px := proxiedConn(t, root)
	next := openConn(t, serverAddr, root)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := next.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, old, ld, "d/f", []byte("old-1"), nil)
	require.NoError(t, err)

	done := ld.Done()
	px.Blackhole()
	inFlight := make(chan error, 1)
	go func() {
		_, err := topo.GuardedUpdate(ctx, old, ld, "d/f", []byte("stale-in-flight"), nil)
		inFlight <- err
	}()
	ld2, err := next.Lock(ctx, "d", "next")
	require.NoError(t, err)
	defer ld2.Unlock(ctx)
	// Cut off, the holder learnt of the loss from its lease's timer.
	waitClosed(t, done, "partitioned holder")
	px.Heal()
	if err := <-inFlight; err == nil {
		t.Fatal("the stale holder's write in flight succeeded")
	} else {
		t.Logf("the write in flight returned: %v", err)
	}
	_, err = topo.GuardedUpdate(ctx, old, ld, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, next, ld2, "d/f", []byte("next-1"), nil)
	require.NoError(t, err)
	data, _, err := next.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "next-1", string(data))
	requireNoValue(t, next, root, "d/f", "stale-in-flight", "stale")
}

// requireNoValue asserts that no revision of path (in etcd's history,
// from the test's start) ever held one of values.
func requireNoValue(t *testing.T, c *Conn, root, path string, values ...string) {
	t.Helper()
	ctx := context.Background()
	resp, err := c.cli.Get(ctx, c.key(path))
	require.NoError(t, err)
	for rev := resp.Kvs[0].ModRevision; rev > 0; {
		r, err := c.cli.Get(ctx, c.key(path), clientv3.WithRev(rev))
		require.NoError(t, err)
		if len(r.Kvs) == 0 {
			break
		}
		for _, v := range values {
			require.NotEqual(t, v, string(r.Kvs[0].Value), "a stale write was applied at revision %d", rev)
		}
		if r.Kvs[0].Version == 1 {
			break
		}
		rev = r.Kvs[0].ModRevision - 1
	}
}

// TestStaleGuardedWritePausedHolder ("paused holder"): the holder sends
// nothing while its lease runs out in etcd (its Conn is blackholed) and a
// successor takes the lock; then, before it has noticed anything (its
// view of the lock is the one it had before the pause: held, the lease
// proven alive), it immediately tries a guarded write. etcd refuses it
// (LockLost): the store's compare, not the holder's belief, decides.
func TestStaleGuardedWritePausedHolder(t *testing.T) {
	root := newRoot()
	old, px := proxiedConn(t, root)
	next := openConn(t, serverAddr, root)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := next.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	held, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	// The holder's state as it was when it paused: a lease it believes
	// alive for another TTL.
	// (An acknowledged renewal an hour from now: the Conn proves the
	// lease alive for an hour, whatever etcd does meanwhile.)
	l := entryBehind(t, held).lease
	l.renewed(time.Now().Add(time.Hour), l.ttl)
	paused := held

	px.Blackhole()
	ld2, err := next.Lock(ctx, "d", "next")
	require.NoError(t, err)
	defer ld2.Unlock(ctx)
	px.Heal()
	_, err = topo.GuardedUpdate(ctx, old, paused, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	// Through the successor's Conn too.
	_, err = topo.GuardedUpdate(ctx, next, paused, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	data, _, err := next.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
}

// TestTokensIncreaseAcrossHandovers: over many handovers of one lock and
// one election among several Conns on a one-member cluster, with
// releases, lease losses (revoked in etcd), Conns closed and reopened,
// TryLock, and member restarts mixed in, every holder's (and term's)
// token is greater than every earlier one's.
func TestTokensIncreaseAcrossHandovers(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 1)
	ep := cluster.Endpoints()
	root := newRoot()
	cli := rawClient(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conns := make([]*Conn, 3)
	for i := range conns {
		conns[i] = openConn(t, ep, root)
	}
	// untilUp retries op while the member is restarting.
	untilUp := func(op func() error) {
		t.Helper()
		for {
			err := op()
			if err == nil {
				return
			}
			require.Truef(t, errors.Is(err, topo.Unavailable) || errors.Is(err, topo.Timeout) ||
				errors.Is(err, topo.LockLost) || errors.Is(err, topo.NotLeader), "unexpected error: %v", err)
			require.NoError(t, ctx.Err())
		}
	}
	untilUp(func() error {
		octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
		defer ocancel()
		_, err := conns[0].Create(octx, "d/f", []byte("x"))
		return err
	})
	restart := func() {
		cluster.StopMember(0)
		cluster.RestartMember(0)
	}

	var last int64
	for round := range 24 {
		c := conns[round%len(conns)]
		var ld topo.LockDescriptor
		untilUp(func() error {
			octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
			defer ocancel()
			var err error
			if round%4 == 3 {
				ld, err = c.TryLock(octx, "d", "holder")
			} else {
				ld, err = c.Lock(octx, "d", "holder")
			}
			return err
		})
		require.Greater(t, ld.Token(), last, "round %d", round)
		last = ld.Token()
		switch round % 6 {
		case 0, 3:
			require.NoError(t, ld.Unlock(ctx))
		case 1: // the lease lost in etcd
			_, err := cli.Revoke(ctx, entryBehind(t, ld).lease.id)
			require.NoError(t, err)
			waitClosed(t, ld.Done(), "lease revoked")
		case 2: // the holder's Conn closes; a new one takes its place
			i := round % len(conns)
			conns[i].Close()
			conns[i] = openConn(t, ep, root)
		case 4: // the member restarts under a held lock
			restart()
			// Unlock right after the restart may not reach etcd (it then
			// deletes the entry in the background) or find the lease
			// given up during the restart.
			if err := ld.Unlock(ctx); err != nil {
				require.Truef(t, errors.Is(err, topo.Unavailable) || errors.Is(err, topo.Timeout) ||
					errors.Is(err, topo.LockLost), "unexpected error: %v", err)
			}
		case 5: // the member restarts after the release
			require.NoError(t, ld.Unlock(ctx))
			restart()
		}
	}

	last = 0
	for round := range 12 {
		c := conns[round%len(conns)]
		// After a restart the Conn may declare its lease lost (its renewals
		// went unanswered for longer than the 3 s TTL allows) just after a
		// campaign on it succeeded: the term then ends at once, Term says
		// NotLeader, and the round campaigns again.
		var p topo.LeaderParticipation
		var term topo.Fence
		untilUp(func() error {
			var err error
			p, err = c.NewLeaderParticipation("svc", "p")
			require.NoError(t, err)
			if _, err = p.WaitForLeadership(); err == nil {
				term, err = p.Term()
			}
			if err != nil {
				p.Stop()
			}
			return err
		})
		require.Greater(t, term.Token(), last, "term %d", round)
		last = term.Token()
		switch round % 3 {
		case 0:
			p.Stop()
		case 1:
			_, err := cli.Revoke(ctx, entryBehind(t, p).lease.id)
			if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				// Not found: the Conn declared the lease lost and revoked
				// it itself (after an earlier restart); the term ends too.
				require.NoError(t, err)
			}
			waitClosed(t, term.Done(), "lease revoked")
			p.Stop()
		case 2:
			restart()
			p.Stop()
		}
	}
}
