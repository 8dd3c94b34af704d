package templatetopo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// nextLeader reads ch until an event satisfies ok, and returns it.
func nextLeader(t *testing.T, ch <-chan topo.Leader, what string, ok func(topo.Leader) bool) topo.Leader {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, open := <-ch:
			require.Truef(t, open, "%s: Observe closed", what)
			if ok(l) {
				return l
			}
		case <-timeout:
			require.FailNow(t, "timed out", what)
		}
	}
}

// TestCampaignProclaimObserve: a Campaign's value is published with the
// candidacy; Proclaim replaces it with the same Token; Leader and Observe
// see both; a deposed leader's Proclaim is NotLeader and never seen; when
// nobody leads Observe says so and Leader is NoLeader.
func TestCampaignProclaimObserve(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 3)
	p1, err := cs[0].NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	p2, err := cs[1].NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	obs, err := cs[2].NewLeaderParticipation("e", "observer")
	require.NoError(t, err)

	_, err = obs.Leader(ctx)
	require.ErrorIs(t, err, topo.NoLeader)
	ch, err := obs.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{}, nextLeader(t, ch, "first event", func(topo.Leader) bool { return true }), "nobody leads at first")

	lctx, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	term, err := p1.Term()
	require.NoError(t, err)
	l := nextLeader(t, ch, "p1's campaign", func(l topo.Leader) bool { return l.ID != "" })
	require.Equal(t, topo.Leader{ID: "one", Value: []byte("v1"), Token: term.Token()}, l, "the Campaign value comes with the candidacy")

	require.NoError(t, p1.Proclaim(ctx, []byte("v2")))
	l = nextLeader(t, ch, "p1's proclaim", func(l topo.Leader) bool { return string(l.Value) == "v2" })
	require.Equal(t, term.Token(), l.Token, "a Proclaim keeps the term's Token")
	got, err := obs.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "one", Value: []byte("v2"), Token: term.Token()}, got)
	again, err := p1.Campaign(ctx, []byte("v3"))
	require.NoError(t, err)
	require.True(t, again == lctx, "Campaign while leading returns the same context")
	nextLeader(t, ch, "Campaign while leading proclaims", func(l topo.Leader) bool { return string(l.Value) == "v3" })

	for i := range 20 { // many Proclaims: the last value is the one observed
		require.NoError(t, p1.Proclaim(ctx, []byte{byte('a' + i)}))
	}
	nextLeader(t, ch, "the last of many Proclaims", func(l topo.Leader) bool { return string(l.Value) == "t" })

	led := make(chan error, 1)
	go func() { _, err := p2.Campaign(ctx, []byte("w1")); led <- err }()
	cs[0].ExpireSession()
	require.ErrorIs(t, p1.Proclaim(ctx, []byte("stale")), topo.NotLeader, "a deposed leader's Proclaim")
	require.NoError(t, <-led)
	l = nextLeader(t, ch, "p2's term", func(l topo.Leader) bool { return l.ID == "two" })
	require.Equal(t, []byte("w1"), l.Value)
	require.Greater(t, l.Token, term.Token())
	require.NoError(t, p2.Resign(ctx))
	nextLeader(t, ch, "nobody leads after Resign", func(l topo.Leader) bool { return l.ID == "" })
	_, err = obs.Leader(ctx)
	require.ErrorIs(t, err, topo.NoLeader)
	got, err = obs.Leader(ctx)
	require.ErrorIs(t, err, topo.NoLeader)
	require.NotEqual(t, "stale", string(got.Value))
}

// TestObserveAcrossPartition: an Observe on a Conn that is cut and healed
// resumes with the current leader, and never reports the one that
// resigned meanwhile.
func TestObserveAcrossPartition(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 3)
	obsConn := cs[2]
	p1, err := cs[0].NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	p2, err := cs[1].NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	obs, err := obsConn.NewLeaderParticipation("e", "observer")
	require.NoError(t, err)
	_, err = p1.Campaign(ctx, []byte("one's"))
	require.NoError(t, err)
	ch, err := obs.Observe(ctx)
	require.NoError(t, err)
	nextLeader(t, ch, "before the cut", func(l topo.Leader) bool { return l.ID == "one" })

	obsConn.Cut()
	led := make(chan error, 1)
	go func() { _, err := p2.Campaign(ctx, []byte("two's")); led <- err }()
	require.NoError(t, p1.Resign(ctx))
	require.NoError(t, <-led)
	obsConn.Heal()
	l := nextLeader(t, ch, "after the heal", func(l topo.Leader) bool { return true })
	require.Equal(t, "two", l.ID, "the first event after the heal is the current leader, not the resigned one")
	require.Equal(t, "two's", string(l.Value))
}

