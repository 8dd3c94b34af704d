package test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The subtests of leader values: Campaign, Proclaim, Resign, Leader,
// Observe and Resume (LeaderParticipation), on every backend.

// observer collects what an Observe channel sends, so that a subtest can
// wait for a state and check what was sent before it.
type observer struct {
	mu     sync.Mutex
	events []topo.Leader
	cond   chan struct{} // closed and replaced on every event
	closed bool
}

// observe starts Observe on p and collects its events until the subtest
// ends.
func observe(t *testing.T, ctx context.Context, p topo.LeaderParticipation) *observer {
	t.Helper()
	octx, cancel := context.WithCancel(ctx)
	ch, err := p.Observe(octx)
	require.NoError(t, err, "Observe")
	o := &observer{cond: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range ch {
			o.mu.Lock()
			o.events = append(o.events, l)
			close(o.cond)
			o.cond = make(chan struct{})
			o.mu.Unlock()
		}
		o.mu.Lock()
		o.closed = true
		close(o.cond)
		o.cond = make(chan struct{})
		o.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(longWait):
			t.Errorf("an Observe channel did not close %v after its context ended", longWait)
		}
	})
	return o
}

// snapshot returns the events so far and a channel closed at the next one.
func (o *observer) snapshot() ([]topo.Leader, <-chan struct{}, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]topo.Leader(nil), o.events...), o.cond, o.closed
}

// waitFor waits until the last event matches and returns every event so
// far.
func (o *observer) waitFor(t testing.TB, what string, match func(topo.Leader) bool) []topo.Leader {
	t.Helper()
	timeout := time.After(longWait)
	for {
		evs, next, closed := o.snapshot()
		if len(evs) > 0 && match(evs[len(evs)-1]) {
			return evs
		}
		if closed {
			require.FailNowf(t, "Observe closed", "%s: the channel closed; events: %s", what, fmtLeaders(evs))
		}
		select {
		case <-next:
		case <-timeout:
			require.FailNowf(t, "timed out", "%s: not observed within %v; events: %s", what, longWait, fmtLeaders(evs))
		}
	}
}

func fmtLeaders(ls []topo.Leader) string {
	var b bytes.Buffer
	for i, l := range ls {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{%q %q %d}", l.ID, l.Value, l.Token)
	}
	return "[" + b.String() + "]"
}

func is(id, value string) func(topo.Leader) bool {
	return func(l topo.Leader) bool { return l.ID == id && string(l.Value) == value }
}

func nobody(l topo.Leader) bool { return l.ID == "" }

// campaign runs p.Campaign(ctx, value) and requires it to succeed.
func campaign(t *testing.T, ctx context.Context, p topo.LeaderParticipation, value string) context.Context {
	t.Helper()
	lctx, err := p.Campaign(ctx, []byte(value))
	require.NoErrorf(t, err, "Campaign(%q)", value)
	require.NoError(t, lctx.Err(), "a fresh leadership context is live")
	return lctx
}

// requireLeaderValue requires Leader to report id and value, with the
// token of the leader's term.
func requireLeaderValue(t *testing.T, ctx context.Context, p topo.LeaderParticipation, id, value string, token int64, what string) {
	t.Helper()
	var last topo.Leader
	var lastErr error
	ok := eventually(func() bool {
		last, lastErr = p.Leader(ctx)
		return lastErr == nil && last.ID == id && string(last.Value) == value
	})
	require.Truef(t, ok, "%s: want leader %q with value %q, Leader gave {%q %q %d}, %v", what, id, value, last.ID, last.Value, last.Token, lastErr)
	require.Equalf(t, token, last.Token, "%s: Leader's token is not the leader's term token", what)
}

// termToken returns the token of p's current term.
func termToken(t *testing.T, p topo.LeaderParticipation) int64 {
	t.Helper()
	f, err := p.Term()
	require.NoError(t, err, "Term of the leader")
	require.Positive(t, f.Token())
	return f.Token()
}

