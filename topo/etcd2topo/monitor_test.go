package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// closesWithin fails t unless done closes within d.
func closesWithin(t *testing.T, done <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not close", what)
	}
}

// lastBeforeClose reads ch until it closes, within d, and returns the
// last value it sent (the zero value if none).
func lastBeforeClose[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	var last T
	timeout := time.After(d)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return last
			}
			last = v
		case <-timeout:
			t.Fatalf("%s did not close", what)
		}
	}
}

// TestClaimEndsWhenItsKeyChanges: a claim's Done closes, without any call
// of the holder, when another client deletes its key or rewrites it on
// the same lease (Vitess layout), or deletes a native term's key; the
// lease stays alive, so only the Monitor's watch can end the claim.
func TestClaimEndsWhenItsKeyChanges(t *testing.T) {
	ctx := context.Background()
	raw := rawClient(t, serverAddr)
	// lock takes a lock on d through a Conn of its own.
	lock := func(t *testing.T) topo.LockDescriptor {
		c := openConn(t, serverAddr, newRoot())
		_, err := c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		ld, err := c.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		return ld
	}
	t.Run("LockKeyDeleted", func(t *testing.T) {
		ld := lock(t)
		_, err := raw.Delete(ctx, entryBehind(t, ld).key)
		require.NoError(t, err)
		closesWithin(t, ld.(topo.Fence).Done(), 30*time.Second, "the lock's Done")
		require.ErrorIs(t, ld.Unlock(ctx), topo.LockLost)
	})
	t.Run("LockKeyRewrittenOnItsLease", func(t *testing.T) {
		ld := lock(t)
		e := entryBehind(t, ld)
		_, err := raw.Put(ctx, e.key, "someone", clientv3.WithLease(e.lease.id))
		require.NoError(t, err)
		closesWithin(t, ld.(topo.Fence).Done(), 30*time.Second, "the lock's Done")
	})
	t.Run("NativeTermKeyDeleted", func(t *testing.T) {
		c := openConn(t, serverAddr, newRoot())
		p := native(t, c, newRoot()+"/native", "me")
		lctx, err := p.Campaign(ctx, []byte("v1"))
		require.NoError(t, err)
		// A Proclaim rewrites the key on the same lease: the term goes on.
		require.NoError(t, p.Proclaim(ctx, []byte("v2")))
		term, err := p.Term()
		require.NoError(t, err)
		_, err = raw.Delete(ctx, entryBehind(t, p).key)
		require.NoError(t, err)
		closesWithin(t, lctx.Done(), 30*time.Second, "the leadership context")
		closesWithin(t, term.Done(), 30*time.Second, "the term's Done")
	})
}

// TestClaimEndsWhenItsDeletionWasCompacted: a lock whose key is deleted
// while its Conn's only member is away, the deletion compacted before the
// member returns, ends (its Monitor's watch cannot resume and re-reads
// the key); a lock on the same lease whose key is untouched stays held
// through the same re-read. A Watch of a file deleted meanwhile ends the
// same way, with NoNode.
func TestClaimEndsWhenItsDeletionWasCompacted(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	root := newRoot()
	opts := testOptions(cl.Addr(0))
	opts.LockTTL = time.Minute // both locks on one shared lease that outlives the restart
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := context.Background()
	for _, f := range []string{"gone/f", "kept/f"} {
		_, err := c.Create(ctx, f, []byte("x"))
		require.NoError(t, err)
	}
	gone, err := c.Lock(ctx, "gone", "holder")
	require.NoError(t, err)
	kept, err := c.Lock(ctx, "kept", "holder")
	require.NoError(t, err)
	require.Equal(t, entryBehind(t, gone).lease.id, entryBehind(t, kept).lease.id)
	_, wch, err := c.Watch(ctx, "gone/f")
	require.NoError(t, err)

	cl.StopMember(0)
	raw := rawClient(t, cl.Addr(1)+","+cl.Addr(2))
	_, err = raw.Delete(ctx, entryBehind(t, gone).key)
	require.NoError(t, err)
	_, err = raw.Delete(ctx, root+"/gone/f")
	require.NoError(t, err)
	resp, err := raw.Put(ctx, root+"/other", "x")
	require.NoError(t, err)
	_, err = raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	cl.RestartMember(0)

	closesWithin(t, gone.(topo.Fence).Done(), 40*time.Second, "the deleted lock's Done")
	last := lastBeforeClose(t, wch, 40*time.Second, "the Watch")
	require.NotNil(t, last)
	require.ErrorIs(t, last.Err, topo.NoNode, "the Watch of the deleted file")
	// kept's Monitor re-read its key through the same restart; a write
	// after the restart, seen by the Conn, orders the check after it.
	_, err = c.Update(ctx, "kept/f", []byte("y"), nil)
	require.NoError(t, err)
	require.NoError(t, kept.Check(ctx))
	select {
	case <-kept.(topo.Fence).Done():
		t.Fatal("the untouched lock ended")
	default:
	}
	require.NoError(t, kept.Unlock(ctx))
}

