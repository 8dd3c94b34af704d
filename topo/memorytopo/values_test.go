package memorytopo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func participate(t *testing.T, c *memorytopo.Conn, name, id string) topo.LeaderParticipation {
	t.Helper()
	p, err := c.NewLeaderParticipation(name, id)
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return p
}

// recvLeader receives one event from ch within waitLimit.
func recvLeader(t *testing.T, ch <-chan topo.Leader) topo.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		require.True(t, ok, "the Observe channel closed")
		return l
	case <-time.After(waitLimit):
		t.Fatal("no Observe event")
	}
	return topo.Leader{}
}

// recvUntil receives from ch until an event matches and returns them all.
func recvUntil(t *testing.T, ch <-chan topo.Leader, match func(topo.Leader) bool) []topo.Leader {
	t.Helper()
	var evs []topo.Leader
	for {
		l := recvLeader(t, ch)
		evs = append(evs, l)
		if match(l) {
			return evs
		}
	}
}

func requireChanCloses(t *testing.T, ch <-chan topo.Leader) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the Observe channel did not close")
		}
	}
}

// TestValueLayout: the entry holds exactly the id (what Vitess reads), the
// value is not a file, and Leader/Term agree on the token.
func TestValueLayout(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	p := participate(t, c, "svc", "one")
	_, err := p.Campaign(ctx, []byte("addr:1"))
	require.NoError(t, err)

	names, err := c.ListDir(ctx, "elections/svc", true)
	require.NoError(t, err)
	require.Len(t, names, 1, "only the candidate entry is under the election: %v", names)
	require.True(t, names[0].Ephemeral)
	got, _, err := c.Get(ctx, "elections/svc/"+names[0].Name)
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the entry holds exactly the id")
	_, err = c.List(ctx, "")
	requireCode(t, err, topo.NoNode)

	l, err := p.Leader(ctx)
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "one", Value: []byte("addr:1"), Token: term.Token()}, l)

	// WaitForLeadership publishes no value.
	c2 := newConn(t, c.Factory())
	q := participate(t, c2, "other", "two")
	_, err = q.WaitForLeadership()
	require.NoError(t, err)
	l, err = q.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "two", l.ID)
	require.Nil(t, l.Value)
}

func TestProclaimFaultsAndPartition(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 200 * time.Millisecond})
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	watcher := participate(t, c2, "svc", "w")
	lctx, err := p1.Campaign(ctx, []byte("v0"))
	require.NoError(t, err)

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpProclaim, Err: topo.Unavailable, Times: 1})
	requireCode(t, p1.Proclaim(ctx, []byte("failed")), topo.Unavailable)
	remove()
	l, err := watcher.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v0", string(l.Value), "a failed Proclaim wrote nothing")
	require.Equal(t, int64(1), f.CallCount(memorytopo.OpProclaim), "Proclaim calls are counted")

	// Partitioned: Proclaim blocks; once the session lapsed and the
	// partition healed, it is NotLeader and its value never visible.
	c1.Partition()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	requireCode(t, p1.Proclaim(short, []byte("cut")), topo.Timeout)
	<-lctx.Done()
	got := make(chan error, 1)
	go func() { got <- p1.Proclaim(ctx, []byte("stale")) }()
	ch, err := watcher.Observe(ctx)
	require.NoError(t, err)
	evs := recvUntil(t, ch, func(l topo.Leader) bool { return l.ID == "" }) // the session lapsed
	c1.Heal()
	requireCode(t, <-got, topo.NotLeader)
	_, err = watcher.Leader(ctx)
	requireCode(t, err, topo.NoLeader)
	for _, e := range evs {
		require.NotEqual(t, "stale", string(e.Value))
	}
}