// testCampaignValue: Campaign publishes its value with the candidacy; the
// id (what Vitess reads) is unchanged; Leader reports id, value and the
// term's token; NoLeader before anybody leads; Campaign while leading
// proclaims.
func testCampaignValue(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	watcher := participate(t, c2, "elec", "watcher")

	_, err := watcher.Leader(ctx)
	requireCode(t, err, topo.NoLeader, "Leader before anybody leads")
	o := observe(t, ctx, watcher)
	o.waitFor(t, "the first Observe event says nobody leads", nobody)

	lctx := campaign(t, ctx, p1, "addr-1")
	tok := termToken(t, p1)
	requireLeaderValue(t, ctx, watcher, "id1", "addr-1", tok, "after Campaign")
	requireLeader(t, ctx, watcher, "id1", "GetCurrentLeaderID after Campaign")
	evs := o.waitFor(t, "Observe after Campaign", is("id1", "addr-1"))
	for _, e := range evs {
		if e.ID == "id1" {
			require.Equal(t, "addr-1", string(e.Value), "a leader observed without its Campaign value")
			require.Equal(t, tok, e.Token)
		}
	}

	again, err := p1.Campaign(ctx, []byte("addr-1b"))
	require.NoError(t, err)
	require.True(t, again == lctx, "Campaign while leading returns the same context")
	requireLeaderValue(t, ctx, watcher, "id1", "addr-1b", tok, "after a second Campaign")

	// A late observer sees the current state first.
	late := observe(t, ctx, watcher)
	late.waitFor(t, "a late Observe", is("id1", "addr-1b"))
	evs, _, _ = late.snapshot()
	require.True(t, is("id1", "addr-1b")(evs[0]), "Observe must send the current leader first, sent %s", fmtLeaders(evs))

	_, err = p1.Campaign(ctx, make([]byte, topo.MaxValueSize+1))
	requireCode(t, err, topo.InvalidArgument, "Campaign with an oversized value")
	require.NoError(t, lctx.Err(), "a refused Campaign must not end the term")
}

// testProclaim: the leader replaces its value without a new term; a
// non-leader's Proclaim is NotLeader; many Proclaims end at the latest.
func testProclaim(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	watcher := participate(t, c3, "elec", "watcher")
	o := observe(t, ctx, watcher)

	err := p1.Proclaim(ctx, []byte("x"))
	requireCode(t, err, topo.NotLeader, "Proclaim before campaigning")

	lctx := campaign(t, ctx, p1, "v0")
	tok := termToken(t, p1)
	got := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(ctx, []byte("p2"))
		got <- err
	}()
	require.NoError(t, p1.Proclaim(ctx, []byte("v1")))
	requireLeaderValue(t, ctx, watcher, "id1", "v1", tok, "after Proclaim")
	o.waitFor(t, "Observe after Proclaim", is("id1", "v1"))
	require.Equal(t, tok, termToken(t, p1), "Proclaim must not start a new term")
	require.NoError(t, lctx.Err())

	err = p2.Proclaim(ctx, []byte("usurper"))
	requireCode(t, err, topo.NotLeader, "Proclaim by a waiting candidate")

	for i := 2; i <= 20; i++ {
		require.NoError(t, p1.Proclaim(ctx, fmt.Appendf(nil, "v%d", i)))
	}
	evs := o.waitFor(t, "many Proclaims end at the latest", is("id1", "v20"))
	for _, e := range evs {
		require.NotEqual(t, "usurper", string(e.Value), "a refused Proclaim was observed")
		require.NotEqual(t, "id2", e.ID, "a waiting candidate was observed as leader")
	}
	requireLeaderValue(t, ctx, watcher, "id1", "v20", tok, "after many Proclaims")

	requireCode(t, p1.Proclaim(ctx, make([]byte, topo.MaxValueSize+1)), topo.InvalidArgument, "Proclaim of an oversized value")

	require.NoError(t, p1.Resign(ctx))
	require.Error(t, lctx.Err(), "Resign must cancel the leadership context before it returns")
	select {
	case err := <-got:
		require.NoError(t, err, "p2's Campaign after p1 resigned")
	case <-time.After(longWait):
		t.Fatal("p2 did not take over after p1 resigned")
	}
	tok2 := termToken(t, p2)
	require.Greater(t, tok2, tok)
	requireLeaderValue(t, ctx, watcher, "id2", "p2", tok2, "after the handover")
	requireCode(t, p1.Proclaim(ctx, []byte("late")), topo.NotLeader, "Proclaim after Resign")
	evs = o.waitFor(t, "Observe after the handover", is("id2", "p2"))
	requireNoResignedLeader(t, evs, "id1")
}

// requireNoResignedLeader fails when, after the first event that shows
// another leader (or nobody), an event shows resigned as leader again.
func requireNoResignedLeader(t testing.TB, evs []topo.Leader, resigned string) {
	t.Helper()
	seen, moved := false, false
	for _, e := range evs {
		if e.ID != resigned {
			moved = moved || seen
			continue
		}
		seen = true
		require.Falsef(t, moved, "a leader that resigned was observed as current again: %s", fmtLeaders(evs))
	}
}

