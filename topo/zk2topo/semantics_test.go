package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// hangGuard bounds how long a call that must return on its own may take
// before the test declares it hung (not a timing assertion: far above any
// legitimate duration).
const hangGuard = 2 * time.Minute

// TestNestedElectionsIndependent: elections "svc" and
// "svc/0" (whose directory sorts before any candidate of svc) are
// independent.
func TestNestedElectionsIndependent(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	inner, err := c.NewLeaderParticipation("svc/0", "inner")
	require.NoError(t, err)
	defer inner.Stop()
	_, err = inner.WaitForLeadership()
	require.NoError(t, err)

	outer, err := c.NewLeaderParticipation("svc", "outer")
	require.NoError(t, err)
	defer outer.Stop()
	led := make(chan error, 1)
	go func() { _, err := outer.WaitForLeadership(); led <- err }()
	select {
	case err := <-led:
		require.NoError(t, err)
	case <-time.After(hangGuard):
		t.Fatal("svc's candidate waits behind svc/0's directory")
	}
	id, err := outer.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "outer", id)
	id, err = inner.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "inner", id)

	// svc's leader stream never names svc/0's candidates.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := outer.WaitForNewLeader(wctx)
	require.NoError(t, err)
	recvID := func() string {
		select {
		case id := <-ch:
			return id
		case <-time.After(hangGuard):
			t.Fatal("WaitForNewLeader sent nothing")
			return ""
		}
	}
	require.Equal(t, "outer", recvID())
	outer.Stop()
	// WaitForNewLeader is a view of Observe: ids only, never "" (nobody
	// leads), and never svc/0's candidate: svc's next leader is next.
	outer2, err := c.NewLeaderParticipation("svc", "outer2")
	require.NoError(t, err)
	defer outer2.Stop()
	_, err = outer2.WaitForLeadership()
	require.NoError(t, err)
	require.Equal(t, "outer2", recvID())
	id, err = inner.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "inner", id)
}

// TestPermissionDeniedIsPermanent: without the digest
// credential, watches, locks and leadership waits fail with
// PermissionDenied instead of retrying.
func TestPermissionDeniedIsPermanent(t *testing.T) {
	root := freshRoot(t)
	ctx := t.Context()
	owner, err := NewConn(Options{Servers: []string{testServer}, Auth: "digest:alice:secret", ACL: zk.AuthACL(zk.PermAll)}, root)
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.Create(ctx, "private/d/f", []byte("x"))
	require.NoError(t, err)
	p, err := owner.NewLeaderParticipation("e", "alice")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)

	other := openConn(t, []string{testServer}, root)
	calls := map[string]func() error{
		"Watch": func() error { _, _, err := other.Watch(ctx, "private/d/f"); return err },
		"WatchRecursive": func() error {
			_, _, err := other.WatchRecursive(ctx, "private/")
			return err
		},
		"Lock":    func() error { _, err := other.Lock(ctx, "private/d", "x"); return err },
		"TryLock": func() error { _, err := other.TryLock(ctx, "private/d", "x"); return err },
		"WaitForLeadership": func() error {
			q, err := other.NewLeaderParticipation("e", "mallory")
			if err != nil {
				return err
			}
			defer q.Stop()
			_, err = q.WaitForLeadership()
			return err
		},
		"Update": func() error { _, err := other.Update(ctx, "private/d/f", []byte("y"), nil); return err },
		"Delete": func() error { return other.Delete(ctx, "private/d/f", nil) },
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			require.ErrorIsf(t, err, topo.PermissionDenied, "%s without the credential", name)
		case <-time.After(hangGuard):
			t.Fatalf("%s retries a permission refusal", name)
		}
	}
}

// TestLockWaiterSessionEnds: a Lock waiter whose
// session ends returns LockLost, without its context ending.
func TestLockWaiterSessionEnds(t *testing.T) {
	root := freshRoot(t)
	holder := openConn(t, []string{testServer}, root)
	waiter := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	defer func() { _ = l.Unlock(ctx) }()

	done := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(ctx, "d", "waiter")
		done <- err
	}()
	raw := rawConn(t)
	require.Eventually(t, func() bool {
		ch, _, err := raw.Children(root + "/d/locks")
		return err == nil && len(ch) == 2
	}, time.Minute, 5*time.Millisecond)
	expireSession(t, waiter, testServer)
	select {
	case err := <-done:
		require.ErrorIs(t, err, topo.LockLost)
	case <-time.After(hangGuard):
		t.Fatal("the waiter stays blocked after its session ended")
	}
}

// TestPartitionedHolderStepsDown: a lock holder
// and leader cut off by a blackholing proxy has given up both (Check says
// LockLost, the leadership context is cancelled) by the time another
// client gets the lock or the leadership.
func TestPartitionedHolderStepsDown(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConn(t, root)
	b := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := a.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "A")
	require.NoError(t, err)
	require.NoError(t, la.Check(ctx))
	pa, err := a.NewLeaderParticipation("e", "A")
	require.NoError(t, err)
	defer pa.Stop()
	lctxA, err := pa.WaitForLeadership()
	require.NoError(t, err)

	pb, err := b.NewLeaderParticipation("e", "B")
	require.NoError(t, err)
	defer pb.Stop()
	type won struct {
		leaderDone bool
		check      error
		err        error
	}
	leader := make(chan won, 1)
	go func() {
		_, err := pb.WaitForLeadership()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer ccancel()
		leader <- won{leaderDone: lctxA.Err() != nil, check: la.Check(cctx), err: err}
	}()
	locked := make(chan won, 1)
	go func() {
		lb, err := b.Lock(ctx, "d", "B")
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Millisecond)
		defer ccancel()
		w := won{leaderDone: lctxA.Err() != nil, check: la.Check(cctx), err: err}
		if err == nil {
			defer func() { _ = lb.Unlock(ctx) }()
		}
		locked <- w
	}()

	proxy.Blackhole()
	for _, ch := range []chan won{leader, locked} {
		w := <-ch
		require.NoError(t, w.err)
		require.True(t, w.leaderDone, "A still led when B won")
		require.ErrorIs(t, w.check, topo.LockLost, "A's Check when B won")
	}
	proxy.Heal()
}