// TestCampaignContextWithdraws: a Campaign whose ctx ends while it waits
// returns Timeout and leaves nothing queued.
func TestCampaignContextWithdraws(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 3)
	p1, err := cs[0].NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	p2, err := cs[1].NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = p2.Campaign(short, []byte("v"))
	require.ErrorIs(t, err, topo.Timeout)
	_, err = p2.ResumeInfo()
	require.ErrorIs(t, err, topo.NoNode, "no candidacy left behind")

	p1.Stop()
	obs, err := cs[2].NewLeaderParticipation("e", "observer")
	require.NoError(t, err)
	_, err = obs.Leader(ctx)
	require.ErrorIs(t, err, topo.NoLeader, "the withdrawn candidate does not lead after the leader stopped")
}

// TestResignCancelledContext: Resign with a cancelled ctx still withdraws
// (the leadership context is cancelled before it returns), a waiting
// Campaign on the same participant returns Interrupted, and the
// participant may campaign again.
func TestResignCancelledContext(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 2)
	p1, err := cs[0].NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	lctx, err := p1.Campaign(ctx, nil)
	require.NoError(t, err)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, p1.Resign(dead))
	require.Error(t, lctx.Err(), "Resign cancels the leadership context before it returns")
	require.NoError(t, p1.Resign(ctx), "nothing left to resign")

	p2, err := cs[1].NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	_, err = p2.Campaign(ctx, nil)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() { _, err := p1.Campaign(ctx, []byte("again")); waiting <- err }()
	require.Eventually(t, func() bool { _, err := p1.ResumeInfo(); return err == nil }, 30*time.Second, time.Millisecond, "p1 queued again")
	require.NoError(t, p1.Resign(ctx))
	require.ErrorIs(t, <-waiting, topo.Interrupted, "a Campaign withdrawn by Resign")
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err = p1.Campaign(short, nil)
	require.ErrorIs(t, err, topo.Timeout, "p1 campaigns again after Resign, behind p2")
	p2.Stop()
	_, err = p1.Campaign(ctx, nil)
	require.NoError(t, err, "and leads once p2 stopped")
}

// TestResume: a candidacy taken back on a new Conn, the old one abandoned
// without Close, keeps its place in the queue, and a leader keeps its term
// and Token; the abandoned Conn's Close no longer ends it; info for another
// election or id is InvalidArgument; once the session ended, LockLost.
func TestResume(t *testing.T) {
	ctx := testCtx(t)
	s, cs := newConns(t, 2)
	oldConn, other := cs[0], cs[1]
	leader, err := oldConn.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	_, err = leader.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	term, err := leader.Term()
	require.NoError(t, err)
	waiter, err := other.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { _, err := waiter.WaitForLeadership(); waited <- err }()

	info, err := leader.ResumeInfo()
	require.NoError(t, err)
	newConn, err := s.NewConn("/r")
	require.NoError(t, err)
	t.Cleanup(newConn.Close)
	_, err = newConn.ResumeLeaderParticipation(ctx, "e", "someone-else", info)
	require.ErrorIs(t, err, topo.InvalidArgument, "info for another id")
	_, err = newConn.ResumeLeaderParticipation(ctx, "f", "one", info)
	require.ErrorIs(t, err, topo.InvalidArgument, "info for another election")
	_, err = newConn.ResumeLeaderParticipation(ctx, "e", "one", []byte("garbage"))
	require.ErrorIs(t, err, topo.InvalidArgument, "malformed info")

	resumed, err := newConn.ResumeLeaderParticipation(ctx, "e", "one", info)
	require.NoError(t, err)
	oldConn.Close() // the abandoned Conn no longer owns the candidacy's session
	_, err = resumed.WaitForLeadership()
	require.NoError(t, err, "a resumed leader leads at once")
	term2, err := resumed.Term()
	require.NoError(t, err)
	require.Equal(t, term.Token(), term2.Token(), "the same term")
	l, err := resumed.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "one", Value: []byte("v"), Token: term.Token()}, l)
	_, err = topo.GuardedUpdate(ctx, newConn, term2, "state", []byte("resumed"), nil)
	require.NoError(t, err, "a write guarded by the resumed term")
	select {
	case err := <-waited:
		require.FailNow(t, "the waiter led while the resumed leader leads", "%v", err)
	default:
	}

	newConn.ExpireSession()
	require.NoError(t, <-waited, "the waiter leads once the resumed candidacy's session ended")
	third, err := s.NewConn("/r")
	require.NoError(t, err)
	t.Cleanup(third.Close)
	_, err = third.ResumeLeaderParticipation(ctx, "e", "one", info)
	require.ErrorIs(t, err, topo.LockLost, "resuming a candidacy whose session ended")
}