// testProclaimDeposed: a leader whose session the store dropped cannot
// proclaim, and its value is never observed after the loss.
func testProclaimDeposed(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	watcher := participate(t, c3, "elec", "watcher")
	o := observe(t, ctx, watcher)

	lctx := campaign(t, ctx, p1, "old")
	tok := termToken(t, p1)
	got := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(ctx, []byte("new"))
		got <- err
	}()
	s.opts.ExpireSession(t, c1)
	requireLeadershipGone(t, lctx, "after ExpireSession")
	err := p1.Proclaim(ctx, []byte("stale"))
	require.Error(t, err, "Proclaim by a deposed leader")
	requireOneOf(t, err, "Proclaim by a deposed leader", topo.NotLeader, topo.LockLost)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(longWait + s.opts.SessionBound):
		t.Fatal("p2 did not take over after p1's session loss")
	}
	tok2 := termToken(t, p2)
	require.Greater(t, tok2, tok)
	requireCode(t, p1.Proclaim(ctx, []byte("stale")), topo.NotLeader, "Proclaim by a deposed leader after the handover")
	requireLeaderValue(t, ctx, watcher, "id2", "new", tok2, "after the handover")
	evs := o.waitFor(t, "Observe after the handover", is("id2", "new"))
	for _, e := range evs {
		require.NotEqual(t, "stale", string(e.Value), "a deposed leader's Proclaim was observed")
	}
	requireNoResignedLeader(t, evs, "id1")
}

// testCampaignContextEnds: a Campaign whose context ends first withdraws
// the candidacy.
func testCampaignContextEnds(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	watcher := participate(t, c3, "elec", "watcher")
	campaign(t, ctx, p1, "v1")

	_, err := p2.Campaign(shortCtx(t, promptWait), []byte("v2"))
	requireCode(t, err, topo.Timeout, "Campaign whose deadline passes")
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(cctx, []byte("v2"))
		got <- err
	}()
	requireNothing(t, got, "a Campaign while another participant leads")
	cancel()
	err, _ = recv(t, got, "the Campaign whose context was cancelled")
	requireCode(t, err, topo.Interrupted, "Campaign whose context is cancelled")

	require.NoError(t, p1.Resign(ctx))
	o := observe(t, ctx, watcher)
	o.waitFor(t, "nobody leads once the only leader resigned", nobody)
	_, err = watcher.Leader(ctx)
	requireCode(t, err, topo.NoLeader, "Leader after the withdrawn candidate's Campaign ended")
	evs, _, _ := o.snapshot()
	for _, e := range evs {
		require.NotEqual(t, "id2", e.ID, "a withdrawn candidate became leader")
	}
}

// testResign: Resign with a cancelled context still withdraws (within a
// bounded grace); the participant may Campaign again after Resign; Resign
// with nothing to resign is nil.
func testResign(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	p1 := participate(t, c1, "elec", "id1")
	watcher := participate(t, c2, "elec", "watcher")

	require.NoError(t, p1.Resign(ctx), "Resign with nothing to resign")
	lctx := campaign(t, ctx, p1, "v1")
	err := p1.Resign(cancelledCtx(t))
	if err != nil {
		requireOneOf(t, err, "Resign with a cancelled context", topo.Interrupted, topo.Timeout)
	}
	require.Error(t, lctx.Err(), "Resign must cancel the leadership context")
	o := observe(t, ctx, watcher)
	o.waitFor(t, "the entry goes after Resign with a cancelled context", nobody)

	lctx = campaign(t, ctx, p1, "v2")
	requireLeaderValue(t, ctx, watcher, "id1", "v2", termToken(t, p1), "Campaign after Resign")
	p1.Stop()
	require.Error(t, lctx.Err())
	_, err = p1.Campaign(ctx, []byte("v3"))
	requireCode(t, err, topo.Interrupted, "Campaign after Stop")
}

// testObserveHandovers: through many handovers, the observed sequence never
// shows a leader after it resigned, and ends at the current state.
func testObserveHandovers(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	cs := s.conns(4)
	watcher := participate(t, cs[3], "elec", "watcher")
	o := observe(t, ctx, watcher)
	ps := make([]topo.LeaderParticipation, 3)
	for i := range ps {
		ps[i] = participate(t, cs[i], "elec", fmt.Sprintf("id%d", i))
	}
	prev, prevValue, mark := "", "", 0
	for round := range 3 {
		for i, p := range ps {
			id := fmt.Sprintf("id%d", i)
			v := fmt.Sprintf("r%d", round)
			campaign(t, ctx, p, v)
			evs := o.waitFor(t, "Observe of "+id, is(id, v))
			for _, e := range evs[mark:] {
				require.Falsef(t, prev != "" && e.ID == prev && string(e.Value) == prevValue,
					"%s was observed as leader after it resigned: %s", prev, fmtLeaders(evs))
			}
			require.NoError(t, p.Resign(ctx))
			evs = o.waitFor(t, "Observe after "+id+" resigned", func(l topo.Leader) bool { return l.ID != id })
			prev, prevValue, mark = id, v, len(evs)
		}
	}
	o.waitFor(t, "the last event is the current state (nobody)", nobody)
}

