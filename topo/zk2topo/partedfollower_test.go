package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestHolderOnPartedFollowerGivesUpFirst: a lock holder and leader whose
// only server is a follower parted from the leader (the client and that
// follower on one side of a partition, the leader, the rest of the
// ensemble and a waiter on the other) must see its lock and its term end
// before the waiter is granted the lock and the other candidate leads. The follower keeps answering the holder's pings and reads from
// its own copy until it notices that its leader is gone, while the leader,
// hearing nothing of the session, expires it and hands the lock on: those
// answers prove nothing about the session's life on the leader.
func TestHolderOnPartedFollowerGivesUpFirst(t *testing.T) {
	e := zktest.StartEnsembleWithLinks(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	holder, waiter, f, l, granted := lockOnFollower(ctx, t, e, freshRoot(t), Options{})
	leader, err := holder.NewLeaderParticipation("e", "holder")
	require.NoError(t, err)
	defer leader.Stop()
	lctx, err := leader.WaitForLeadership()
	require.NoError(t, err)
	next, err := waiter.NewLeaderParticipation("e", "waiter")
	require.NoError(t, err)
	defer next.Stop()
	// What the other candidate's term found of the parted leader's, the
	// moment it began.
	type result struct {
		err    error
		parted bool // the parted leader's context still live
	}
	led := make(chan result, 1)
	go func() {
		_, err := next.WaitForLeadership()
		led <- result{err: err, parted: lctx.Err() == nil}
	}()
	require.Eventually(t, func() bool {
		es, err := driver{holder}.Describe(ctx, claims.Queue{Path: "d"})
		cs, cerr := driver{holder}.Describe(ctx, claims.Queue{Path: "e", Election: true})
		return err == nil && len(es) == 2 && cerr == nil && len(cs) == 2
	}, time.Minute, 10*time.Millisecond, "the waiters' entries never showed in the holder's follower")
	// The holder keeps reading, as a busy holder does; the follower
	// answers from its own copy while it still takes itself for one.
	reads, stopReads := context.WithCancel(ctx)
	defer stopReads()
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for reads.Err() == nil {
			rctx, rcancel := context.WithTimeout(reads, time.Second)
			_, _, _ = holder.Get(rctx, "d/f")
			rcancel()
			select {
			case <-tick.C:
			case <-reads.Done():
			}
		}
	}()
	requireGrantAfterCut(ctx, t, e, f, l, granted)
	var r result
	select {
	case r = <-led:
	case <-ctx.Done():
		t.Fatal("the other candidate never led after the parted leader's session ended")
	}
	require.NoError(t, r.err)
	require.False(t, r.parted, "the other candidate led while the parted leader's context was still live")
}

