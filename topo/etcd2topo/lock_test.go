package etcd2topo

import (
	"context"
	"path"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestLockOutlivesCallerContext: a lock taken with a 1 s context is renewed
// by the Conn, not by the caller's context: once the Conn has had a
// renewal of the lock's own lease acknowledged after the context ended,
// and the moment etcd would have expired the lease unrenewed has passed,
// another client's TryLock still fails and Check is nil. Unlock then
// revokes the lock's own lease.
//
// The test waits for the renewal, not for a time: the lease's TTL (9 s)
// only bounds how long the keep-alives may stall under load before the
// Conn gives the lock up (TTL minus SafetyMargin minus the renewal
// interval: about 4 s). With 3 s (1.4 s of slack) a loaded CI machine
// lost the lease now and then. The other client uses the default
// LockTTL for the same reason: its TryLock puts an entry on its own
// shared lease, and a 3 s one given up mid-request failed the TryLock
// with LockLost ("requested lease not found").
func TestLockOutlivesCallerContext(t *testing.T) {
	const lockTTL = 9 * time.Second
	root := newRoot()
	// The default LockTTL (30 s) differs from lockTTL, so the lock gets a
	// lease of its own.
	open := func() *Conn {
		c, err := NewConn(Options{Endpoints: []string{serverAddr}}, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	c1, c2 := open(), open()
	bg := context.Background()
	_, err := c1.Create(bg, "d/f", []byte("x"))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	ld, err := c1.LockWithTTL(ctx, "d", "holder", lockTTL)
	require.NoError(t, err)
	// etcd applied the grant before LockWithTTL returned: unrenewed, the
	// lease would be gone by unrenewedBy.
	unrenewedBy := time.Now().Add(lockTTL)
	l := entryBehind(t, ld).lease
	<-ctx.Done()
	atCtxEnd := l.provenUntil()

	// Poll until a renewal was acknowledged after the context ended and
	// unrenewedBy has passed; at every poll the lock must still be held.
	var tryErr, checkErr error
	require.Eventually(t, func() bool {
		_, tryErr = c2.TryLock(bg, "d", "other")
		checkErr = ld.Check(bg)
		if !topo.IsErrType(tryErr, topo.NodeExists) || checkErr != nil {
			return true // stop polling: the lock was lost
		}
		return l.provenUntil().After(atCtxEnd) && time.Now().After(unrenewedBy)
	}, 60*time.Second, 200*time.Millisecond)
	require.ErrorIs(t, tryErr, topo.NodeExists, "another client's TryLock while held")
	require.NoError(t, checkErr, "Check while held")

	id := l.id
	require.NoError(t, ld.Unlock(bg))
	ttl, err := rawClient(t, serverAddr).TimeToLive(bg, id)
	require.NoError(t, err)
	require.EqualValues(t, -1, ttl.TTL, "Unlock must revoke the lock's own lease")
	l2, err := c2.TryLock(bg, "d", "other")
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(bg))
}

// TestLeaseRevokedBehindHolder: revoking a holder's lease with another
// client makes Check and Unlock report LockLost and lets another client
// take the lock; the holder's Conn then grants itself a new lease for its
// next lock.
func TestLeaseRevokedBehindHolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		lock func(c *Conn, ctx context.Context) (topo.LockDescriptor, error)
	}{
		{"Lock", func(c *Conn, ctx context.Context) (topo.LockDescriptor, error) { return c.Lock(ctx, "d", "holder") }},
		{"LockName", func(c *Conn, ctx context.Context) (topo.LockDescriptor, error) { return c.LockName(ctx, "d", "holder") }},
		{"LockWithTTL", func(c *Conn, ctx context.Context) (topo.LockDescriptor, error) {
			return c.LockWithTTL(ctx, "d", "holder", 7*time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot()
			c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
			ctx := context.Background()
			_, err := c1.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			ld, err := tc.lock(c1, ctx)
			require.NoError(t, err)
			require.NoError(t, ld.Check(ctx))

			_, err = rawClient(t, serverAddr).Revoke(ctx, entryBehind(t, ld).lease.id)
			require.NoError(t, err)

			require.ErrorIs(t, ld.Check(ctx), topo.LockLost)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l2, err := c2.Lock(wctx, "d", "other")
			require.NoError(t, err)
			require.ErrorIs(t, ld.Unlock(ctx), topo.LockLost)
			require.NoError(t, l2.Check(ctx))
			require.NoError(t, l2.Unlock(ctx))

			// The holder's Conn recovers: its next lock works at once.
			l3, err := tc.lock(c1, wctx)
			require.NoError(t, err)
			require.NoError(t, l3.Check(ctx))
			require.NoError(t, l3.Unlock(ctx))
		})
	}
}

// TestLockKeyDeletedBehindHolder: deleting the lock key itself (the lease
// stays) makes Check and Unlock report LockLost.
func TestLockKeyDeletedBehindHolder(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	_, err = rawClient(t, serverAddr).Delete(ctx, entryBehind(t, ld).key)
	require.NoError(t, err)
	require.ErrorIs(t, ld.Check(ctx), topo.LockLost)
	require.ErrorIs(t, ld.Unlock(ctx), topo.LockLost)
	require.ErrorIs(t, ld.Unlock(ctx), topo.Interrupted)
}

// TestLockLayout: the lock is a leased key under <root>/<dir>/locks/
// holding the contents, as Vitess lays it out; a waiter's key is younger.
func TestLockLayout(t *testing.T) {
	root := newRoot()
	c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	ctx := context.Background()
	_, err := c1.Create(ctx, "a/b/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c1.Lock(ctx, "a/b", "holder info")
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		l2, err := c2.Lock(ctx, "a/b", "waiter info")
		if err == nil {
			err = l2.Unlock(ctx)
		}
		got <- err
	}()

	cli := rawClient(t, serverAddr)
	var resp *clientv3.GetResponse
	require.Eventually(t, func() bool {
		resp, err = cli.Get(ctx, root+"/a/b/locks/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		return err == nil && len(resp.Kvs) == 2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "holder info", string(resp.Kvs[0].Value))
	require.NotZero(t, resp.Kvs[0].Lease)
	require.Equal(t, "waiter info", string(resp.Kvs[1].Value))
	require.NotZero(t, resp.Kvs[1].Lease)

	require.NoError(t, ld.Unlock(ctx))
	require.NoError(t, <-got)
	resp, err = cli.Get(ctx, root+"/a/b/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Empty(t, resp.Kvs)
}

// TestElectionLayout: candidates are leased keys under
// <root>/elections/<name>/ valued with the participant id.
func TestElectionLayout(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	p, err := c.NewLeaderParticipation("svc", "me")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	ctx := context.Background()
	resp, err := rawClient(t, serverAddr).Get(ctx, root+"/elections/svc/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "me", string(resp.Kvs[0].Value))
	require.NotZero(t, resp.Kvs[0].Lease)
}

// TestElectionAfterLeaseRevoked: revoking the shared lease ends the
// leadership; the same Conn can campaign again at once, on a new lease.
func TestElectionAfterLeaseRevoked(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	p, err := c.NewLeaderParticipation("svc", "me")
	require.NoError(t, err)
	defer p.Stop()
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range c.leaseIDs() {
		_, err := rawClient(t, serverAddr).Revoke(ctx, id)
		require.NoError(t, err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("leadership context not cancelled after the lease was revoked")
	}
	p2, err := c.NewLeaderParticipation("svc", "me again")
	require.NoError(t, err)
	defer p2.Stop()
	l2, err := p2.WaitForLeadership()
	require.NoError(t, err)
	require.NoError(t, l2.Err())
	id, err := p2.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "me again", id)
}

// TestStopAfterClose: Stop after the Conn's Close has nothing left to
// remove (Close revoked the lease) and returns without asking etcd; the
// participation then reports Closed.
func TestStopAfterClose(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	p, err := c.NewLeaderParticipation("svc", "me")
	require.NoError(t, err)
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	c.Close()
	<-lctx.Done()
	p.Stop()
	_, err = p.WaitForLeadership()
	require.ErrorIs(t, err, topo.Closed)
}

// TestLockKeyNamesReused: a Conn names a lock entry after its lease, in
// decimal, as Vitess does, and reuses the name once the key is gone (fresh
// names would pile up in etcd's index until compaction); a second live
// entry under the same directory goes on a second shared lease (which
// its Unlock keeps for the next), so every entry is named exactly after
// its lease.
func TestLockKeyNamesReused(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	l1, err := c.Lock(ctx, "d", "first")
	require.NoError(t, err)
	cl1 := entryBehind(t, l1)
	k1 := cl1.key
	require.Equal(t, strconv.FormatInt(int64(cl1.lease.id), 10), path.Base(k1))

	got := make(chan topo.LockDescriptor, 1)
	go func() {
		l2, err := c.Lock(ctx, "d", "second")
		assert.NoError(t, err)
		got <- l2
	}()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.keysInUse) == 2
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, l1.Unlock(ctx))
	l2 := <-got
	cl2 := entryBehind(t, l2)
	require.False(t, cl2.own, "a second entry of one queue goes on a second shared lease")
	require.NotEqual(t, cl1.lease.id, cl2.lease.id)
	require.Equal(t, path.Dir(k1)+"/"+strconv.FormatInt(int64(cl2.lease.id), 10), cl2.key)
	require.NoError(t, l2.Unlock(ctx))
	require.False(t, cl2.lease.lost(), "Unlock keeps a shared lease")

	l3, err := c.Lock(ctx, "d", "third")
	require.NoError(t, err)
	require.Equal(t, k1, entryBehind(t, l3).key, "the name is reused")
	require.NoError(t, l3.Unlock(ctx))
	c.mu.Lock()
	require.Empty(t, c.keysInUse, "every name is freed")
	c.mu.Unlock()
}