// testResume: a participation resumed from ResumeInfo on another Conn,
// while the original's session is alive but its process is gone (its
// traffic cut), keeps the entry's place, its leadership and its term, and
// keeps the session alive past the session bound.
func testResume(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	part := s.partitioned()
	c2, c3 := s.conn(), s.conn()
	p1 := participate(t, part.Conn, "elec", "id1")
	p2 := participate(t, c2, "elec", "id2")
	watcher := participate(t, c3, "elec", "watcher")

	_, err := p1.ResumeInfo()
	requireCode(t, err, topo.NoNode, "ResumeInfo before campaigning")
	campaign(t, ctx, p1, "v1")
	tok := termToken(t, p1)
	info, err := p1.ResumeInfo()
	require.NoError(t, err)
	require.NotEmpty(t, info)
	waiting := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(ctx, []byte("v2"))
		waiting <- err
	}()

	// The process "restarts": its Conn goes silent, a new one resumes.
	part.Cut()
	c4 := s.conn()
	_, err = c4.ResumeLeaderParticipation(ctx, "elec", "other-id", info)
	requireCode(t, err, topo.InvalidArgument, "Resume with another id")
	_, err = c4.ResumeLeaderParticipation(ctx, "other-elec", "id1", info)
	requireCode(t, err, topo.InvalidArgument, "Resume for another election")
	_, err = c4.ResumeLeaderParticipation(ctx, "elec", "id1", []byte("garbage"))
	requireCode(t, err, topo.InvalidArgument, "Resume with malformed info")
	r, err := c4.ResumeLeaderParticipation(ctx, "elec", "id1", info)
	require.NoError(t, err, "Resume while the session is alive")
	stopOnCleanup(t, r)
	lctx, err := r.WaitForLeadership()
	require.NoError(t, err, "the resumed participation leads at once")
	require.NoError(t, lctx.Err())
	require.Equal(t, tok, termToken(t, r), "a resumed leader keeps its term")

	// Past the session bound, the resumed participation keeps the session
	// alive, so the leader does not change.
	time.Sleep(s.opts.SessionBound + promptWait)
	require.NoError(t, lctx.Err(), "the resumed leader lost its term: the session was not kept alive")
	requireLeaderValue(t, ctx, watcher, "id1", "v1", tok, "after the session bound")
	select {
	case err := <-waiting:
		t.Fatalf("p2 took over while the resumed participation led (Campaign returned %v)", err)
	default:
	}
	require.NoError(t, r.Proclaim(ctx, []byte("v1-resumed")))
	requireLeaderValue(t, ctx, watcher, "id1", "v1-resumed", tok, "Proclaim by the resumed leader")

	require.NoError(t, r.Resign(ctx))
	require.Error(t, lctx.Err())
	select {
	case err := <-waiting:
		require.NoError(t, err)
	case <-time.After(longWait):
		t.Fatal("p2 did not take over after the resumed leader resigned")
	}
	requireLeaderValue(t, ctx, watcher, "id2", "v2", termToken(t, p2), "after the resumed leader resigned")

	// A candidacy whose session ended cannot be resumed.
	info2, err := p2.ResumeInfo()
	require.NoError(t, err)
	s.opts.ExpireSession(t, c2)
	_, err = c4.ResumeLeaderParticipation(ctx, "elec", "id2", info2)
	requireCode(t, err, topo.LockLost, "Resume after the session ended")
}

// The resume tests below share one set-up: Conn A, the earlier process,
// locks d and leads elec (as id1, with value v1) on its one session; its
// process "restarts" (A's traffic is cut) and Conn B resumes the
// candidacy from its ResumeInfo. These helpers are its steps, so that a
// test can put its own steps between them (A's lock of d: mustLock).

