package etcd2topo

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestClusterLeaderStops: on a 3-member cluster, stopping the leader
// member while a client streams updates, holds a lock and watches a file
// does not disturb any of them: updates keep succeeding, the lock stays
// held (its lease is renewed through another member) and the watch
// resumes on another member and delivers the last value.
func TestClusterLeaderStops(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	root := newRoot()
	c := openConn(t, cl.Endpoints(), root)
	other := openConn(t, cl.Endpoints(), root)
	ctx := context.Background()

	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "w", []byte("0"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	_, changes, err := c.Watch(wctx, "w")
	require.NoError(t, err)
	var seen atomic.Int64 // the last value the watch delivered
	watchDone := make(chan error, 1)
	go func() {
		var last topo.NumericVersion
		for wd := range changes {
			if wd.Err != nil {
				if !topo.IsErrType(wd.Err, topo.Interrupted) {
					watchDone <- wd.Err
					return
				}
				continue
			}
			v := wd.Version.(topo.NumericVersion)
			if v <= last {
				watchDone <- fmt.Errorf("watch went back from version %d to %d", last, v)
				return
			}
			last = v
			n, _ := strconv.ParseInt(string(wd.Contents), 10, 64)
			seen.Store(n)
		}
		watchDone <- nil
	}()

	// The writer updates w with 1, 2, 3, ... counting successes.
	var written, failed atomic.Int64
	stopWriter := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(1); ; i++ {
			select {
			case <-stopWriter:
				return
			default:
			}
			uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Update(uctx, "w", []byte(strconv.FormatInt(i, 10)), nil)
			cancel()
			if err != nil {
				failed.Add(1)
				i-- // retry the same value
				continue
			}
			written.Store(i)
		}
	})

	require.Eventually(t, func() bool { return written.Load() >= 20 }, 20*time.Second, 5*time.Millisecond)
	leader := cl.LeaderIndex()
	cl.StopMember(leader)
	after := written.Load()
	newLeader := cl.LeaderIndex()
	require.NotEqual(t, leader, newLeader)
	require.Eventually(t, func() bool { return written.Load() >= after+50 }, 30*time.Second, 5*time.Millisecond,
		"updates must continue after the leader member stopped")
	close(stopWriter)
	wg.Wait()
	last := written.Load()
	t.Logf("updates: %d written, %d failed during the failover", last, failed.Load())

	require.Eventually(t, func() bool { return seen.Load() == last }, 30*time.Second, 5*time.Millisecond,
		"the watch must deliver the last value written")

	var checkErr error
	require.Eventually(t, func() bool {
		checkErr = ld.Check(ctx)
		return checkErr == nil || topo.IsErrType(checkErr, topo.LockLost)
	}, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, checkErr, "the lock must stay held")
	_, err = other.TryLock(ctx, "d", "other")
	require.ErrorIs(t, err, topo.NodeExists)
	require.NoError(t, ld.Unlock(ctx))

	cancelWatch()
	require.NoError(t, <-watchDone)
}