func TestCampaignFaultsPartitionAndResign(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2, c3 := newConn(t, f), newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	p2 := participate(t, c2, "svc", "two")
	watcher := participate(t, c3, "svc", "w")

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpCampaign, Err: topo.Unavailable})
	_, err := p1.Campaign(ctx, []byte("v1"))
	requireCode(t, err, topo.Unavailable)
	remove()
	_, err = watcher.Leader(ctx)
	requireCode(t, err, topo.NoLeader) // a failed Campaign adds no entry

	// A partitioned Conn's Campaign blocks until its ctx ends.
	c2.Partition()
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { _, err := p2.Campaign(cctx, []byte("v2")); got <- err }()
	cancel()
	requireCode(t, <-got, topo.Interrupted)
	c2.Heal()

	// Resign ends a waiting Campaign with Interrupted and removes its entry.
	lctx, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	go func() { _, err := p2.Campaign(ctx, []byte("v2")); got <- err }()
	require.Eventually(t, func() bool {
		names, err := c3.ListDir(ctx, "elections/svc", false)
		return err == nil && len(names) == 2
	}, waitLimit, poll)
	require.NoError(t, p2.Resign(ctx))
	requireCode(t, <-got, topo.Interrupted)
	names, err := c3.ListDir(ctx, "elections/svc", false)
	require.NoError(t, err)
	require.Len(t, names, 1, "the resigned candidate's entry is gone")
	require.NoError(t, lctx.Err())

	// Resign with a cancelled ctx while the store hangs: the grace ends,
	// the leadership context is cancelled anyway; after Unhang, Resign
	// removes the entry.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	f.Hang()
	err = p1.Resign(done)
	f.Unhang()
	requireCode(t, err, topo.Timeout)
	require.Error(t, lctx.Err(), "Resign cancels the leadership context even when the store is unreachable")
	requireCode(t, p1.Proclaim(ctx, []byte("x")), topo.NotLeader)
	require.NoError(t, p1.Resign(done), "Resign with a cancelled ctx once the store answers")
	_, err = watcher.Leader(ctx)
	requireCode(t, err, topo.NoLeader)

	// Resign faults.
	lctx, err = p1.Campaign(ctx, []byte("again"))
	require.NoError(t, err)
	remove = f.AddFault(memorytopo.Fault{Op: memorytopo.OpResign, Err: topo.Unavailable, Times: 1})
	requireCode(t, p1.Resign(ctx), topo.Unavailable)
	remove()
	require.Error(t, lctx.Err())
	require.NoError(t, p1.Resign(ctx))

	// After Close.
	c1.Close()
	_, err = p1.Campaign(ctx, nil)
	requireCode(t, err, topo.Closed)
	requireCode(t, p1.Proclaim(ctx, nil), topo.Closed)
	_, err = p1.Leader(ctx)
	requireCode(t, err, topo.Closed)
	_, err = p1.Observe(ctx)
	requireCode(t, err, topo.Closed)
}

func TestCampaignBadInputOrder(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	p := participate(t, c, "svc", "one")
	big := make([]byte, topo.MaxValueSize+1)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := p.Campaign(cancelled, big)
	requireCode(t, err, topo.Interrupted) // the context is checked first
	_, err = p.Campaign(ctx, big)
	requireCode(t, err, topo.InvalidArgument)
	requireCode(t, p.Proclaim(cancelled, big), topo.Interrupted)
	requireCode(t, p.Proclaim(ctx, big), topo.InvalidArgument)
	c.Close()
	_, err = p.Campaign(ctx, big)
	requireCode(t, err, topo.InvalidArgument) // input before Closed
	_, err = p.Campaign(ctx, nil)
	requireCode(t, err, topo.Closed)
}