// leadElec campaigns on c as id1 in elec with value v1 and returns the
// candidacy's ResumeInfo, and, with withToken, its term's token (read
// before the ResumeInfo; 0 without).
func leadElec(t *testing.T, ctx context.Context, c topo.Conn, withToken bool) (int64, []byte) {
	t.Helper()
	p := participate(t, c, "elec", "id1")
	campaign(t, ctx, p, "v1")
	var tok int64
	if withToken {
		tok = termToken(t, p)
	}
	info, err := p.ResumeInfo()
	require.NoError(t, err)
	return tok, info
}

// resumeElec resumes id1's candidacy in elec on b from info, requires it
// to succeed and stops the resumed participation when the subtest ends.
func resumeElec(t *testing.T, ctx context.Context, b topo.Conn, info []byte) topo.LeaderParticipation {
	t.Helper()
	r, err := b.ResumeLeaderParticipation(ctx, "elec", "id1", info)
	require.NoError(t, err, "Resume while the session is alive")
	stopOnCleanup(t, r)
	return r
}

// resumedLeads requires the resumed participation r (named what) to lead
// at once (within longWait).
func resumedLeads(t *testing.T, r topo.LeaderParticipation, what string) leadResult {
	t.Helper()
	res := recvWithin(t, leadAsync(r), longWait, "WaitForLeadership of "+what)
	require.NoErrorf(t, res.err, "%s leads at once", what)
	return res
}

// restart is the earlier process's restart: A's traffic is cut (part),
// and b resumes id1's candidacy in elec from info, which leads at once.
func restart(t *testing.T, ctx context.Context, part Partitioned, b topo.Conn, info []byte) (topo.LeaderParticipation, leadResult) {
	t.Helper()
	part.Cut()
	r := resumeElec(t, ctx, b, info)
	return r, resumedLeads(t, r, "the resumed participation")
}

// testResumeEndStop and testResumeEndResign: Conn A holds lock d, leads
// election elec2 and campaigns on elec, all on its one session; its
// process "restarts" (A's traffic is cut, as in testResume: on ZooKeeper
// a live A would take the session back when it reconnects) and Conn B
// resumes the elec candidacy, adopting that session. While the resumed
// participation lives, nobody else gets d (the session, A's entries
// included, is alive). Its end (Stop, or Resign) ends the adopted
// session, and with it everything the earlier process had on it: a Lock
// of d queued on Conn C is granted, and D, waiting in elec2, leads,
// without B's Conn closing or a TTL lapsing (the context deadline of
// C's Lock, far above a handover's latency, is the failure signal). A,
// healed, then finds its lock lost: every guarded write with it is
// refused and writes nothing, while C's succeed (never two holders).
func testResumeEndStop(s *store) {
	testResumeEnd(s, "Stop", func(ctx context.Context, r topo.LeaderParticipation) error {
		r.Stop()
		return nil
	})
}

func testResumeEndResign(s *store) {
	testResumeEnd(s, "Resign", func(ctx context.Context, r topo.LeaderParticipation) error {
		return r.Resign(ctx)
	})
}

// testResumeEnd is testResumeEndStop and testResumeEndResign, ending the
// resumed participation with end.
func testResumeEnd(s *store, how string, end func(context.Context, topo.LeaderParticipation) error) {
	t, ctx := s.t, ctxFor(s.t)
	part := s.partitioned()
	a := part.Conn
	b, c, d := s.conn(), s.conn(), s.conn()
	fx := newStaleFixture(t, ctx, s.conn())

	la := mustLock(t, ctx, a, "d", "earlier process")
	fx.guardedWrites(t, ctx, a, la, "by-a")
	campaign(t, ctx, participate(t, a, "elec2", "id1"), "w1")
	tok, info := leadElec(t, ctx, a, true)
	next := leadAsync(participate(t, d, "elec2", "id2"))

	// The process "restarts": A goes silent, B resumes the candidacy.
	r, res := restart(t, ctx, part, b, info)
	lctx := res.ctx
	require.Equal(t, tok, termToken(t, r), "a resumed leader keeps its term")

	// C's deadline is the failure signal: a backend that keeps the adopted
	// session until B's Conn closes (or its TTL lapses) never grants it.
	wctx := shortCtx(t, longWait)
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c.Lock(wctx, "d", "successor") })
	requireNothing(t, got, "C's Lock of d while the resumed participation lives on the session holding it")
	requireNothing(t, next, "D's candidacy in elec2 while the resumed participation lives on the session leading it")

	require.NoErrorf(t, end(ctx, r), "%s of the resumed participation", how)
	requireDone(t, lctx, "the resumed leader's context after its "+how)
	rl := recvWithin(t, got, 2*longWait, "C's Lock of d (its context ends after longWait)")
	require.NoErrorf(t, rl.err, "C's Lock of d after the resumed participation's %s: the adopted session, holding the earlier process's lock, was not ended", how)
	requireDoneOpen(t, rl.l, "C's lock")
	lead := recvWithin(t, next, longWait, "D's WaitForLeadership in elec2 after the resumed participation's "+how)
	require.NoErrorf(t, lead.err, "D in elec2 after the resumed participation's %s", how)
	require.NoError(t, lead.ctx.Err(), "D leads elec2")
	fx.guardedWrites(t, ctx, c, rl.l, "by-c")

	// A comes back: its lock is lost, and its guarded writes harm nobody.
	part.Heal()
	requireLostAfterHeal(t, ctx, la, "A (the earlier process)")
	fx.requireStaleRefused(t, ctx, a, la, "A's lock after the resumed participation's "+how)
	requireCode(t, la.Unlock(ctx), topo.LockLost, "A's Unlock after the heal")
	require.NoError(t, rl.l.Check(ctx), "C still holds d")
	fx.guardedWrites(t, ctx, c, rl.l, "by-c-after-a")
	require.NoError(t, rl.l.Unlock(ctx))
}