// TestCloseEndsWatchesAndClaims: Close ends every live watch (Watch and
// WatchRecursive channels close after an Interrupted error), ends the
// Conn's locks and revokes their leases in etcd at once.
func TestCloseEndsWatchesAndClaims(t *testing.T) {
	root := newRoot()
	c, err := NewConn(testOptions(serverAddr), root)
	require.NoError(t, err)
	ctx := context.Background()
	for _, f := range []string{"d/f", "e/f"} {
		_, err := c.Create(ctx, f, []byte("x"))
		require.NoError(t, err)
	}
	_, wch, err := c.Watch(ctx, "d/f")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "d/")
	require.NoError(t, err)
	shared, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	own, err := c.LockWithTTL(ctx, "e", "holder", 7*time.Second)
	require.NoError(t, err)
	ids := []clientv3.LeaseID{entryBehind(t, shared).lease.id, entryBehind(t, own).lease.id}

	c.Close()
	last := lastBeforeClose(t, wch, 10*time.Second, "the Watch")
	require.NotNil(t, last)
	require.ErrorIs(t, last.Err, topo.Interrupted)
	lastR := lastBeforeClose(t, rch, 10*time.Second, "the WatchRecursive")
	require.NotNil(t, lastR)
	require.ErrorIs(t, lastR.Err, topo.Interrupted)
	closesWithin(t, shared.(topo.Fence).Done(), 10*time.Second, "the shared-lease lock's Done")
	closesWithin(t, own.(topo.Fence).Done(), 10*time.Second, "the own-lease lock's Done")
	raw := rawClient(t, serverAddr)
	for _, id := range ids {
		ttl, err := raw.TimeToLive(ctx, id)
		require.NoError(t, err)
		require.EqualValues(t, -1, ttl.TTL, "Close must revoke lease %x", id)
	}
}

// TestCloseRevokesAResumedLease: a participation resumed on another Conn
// keeps its lease alive through that Conn, whose Close ends the term and
// revokes the lease in etcd.
func TestCloseRevokesAResumedLease(t *testing.T) {
	root := newRoot()
	ctx := context.Background()
	first := openConn(t, serverAddr, root)
	p, err := first.NewLeaderParticipation("svc", "me")
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	info, err := p.ResumeInfo()
	require.NoError(t, err)

	fresh, err := NewConn(testOptions(serverAddr), root)
	require.NoError(t, err)
	q, err := fresh.ResumeLeaderParticipation(ctx, "svc", "me", info)
	require.NoError(t, err)
	lctx, err := q.WaitForLeadership()
	require.NoError(t, err)
	id := entryBehind(t, q).lease.id
	require.Contains(t, fresh.leaseIDs(), id)

	fresh.Close()
	closesWithin(t, lctx.Done(), 10*time.Second, "the resumed leadership context")
	ttl, err := rawClient(t, serverAddr).TimeToLive(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, -1, ttl.TTL, "Close must revoke the resumed lease")
}