func TestLeaderAndObserveFaults(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	watcher := participate(t, c2, "svc", "w")
	_, err := p1.Campaign(ctx, []byte("v"))
	require.NoError(t, err)

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpLeader, Path: "svc"})
	_, err = watcher.Leader(ctx)
	requireCode(t, err, topo.Unavailable)
	remove()
	remove = f.AddFault(memorytopo.Fault{Op: memorytopo.OpObserve, Err: topo.Unavailable})
	_, err = watcher.Observe(ctx)
	requireCode(t, err, topo.Unavailable)
	remove()

	c2.Partition()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = watcher.Leader(short)
	requireCode(t, err, topo.Timeout)
	_, err = watcher.Observe(short)
	requireCode(t, err, topo.Timeout)
	c2.Heal()

	// An established stream is not affected by faults; it closes with the Conn.
	ch, err := watcher.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", string(recvLeader(t, ch).Value))
	f.SetError(topo.Unavailable)
	f.SetError(nil)
	c2.Close()
	requireChanCloses(t, ch)
	require.Equal(t, int64(3), f.CallCount(memorytopo.OpObserve))
	require.Equal(t, int64(2), f.CallCount(memorytopo.OpLeader))
}

// TestObserveCoalescesInOrder: a slow receiver gets the state at the time
// of the call first, states in store order, and ends at the latest.
func TestObserveCoalescesInOrder(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	watcher := participate(t, c2, "svc", "w")
	_, err := p1.Campaign(ctx, []byte("v0"))
	require.NoError(t, err)
	octx, cancel := context.WithCancel(ctx)
	ch, err := watcher.Observe(octx)
	require.NoError(t, err)
	for i := 1; i <= 100; i++ {
		require.NoError(t, p1.Proclaim(ctx, fmt.Appendf(nil, "v%d", i)))
	}
	require.NoError(t, p1.Resign(ctx))
	evs := recvUntil(t, ch, func(l topo.Leader) bool { return l.ID == "" })
	require.Equal(t, "v0", string(evs[0].Value), "the state at the time of the call comes first")
	last := -1
	for _, e := range evs[:len(evs)-1] {
		var n int
		_, err := fmt.Sscanf(string(e.Value), "v%d", &n)
		require.NoError(t, err)
		require.Greater(t, n, last, "states in store order: %v", evs)
		last = n
	}
	cancel()
	requireChanCloses(t, ch)
}

// TestWaitForNewLeaderSendsLeaderAtCall: the leader current at the time of
// the call is sent even when it stops right after the call.
func TestWaitForNewLeaderSendsLeaderAtCall(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	watcher := participate(t, c2, "svc", "w")
	_, err := p1.WaitForLeadership()
	require.NoError(t, err)
	ch, err := watcher.WaitForNewLeader(ctx)
	require.NoError(t, err)
	p1.Stop()
	select {
	case id := <-ch:
		require.Equal(t, "one", id)
	case <-time.After(waitLimit):
		t.Fatal("the leader at the time of the call was not sent")
	}
}

func TestResumeWaitingCandidateKeepsPlace(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 200 * time.Millisecond})
	c1, c2, c3, c4 := newConn(t, f), newConn(t, f), newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	p2 := participate(t, c2, "svc", "two")
	p3 := participate(t, c3, "svc", "three")
	_, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	got2 := make(chan error, 1)
	go func() { _, err := p2.Campaign(ctx, []byte("v2")); got2 <- err }()
	var info []byte
	require.Eventually(t, func() bool { info, err = p2.ResumeInfo(); return err == nil }, waitLimit, poll)
	got3 := make(chan error, 1)
	go func() { _, err := p3.Campaign(ctx, []byte("v3")); got3 <- err }()
	require.Eventually(t, func() bool {
		names, err := c1.ListDir(ctx, "elections/svc", false)
		return err == nil && len(names) == 3
	}, waitLimit, poll)

	c2.Partition() // the "dead" process
	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpResumeLeaderParticipation, Err: topo.Unavailable, Times: 1})
	_, err = c4.ResumeLeaderParticipation(ctx, "svc", "two", info)
	requireCode(t, err, topo.Unavailable)
	remove()
	r, err := c4.ResumeLeaderParticipation(ctx, "svc", "two", info)
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	// Past the session TTL, the resumed candidacy is alive.
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, p1.Resign(ctx))
	lctx, err := r.Campaign(ctx, []byte("v2-resumed"))
	require.NoError(t, err, "the resumed candidate is next, ahead of a later one")
	l, err := p1.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "two", Value: []byte("v2-resumed"), Token: l.Token}, l)
	term, err := r.Term()
	require.NoError(t, err)
	require.Equal(t, term.Token(), l.Token)
	select {
	case err := <-got3:
		t.Fatalf("the later candidate led ahead of the resumed one: %v", err)
	default:
	}
	c4.Close()
	require.Error(t, lctx.Err(), "the adopted session ends with the resuming Conn")
	require.NoError(t, <-got3)
	c2.Heal()
}