// testElectionDirsEphemeral: every backend marks the top-level elections
// directory, and an election's directory, Ephemeral in a full ListDir
// while only candidates are below it (as Vitess's backends do), and the
// published values are not files.
func testElectionDirsEphemeral(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c := s.conn()
	mustCreate(t, ctx, c, "f", "x")
	p := participate(t, c, "elec", "id1")
	campaign(t, ctx, p, "value")

	entries, err := c.ListDir(ctx, "", true)
	require.NoError(t, err)
	e := entry(t, entries, "elections")
	require.Equal(t, topo.TypeDirectory, e.Type)
	require.True(t, e.Ephemeral, "the top-level elections directory must be Ephemeral in a full ListDir")
	require.False(t, entry(t, entries, "f").Ephemeral)

	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"f"}, kvPaths(kvs), "a published value must not be listed as a file")
}

// testResumeOwnSession: a Conn resumes a candidacy of its own (the
// ResumeInfo of one of its participations, as a component of a process
// that did not restart might). A backend may refuse it (etcd:
// InvalidArgument; Consul: NodeExists) or resume it; either way the
// Conn's own session is not the earlier process's to end: the Conn's
// lock d and its leadership of elec2 outlive the resumed participation's
// Stop (and the refused attempt), and nobody else gets d meanwhile.
func testResumeOwnSession(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a, c := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	la := mustLock(t, ctx, a, "d", "own")
	p2 := participate(t, a, "elec2", "id1")
	lctx2 := campaign(t, ctx, p2, "w1")
	_, info := leadElec(t, ctx, a, false)

	r, err := a.ResumeLeaderParticipation(ctx, "elec", "id1", info)
	if err == nil {
		stopOnCleanup(t, r)
		res := resumedLeads(t, r, "the resumed participation")
		r.Stop()
		requireDone(t, res.ctx, "the resumed leader's context after its Stop")
	} else {
		code := topo.CodeOf(err)
		require.Truef(t, code == topo.InvalidArgument || code == topo.NodeExists, "Resume of the Conn's own candidacy: %v", err)
	}
	require.NoError(t, la.Check(ctx), "the Conn's lock d after it resumed (and stopped) a candidacy of its own session")
	require.NoError(t, lctx2.Err(), "the Conn's lead of elec2 after it resumed (and stopped) a candidacy of its own session")
	_, err = p2.Term()
	require.NoError(t, err, "the Conn's term in elec2")
	_, err = c.TryLock(ctx, "d", "other")
	require.Error(t, err, "C's TryLock of d while the Conn holds it")
	require.NoError(t, la.Unlock(ctx))
	require.NoError(t, p2.Resign(ctx))
}