// TestWatchSurvivesCompaction: a Watch and a WatchRecursive whose only
// member goes away while files change and the history is compacted resume
// when the member returns: etcd refuses to resume from the compacted
// revision, and the watchers re-read the current state and report it.
func TestWatchSurvivesCompaction(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	root := newRoot()
	// The watching Conn talks to member 0 only, so it cannot fail over.
	logs := &countingHandler{msg: msgResync}
	opts := testOptions(cl.Addr(0))
	opts.Logger = slog.New(logs)
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := context.Background()
	for _, f := range []string{"w", "p/a", "p/b"} {
		_, err := c.Create(ctx, f, []byte("v0"))
		require.NoError(t, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, changes, err := c.Watch(wctx, "w")
	require.NoError(t, err)
	initial, rchanges, err := c.WatchRecursive(wctx, "p/")
	require.NoError(t, err)
	require.Len(t, initial, 2)

	cl.StopMember(0)
	raw := rawClient(t, cl.Addr(1)+","+cl.Addr(2))
	for i := 1; i <= 5; i++ {
		_, err := raw.Put(ctx, root+"/w", fmt.Sprintf("v%d", i))
		require.NoError(t, err)
	}
	_, err = raw.Delete(ctx, root+"/p/a")
	require.NoError(t, err)
	_, err = raw.Put(ctx, root+"/p/b", "v1")
	require.NoError(t, err)
	resp, err := raw.Put(ctx, root+"/p/c", "v1")
	require.NoError(t, err)
	rev := resp.Header.Revision
	_, err = raw.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	cl.RestartMember(0)

	// The Watch reports the current value (intermediate values are gone).
	select {
	case wd := <-changes:
		require.NoError(t, wd.Err)
		require.Equal(t, "v5", string(wd.Contents))
		require.GreaterOrEqual(t, wd.Revision, rev, "the re-read's revision")
	case <-time.After(30 * time.Second):
		t.Fatal("no event from the Watch after compaction")
	}

	// The WatchRecursive reports every difference.
	got := map[string]string{}
	deadline := time.After(30 * time.Second)
	var revs []int64
	for len(got) < 3 {
		select {
		case wd := <-rchanges:
			revs = append(revs, wd.Revision)
			if wd.Err != nil {
				require.ErrorIs(t, wd.Err, topo.NoNode, wd.Path)
				got[wd.Path] = "deleted"
				continue
			}
			got[wd.Path] = string(wd.Contents)
		case <-deadline:
			t.Fatalf("WatchRecursive after compaction: only %v", got)
		}
	}
	require.Equal(t, map[string]string{"p/a": "deleted", "p/b": "v1", "p/c": "v1"}, got)
	// Until the last difference, the watch has got no further than its
	// initial listing; the last carries the re-read's revision.
	require.Equal(t, initial[0].Revision, revs[0])
	require.Equal(t, initial[0].Revision, revs[1])
	require.GreaterOrEqual(t, revs[2], rev)
	require.EqualValues(t, 2, logs.n.Load(), "both watches must have met the compaction")

	// Both keep working afterwards.
	_, err = c.Update(ctx, "w", []byte("v6"), nil)
	require.NoError(t, err)
	wd := <-changes
	require.NoError(t, wd.Err)
	require.Equal(t, "v6", string(wd.Contents))
	_, err = c.Update(ctx, "p/b", []byte("v2"), nil)
	require.NoError(t, err)
	rd := <-rchanges
	require.NoError(t, rd.Err)
	require.Equal(t, "p/b", rd.Path)

	cancel()
	for wd := range changes {
		require.ErrorIs(t, wd.Err, topo.Interrupted)
	}
	for rd := range rchanges {
		require.ErrorIs(t, rd.Err, topo.Interrupted)
	}
}

// TestUnlockWhileUnreachable: an Unlock that cannot reach etcd returns an
// error, and the Conn keeps trying to delete the lock key in the
// background, so the lock is released when etcd is back rather than when
// the shared lease (30 s here) would lapse.
func TestUnlockWhileUnreachable(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	root := newRoot()
	c, err := NewConn(Options{Endpoints: []string{cl.Addr(0)}, LockTTL: 30 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	other := openConn(t, cl.Addr(1)+","+cl.Addr(2), root)
	ctx := context.Background()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	cl.StopMember(0)
	uctx, cancel := context.WithTimeout(ctx, time.Second)
	err = ld.Unlock(uctx)
	cancel()
	require.Error(t, err, "Unlock with its only member down")
	_, err = other.TryLock(ctx, "d", "other")
	require.ErrorIs(t, err, topo.NodeExists, "the key is still there")

	cl.RestartMember(0)
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l2, err := other.Lock(lctx, "d", "other")
	require.NoError(t, err, "the background retry must release the lock well before the lease lapses")
	require.NoError(t, l2.Unlock(ctx))
}

// countingHandler is a slog.Handler that counts the records with message
// msg, at every level.
type countingHandler struct {
	msg string
	n   atomic.Int64
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// TestLockWaitThroughLaggingMember: a Lock that waits reads the queue
// linearizably but may watch it through a member that has not applied
// the latest writes yet (here a follower, whose leader's Raft messages
// are delayed by 100 ms, while the claim was answered by the leader).
// Such a watch starts before the read's revision and replays history the
// read already accounts for: the put of the waiter's own entry, or the
// deletion of an earlier entry of the same name. The waiter must take
// neither for news: it keeps its place, gets the lock once the holder
// lets go, and never reports LockLost for an entry that is alive. (The
// same replay could also cross off an older entry whose name was deleted
// and put again before the read, handing out the lock while it is held.)
func TestLockWaitThroughLaggingMember(t *testing.T) {
	cl := etcdtest.StartClusterWith(t, 3, etcdtest.ClusterOptions{TickMs: 50, ElectionMs: 5000, PeerProxies: true})
	leader := cl.LeaderIndex()
	follower := (leader + 1) % 3
	root := newRoot()
	holder := openConn(t, cl.Endpoints(), root)
	// The waiter's requests alternate between the leader and the follower.
	waiter, err := NewConn(Options{Endpoints: []string{cl.Addr(leader), cl.Addr(follower)}, LockTTL: 30 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(waiter.Close)
	raw := rawClient(t, cl.Addr(leader))
	ctx := context.Background()
	_, err = holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	cl.PeerProxy(leader).SetDelay(100 * time.Millisecond)

	type result struct {
		ld  topo.LockDescriptor
		err error
	}
	for i := range 8 {
		ld, err := holder.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		got := make(chan result, 1)
		go func() {
			lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			l, err := waiter.Lock(lctx, "d", fmt.Sprintf("waiter %d", i))
			got <- result{l, err}
		}()
		// Once the waiter's entry is queued behind the holder's (or the
		// waiter gave up, which is the failure), the holder lets go.
		require.Eventually(t, func() bool {
			if len(got) > 0 {
				return true
			}
			resp, err := raw.Get(ctx, root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == 2
		}, 60*time.Second, 20*time.Millisecond)
		require.NoError(t, ld.Unlock(ctx))
		var r result
		select {
		case r = <-got:
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: the waiter did not get the lock after the holder's Unlock", i)
		}
		require.NoError(t, r.err, "round %d: the waiter must keep its place and get the lock", i)
		require.NoError(t, r.ld.Check(ctx))
		require.NoError(t, r.ld.Unlock(ctx))
	}
}

// TestLeaseSurvivesOneUnreachableEndpoint: a Conn whose connection to one
// of three members is cut off (blackholed: the connection stays open,
// nothing crosses it) keeps its lease alive through the other two. A
// renewal that the client sends into the dead connection hangs; it must
// not hold up the next attempt (which goes to another member) until the
// lease's proven-until time has passed.
func TestLeaseSurvivesOneUnreachableEndpoint(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	px, err := faultproxy.New(cl.Addr(0))
	require.NoError(t, err)
	t.Cleanup(func() { px.Close() })
	root := newRoot()
	c := openConn(t, px.Addr()+","+cl.Addr(1)+","+cl.Addr(2), root)
	ctx := context.Background()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	l := entryBehind(t, ld).lease

	px.Blackhole()
	// Renewals run every TTL/3; wait until the lease is proven four TTLs
	// past the cut, that is a dozen renewals later, failing at once if it
	// is given up meanwhile.
	target := time.Now().Add(4 * l.ttl)
	require.Eventually(t, func() bool {
		select {
		case <-l.lostCtx.Done():
			return true
		default:
		}
		return l.provenUntil().After(target)
	}, 5*time.Minute, 10*time.Millisecond)
	require.False(t, l.lost(), "the lease was given up while two of three members could renew it")
	px.Heal()
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))
}

// TestConditionOnlyTxnThroughLaggingMember: a Txn of conditions only
// (no writes) is linearizable even when the member that answers it has
// not applied the latest writes. etcd serves a transaction without puts
// or deletes, whose branches hold no linearizable range, as a
// serializable read from the member's own state; such a Txn would then
// confirm a version already replaced, or a lock already deleted. Here a
// follower's Raft messages from the leader are delayed by 1 s, and the
// Conn under test talks to that follower only.
func TestConditionOnlyTxnThroughLaggingMember(t *testing.T) {
	cl := etcdtest.StartClusterWith(t, 3, etcdtest.ClusterOptions{TickMs: 50, ElectionMs: 5000, PeerProxies: true})
	leader := cl.LeaderIndex()
	follower := (leader + 1) % 3
	root := newRoot()
	writer := openConn(t, cl.Addr(leader), root)
	// A long lease: the lagging member forwards renewals late, and a 3 s
	// lease could lapse before the test deletes the entry itself.
	lagging, err := NewConn(Options{Endpoints: []string{cl.Addr(follower)}, LockTTL: 60 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(lagging.Close)
	rawFollower := rawClient(t, cl.Addr(follower))
	ctx := context.Background()
	v1, err := writer.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	ld, err := lagging.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	// Both are applied on the follower (its serializable read shows them).
	require.Eventually(t, func() bool {
		resp, err := rawFollower.Get(ctx, root+"/d/", clientv3.WithPrefix(), clientv3.WithSerializable(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	}, 30*time.Second, 10*time.Millisecond)

	cl.PeerProxy(leader).SetDelay(time.Second)
	// stale returns whether the follower has still not applied what the
	// leader committed at rev.
	stale := func(rev int64) bool {
		resp, err := rawFollower.Get(ctx, root+"/d/f", clientv3.WithSerializable(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Header.Revision < rev
	}

	v2, err := writer.Update(ctx, "d/f", []byte("2"), v1)
	require.NoError(t, err)
	require.True(t, stale(int64(v2.(topo.NumericVersion))), "the follower must lag for the test to mean anything")
	_, err = lagging.Txn(ctx, topo.IfVersion("d/f", v1))
	var te *topo.TxnError
	require.ErrorAs(t, err, &te, "a Txn conditioned on a replaced version must fail, even through a lagging member")
	require.ErrorIs(t, err, topo.BadVersion)
	require.Equal(t, 0, te.Index)

	// The lock's entry is deleted behind the holder's back.
	resp, err := writer.cli.Delete(ctx, root+"/d/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.EqualValues(t, 1, resp.Deleted)
	require.True(t, stale(resp.Header.Revision), "the follower must lag for the test to mean anything")
	_, err = lagging.Txn(ctx, topo.IfHeld(ld))
	require.ErrorIs(t, err, topo.LockLost, "a Txn conditioned on a deleted lock entry must fail, even through a lagging member")
}