func TestResumeRefusesForeignInfo(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1 := newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	_, err := p1.Campaign(ctx, nil)
	require.NoError(t, err)
	info, err := p1.ResumeInfo()
	require.NoError(t, err)

	other, err := memorytopo.NewFactory().NewConn("mem", "/root")
	require.NoError(t, err)
	defer other.Close()
	_, err = other.ResumeLeaderParticipation(ctx, "svc", "one", info)
	requireCode(t, err, topo.InvalidArgument) // another store
	otherRoot, err := f.NewConn("mem", "/elsewhere")
	require.NoError(t, err)
	defer otherRoot.Close()
	_, err = otherRoot.ResumeLeaderParticipation(ctx, "svc", "one", info)
	requireCode(t, err, topo.InvalidArgument) // another root
	c2 := newConn(t, f)
	_, err = c2.ResumeLeaderParticipation(ctx, "svc", "", info)
	requireCode(t, err, topo.InvalidArgument)
	_, err = c2.ResumeLeaderParticipation(ctx, "locks/x", "one", info)
	requireCode(t, err, topo.InvalidPath)

	require.NoError(t, p1.Resign(ctx))
	_, err = c2.ResumeLeaderParticipation(ctx, "svc", "one", info)
	requireCode(t, err, topo.LockLost) // a resigned entry cannot be resumed
	_, err = p1.ResumeInfo()
	requireCode(t, err, topo.NoNode)
	c2.Close()
	_, err = c2.ResumeLeaderParticipation(ctx, "svc", "one", info)
	requireCode(t, err, topo.Closed)
}

// TestPartitionedLeaderStepsDownFirst: a partitioned Conn's leadership
// context ends a margin (a quarter of the TTL, here 500 ms) before the
// store drops its entry, so the old leader has stepped down before anyone
// else can lead. Without the margin, the store would report no leader at
// the moment the context ends.
func TestPartitionedLeaderStepsDownFirst(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 2 * time.Second})
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	watcher := participate(t, c2, "svc", "w")
	lctx, err := p1.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	c1.Partition()
	<-lctx.Done()
	got := make(chan error, 1)
	go func() { got <- p1.Proclaim(ctx, []byte("stale")) }()
	ch, err := watcher.Observe(ctx)
	require.NoError(t, err)
	recvUntil(t, ch, func(l topo.Leader) bool { return l.ID == "" })
	c1.Heal()
	requireCode(t, <-got, topo.NotLeader)
}

// TestCampaignBoundedWhileWaitForLeadershipWaits: a Campaign on a
// participation whose WaitForLeadership is blocked still ends with its ctx.
func TestCampaignBoundedWhileWaitForLeadershipWaits(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	p1 := participate(t, c1, "svc", "one")
	p2 := participate(t, c2, "svc", "two")
	_, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() { _, err := p2.WaitForLeadership(); got <- err }()
	require.Eventually(t, func() bool {
		names, err := c1.ListDir(ctx, "elections/svc", false)
		return err == nil && len(names) == 2
	}, waitLimit, poll)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = p2.Campaign(short, []byte("v2"))
	requireCode(t, err, topo.Timeout)
	p2.Stop()
	requireCode(t, <-got, topo.Interrupted)
	l, err := p1.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", l.ID)
}