// testResumeTwoOnOneSession: Conn A leads elec and elec3 on its one
// session; its process "restarts" and Conn B resumes both candidacies.
// A backend may refuse the second (etcd, ZooKeeper, Consul: NodeExists: the
// Conn holds that session already); when it resumes it, both resumed
// participations live on the one adopted session, and the first's Stop
// ends that session: the second's term ends too (LockLost, its context
// cancelled, its guarded writes refused) before D, waiting in elec3,
// leads: the second never acts as leader beside D.
func testResumeTwoOnOneSession(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	part := s.partitioned()
	a := part.Conn
	b, d := s.conn(), s.conn()
	fx := newStaleFixture(t, ctx, s.conn())
	p1 := participate(t, a, "elec", "id1")
	campaign(t, ctx, p1, "v1")
	p3 := participate(t, a, "elec3", "id1")
	campaign(t, ctx, p3, "w1")
	info1, err := p1.ResumeInfo()
	require.NoError(t, err)
	info3, err := p3.ResumeInfo()
	require.NoError(t, err)
	next := leadAsync(participate(t, d, "elec3", "id2"))

	part.Cut()
	r1, err := b.ResumeLeaderParticipation(ctx, "elec", "id1", info1)
	require.NoError(t, err, "Resume of the first candidacy")
	stopOnCleanup(t, r1)
	res1 := resumedLeads(t, r1, "the first resumed participation")
	r3, err := b.ResumeLeaderParticipation(ctx, "elec3", "id1", info3)
	var ctx3 context.Context
	var term3 topo.Fence
	if err != nil {
		requireCode(t, err, topo.NodeExists, "Resume of a second candidacy on the session B adopted")
	} else {
		stopOnCleanup(t, r3)
		res3 := resumedLeads(t, r3, "the second resumed participation")
		ctx3 = res3.ctx
		term3, err = r3.Term()
		require.NoError(t, err)
		fx.guardedWrites(t, ctx, b, term3, "by-r3")
	}
	requireNothing(t, next, "D's candidacy in elec3 while the session leading it lives")

	r1.Stop()
	requireDone(t, res1.ctx, "the first resumed leader's context after its Stop")
	lead := recvWithin(t, next, longWait, "D's WaitForLeadership in elec3 after the first resumed participation's Stop")
	require.NoError(t, lead.err, "D in elec3")
	if ctx3 != nil {
		select {
		case <-ctx3.Done():
		default:
			t.Fatal("D leads elec3 while the second resumed participation's term has not ended: two leaders")
		}
		_, err = r3.Term()
		requireCode(t, err, topo.NotLeader, "the second resumed participation's Term once the adopted session ended")
		fx.requireStaleRefused(t, ctx, b, term3, "the second resumed term after the adopted session ended")
	}
	dterm, err := lead.ctx, nil
	require.NoError(t, dterm.Err(), "D leads elec3")
	part.Heal()
}

// testResumeEndCut: as testResumeEndStop, but the resuming Conn B is
// itself cut off from the store when its resumed participation stops, so
// the end of the adopted session may not reach the store. The session
// must not be leaked (kept alive) for all that: the resumed leader's
// context ends at Stop, C's Lock of d (held by the earlier process on
// that session) is granted within the session bound, and once B and then
// A heal, nothing of the session comes back: C still holds d, A's lock
// is lost and its guarded writes are refused, and E leads elec.
func testResumeEndCut(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	partA, partB := s.partitioned(), s.partitioned()
	a, b := partA.Conn, partB.Conn
	c, e := s.conn(), s.conn()
	fx := newStaleFixture(t, ctx, s.conn())

	la := mustLock(t, ctx, a, "d", "earlier process")
	_, info := leadElec(t, ctx, a, false)
	r, res := restart(t, ctx, partA, b, info)

	partB.Cut()
	stopped := make(chan struct{})
	go func() {
		r.Stop()
		close(stopped)
	}()
	recvWithin(t, stopped, longWait, "Stop of the resumed participation while its Conn is cut off")
	requireDone(t, res.ctx, "the resumed leader's context after its Stop")
	wctx := s.partitionCtx()
	lc, err := c.Lock(wctx, "d", "successor")
	require.NoError(t, err, "C's Lock of d after the resumed participation stopped, its Conn cut off: the adopted session was kept alive")
	unlockOnCleanup(t, lc)
	fx.guardedWrites(t, ctx, c, lc, "by-c")

	partB.Heal()
	pe := participate(t, e, "elec", "id2")
	campaign(t, ctx, pe, "v2")
	partA.Heal()
	requireLostAfterHeal(t, ctx, la, "A (the earlier process)")
	fx.requireStaleRefused(t, ctx, a, la, "A's lock after the resumed participation stopped")
	_, err = r.Term()
	requireCode(t, err, topo.NotLeader, "the stopped resumed participation")
	require.NoError(t, lc.Check(ctx), "C still holds d")
	fx.guardedWrites(t, ctx, c, lc, "by-c-after-heal")
}