// TestReservedNames: the ZooKeeper backend applies the shared
// reserved-name rule, and List reports foreign znodes at reserved paths.
func TestReservedNames(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for _, p := range []string{"d/locks/x", "d/Lock", "elections/x", "a/locks"} {
		_, err := c.Create(ctx, p, []byte("x"))
		require.ErrorIsf(t, err, topo.InvalidPath, "Create(%q)", p)
		require.Equal(t, backendkit.CheckReserved(p).Error(), err.Error())
		_, err = c.Update(ctx, p, []byte("x"), nil)
		require.ErrorIsf(t, err, topo.InvalidPath, "Update(%q)", p)
		require.ErrorIsf(t, c.Delete(ctx, p, nil), topo.InvalidPath, "Delete(%q)", p)
	}
	_, err = c.Lock(ctx, "d/locks", "x")
	require.ErrorIs(t, err, topo.InvalidPath)
	_, err = c.LockName(ctx, "x/Lock", "x")
	require.ErrorIs(t, err, topo.InvalidPath)
	_, err = c.NewLeaderParticipation("svc/locks", "x")
	require.ErrorIs(t, err, topo.InvalidPath)

	// A foreign file under d/locks, and a held lock (never a file).
	raw := rawConn(t)
	_, err = raw.Create(root+"/d/locks", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = raw.Create(root+"/d/locks/cfg", []byte("foreign"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	defer func() { _ = l.Unlock(ctx) }()
	kvs, err := c.List(ctx, "d/")
	require.ErrorIs(t, err, topo.PartialResult)
	var rf *topo.ReservedFilesError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"d/locks/cfg"}, rf.Paths)
	require.Len(t, kvs, 1)
	require.Equal(t, "d/f", kvs[0].Path)
}

// TestLinearizableReadsOnFollower: on a 3-node
// ensemble, Gets through a Conn on a follower, each started after an
// Update (through another Conn, on the leader) returned, never miss it
// with Options.LinearizableReads.
func TestLinearizableReadsOnFollower(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	follower := (leader + 1) % 3
	root := freshRoot(t)
	writer, err := NewConn(Options{Servers: []string{e.Addr(leader)}, SessionTimeout: 20 * time.Second, DialTimeout: time.Minute}, root)
	require.NoError(t, err)
	defer writer.Close()
	reader, err := NewConn(Options{Servers: []string{e.Addr(follower)}, SessionTimeout: 20 * time.Second, DialTimeout: time.Minute, LinearizableReads: true}, root)
	require.NoError(t, err)
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = writer.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	stale := 0
	for i := 1; i <= 1000; i++ {
		want := fmt.Sprint(i)
		_, err := writer.Update(ctx, "f", []byte(want), nil)
		require.NoError(t, err)
		got, _, err := reader.Get(ctx, "f")
		require.NoError(t, err)
		if string(got) != want {
			stale++
		}
	}
	require.Zero(t, stale, "stale reads out of 1000")
}

// TestReadYourWritesAcrossSessions: a Conn whose session expired after
// it wrote, and whose new session lands on a follower that was paused
// (lagging) during the writes, still reads its last acknowledged write,
// without LinearizableReads.
func TestReadYourWritesAcrossSessions(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	lagging := (leader + 1) % 3
	var target atomic.Value
	target.Store(e.Addr(leader))
	dial := func(network, _ string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout(network, target.Load().(string), timeout)
	}
	root := freshRoot(t)
	c, err := NewConn(Options{Servers: []string{"127.0.0.1:1"}, SessionTimeout: 20 * time.Second, Dialer: dial}, root)
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)

	require.NoError(t, e.Pause(lagging))
	resumed := false
	defer func() {
		if !resumed {
			_ = e.Resume(lagging)
		}
	}()
	last := ""
	for i := 1; i <= 100; i++ {
		last = fmt.Sprint(i)
		_, err := c.Update(ctx, "f", []byte(last), nil)
		require.NoError(t, err)
	}
	expireSession(t, c, e.Addr(leader))
	target.Store(e.Addr(lagging))
	require.NoError(t, e.Resume(lagging))
	resumed = true
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, last, string(got), "the new session read older data than the Conn's acknowledged write")
}

// TestCheckNeedsConnection: while the lock's session
// is disconnected, Check does not say nil (it answers at once, without
// waiting for the network); once reconnected with the session intact, it
// says nil again.
func TestCheckNeedsConnection(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConnOpts(t, root, Options{SessionTimeout: 20 * time.Second})
	ctx := t.Context()
	_, err := a.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := a.Lock(ctx, "d", "A")
	require.NoError(t, err)
	require.NoError(t, l.Check(ctx))
	s := a.cur
	proxy.Blackhole()
	proxy.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, time.Minute, time.Millisecond)
	require.ErrorIs(t, l.Check(context.Background()), topo.Unavailable, "Check while disconnected")
	proxy.Heal()
	require.Eventually(t, func() bool { return l.Check(ctx) == nil }, time.Minute, 10*time.Millisecond)
	require.False(t, s.isLost(), "the session survived the short disconnection")
	require.NoError(t, l.Unlock(ctx))
}