// TestIdleHolderOnPartedFollowerGivesUpFirst: an idle lock holder (only
// the client library's pings on the wire) whose follower is parted from
// the leader just after answering a ping must see its lock end before a
// waiter on the leader's side is granted it. The follower tells the
// leader which of its sessions were active only in its answers to the
// leader's pings (every half tick): the answered ping's own activity may
// never reach the leader, whose latest news of the session is then the
// ping before, one ping interval (a third of the session timeout) older.
func TestIdleHolderOnPartedFollowerGivesUpFirst(t *testing.T) {
	e := zktest.StartEnsembleWithLinks(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The library's pings alone: the Conn's own syncs, three times as
	// frequent, come well within the test servers' half tick of each other.
	holder, _, f, l, granted := lockOnFollower(ctx, t, e, freshRoot(t), Options{libraryPingsOnly: true})
	holder.mu.Lock()
	s := holder.cur
	holder.mu.Unlock()
	// Two pings answered while idle: the second's touch is the one cut off
	// before the follower reports it.
	for range 2 {
		before, _ := s.obs.lastProof()
		for p, _ := s.obs.lastProof(); p.Equal(before); p, _ = s.obs.lastProof() {
			time.Sleep(time.Millisecond) // polled: the cut must follow the answer closely
		}
	}
	requireGrantAfterCut(ctx, t, e, f, l, granted)
}

// TestDeniedWritesOnPartedFollowerProveNothing: a follower checking
// write permissions itself (enableEagerACLCheck) answers a denied write
// without the leader; a holder whose follower is parted from the leader
// and who keeps writing where it may not must still see its lock end
// before a waiter on the leader's side is granted it.
func TestDeniedWritesOnPartedFollowerProveNothing(t *testing.T) {
	e := zktest.StartEnsembleWithLinksConfig(t, 3, "enableEagerACLCheck=true\n")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	holder, _, f, l, granted := lockOnFollower(ctx, t, e, root, Options{})
	// The owner's ACL covers what it creates: "private" and its file.
	owner, err := NewConn(Options{Servers: []string{e.Addr(l)}, SessionTimeout: testSessionTimeout,
		Auth: "digest:alice:secret", ACL: zk.DigestACL(zk.PermAll, "alice", "secret")}, root)
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	_, err = owner.Create(ctx, "private/f", []byte("x"))
	require.NoError(t, err)
	denied := make(chan struct{}, 1)
	writes, stopWrites := context.WithCancel(ctx)
	defer stopWrites()
	go func() {
		for writes.Err() == nil {
			wctx, wcancel := context.WithTimeout(writes, time.Second)
			_, err := holder.Update(wctx, "private/f", []byte("y"), nil)
			wcancel()
			if topo.IsErrType(err, topo.PermissionDenied) {
				select {
				case denied <- struct{}{}:
				default:
				}
			}
			time.Sleep(20 * time.Millisecond) // a busy writer's pace
		}
	}()
	<-denied
	requireGrantAfterCut(ctx, t, e, f, l, granted)
}

// lockOnFollower opens a holder Conn on a follower f of e (leader l) and
// a waiter on the other members, under root; the holder (opts, with the
// follower's address and testSessionTimeout) takes lock "d" and the
// waiter queues behind it. granted tells, once the waiter is granted the
// lock, whether the holder's Done was still open.
func lockOnFollower(ctx context.Context, t *testing.T, e *zktest.Ensemble, root string, opts Options) (holder, waiter *Conn, f, l int, granted <-chan grant) {
	l = e.WaitLeader(zktest.StartTimeout)
	f, g := (l+1)%3, (l+2)%3
	opts.Servers, opts.SessionTimeout = []string{e.Addr(f)}, testSessionTimeout
	holder, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(holder.Close)
	waiter = openConn(t, []string{e.Addr(l), e.Addr(g)}, root)
	_, err = waiter.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	done := ld.Done()
	got := make(chan grant, 1)
	go func() {
		wl, err := waiter.Lock(ctx, "d", "waiter")
		if err != nil {
			got <- grant{err: err}
			return
		}
		got <- grant{parted: !isClosed(done)}
		_ = wl.Unlock(ctx)
	}()
	return holder, waiter, f, l, got
}

// grant is how the waiter's Lock of lockOnFollower ended: with an error,
// or granted while the holder's Done was still open (parted) or not.
type grant struct {
	parted bool
	err    error
}

// requireGrantAfterCut parts follower f from leader l and fails the test
// unless the waiter of lockOnFollower is granted the lock, and only once
// the holder's Done is closed.
func requireGrantAfterCut(ctx context.Context, t *testing.T, e *zktest.Ensemble, f, l int, granted <-chan grant) {
	e.CutLink(f, l)
	t.Cleanup(func() { e.HealLink(f, l) })
	select {
	case g := <-granted:
		require.NoError(t, g.err, "the waiter's Lock of the parted holder's lock")
		require.False(t, g.parted, "the waiter was granted the lock while the parted holder's Done was still open")
	case <-ctx.Done():
		t.Fatal("the waiter was not granted the lock of a holder parted from the leader")
	}
}