// testResumeRecampaign: after the resumed participation resigns (ending
// the adopted session: the earlier process's lock d passes to C), it
// campaigns again: its new candidacy is on the resuming Conn B's own
// session, with a greater token, and its later Stop ends nothing else of
// B's: B's own lock e, taken before the Resume, is still held.
func testResumeRecampaign(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	part := s.partitioned()
	a := part.Conn
	b, c := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	mustCreate(t, ctx, c, "e/f", "x")
	le := mustLock(t, ctx, b, "e", "B's own")
	la := mustLock(t, ctx, a, "d", "earlier process")
	tok, info := leadElec(t, ctx, a, true)

	part.Cut()
	r := resumeElec(t, ctx, b, info)
	require.NoError(t, r.Resign(ctx))
	wctx := shortCtx(t, longWait)
	lc, err := c.Lock(wctx, "d", "successor")
	require.NoError(t, err, "C's Lock of d after the resumed participation's Resign")
	unlockOnCleanup(t, lc)

	lctx := campaign(t, ctx, r, "v2")
	require.Greater(t, termToken(t, r), tok, "the new term of the resumed participation")
	require.NoError(t, le.Check(ctx), "B's own lock e while its participation campaigns again")
	r.Stop()
	requireDone(t, lctx, "the new term's context after Stop")
	require.NoError(t, le.Check(ctx), "B's own lock e after the participation's new candidacy stopped")
	_, err = c.TryLock(ctx, "e", "other")
	require.Error(t, err, "C's TryLock of e while B holds it")
	require.NoError(t, lc.Check(ctx), "C still holds d")
	require.NoError(t, le.Unlock(ctx))
	part.Heal()
	requireLostAfterHeal(t, ctx, la, "A (the earlier process)")
}

// testResumeStopRacesClose: the resumed participation's Stop and its
// Conn's Close run at once; both return, the adopted session ends
// either way (C gets d, the earlier process's lock), and the earlier
// process's lock is lost when it heals.
func testResumeStopRacesClose(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	part := s.partitioned()
	a := part.Conn
	b, c := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	la := mustLock(t, ctx, a, "d", "earlier process")
	_, info := leadElec(t, ctx, a, false)

	part.Cut()
	// Not resumeElec: no Stop at cleanup besides the one racing Close.
	r, err := b.ResumeLeaderParticipation(ctx, "elec", "id1", info)
	require.NoError(t, err, "Resume while the session is alive")
	res := resumedLeads(t, r, "the resumed participation")
	done := make(chan struct{}, 2)
	go func() { r.Stop(); done <- struct{}{} }()
	go func() { b.Close(); done <- struct{}{} }()
	recvWithin(t, done, longWait, "Stop or Close")
	recvWithin(t, done, longWait, "Stop or Close")
	requireDone(t, res.ctx, "the resumed leader's context")
	lc, err := c.Lock(shortCtx(t, longWait), "d", "successor")
	require.NoError(t, err, "C's Lock of d after the resumed participation's Stop and its Conn's Close")
	unlockOnCleanup(t, lc)
	part.Heal()
	requireLostAfterHeal(t, ctx, la, "A (the earlier process)")
	require.NoError(t, lc.Check(ctx), "C still holds d")
}

// testResumeEndAfterLoss: the resumed participation's term ends while
// the adopted session may still live (its Conn B is cut off long enough
// to give the term up, memorytopo's partition notice, then heals before
// the store lapses the session, or the session lapses). Its Stop must
// still end the adopted session (the earlier process's lock d passes to
// C) though its own entry is already gone: a Stop that ends the session
// only when it deletes the entry leaves the session renewed by B, with
// the earlier process's lock on it, until B's Close.
func testResumeEndAfterLoss(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	partA, partB := s.partitioned(), s.partitioned()
	a, b := partA.Conn, partB.Conn
	c := s.conn()
	fx := newStaleFixture(t, ctx, s.conn())

	la := mustLock(t, ctx, a, "d", "earlier process")
	_, info := leadElec(t, ctx, a, false)
	r, res := restart(t, ctx, partA, b, info)

	partB.Cut()
	select {
	case <-res.ctx.Done():
	case <-time.After(2 * (s.opts.SessionBound + longWait)):
		t.Fatal("the resumed leader's term outlived its Conn's partition")
	}
	partB.Heal()
	r.Stop()
	lc, err := c.Lock(s.partitionCtx(), "d", "successor")
	require.NoError(t, err, "C's Lock of d after the lost resumed participation's Stop: the adopted session was kept")
	unlockOnCleanup(t, lc)
	fx.guardedWrites(t, ctx, c, lc, "by-c")
	partA.Heal()
	requireLostAfterHeal(t, ctx, la, "A (the earlier process)")
	fx.requireStaleRefused(t, ctx, a, la, "A's lock after the resumed participation ended")
	require.NoError(t, lc.Check(ctx), "C still holds d")
}
