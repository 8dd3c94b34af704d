package consultopo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// frozenSession returns a copy of s as a paused holder remembers it: the
// same session id, never lost, valid for another hour.
func frozenSession(s *session) *session {
	f := &session{id: s.id, ttl: s.ttl, own: s.own, ctx: context.Background(), endCtx: func(error) {}, deadline: time.Now().Add(time.Hour)}
	f.view = claims.NewSession(s.id, f)
	return f
}

// frozenDriver is the driver of a Conn whose Create hands out one granted
// entry on one session, and which watches and reads nothing of it (Held
// says held: a term's first look reads it): an engine over it issues a
// copy of a claim as a holder paused since its acquire sees it.
type frozenDriver struct {
	driver
	e claims.Entry
	s *session
}

func (f frozenDriver) Create(context.Context, claims.Queue, string, claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	return f.e, f.s.view, nil
}

func (frozenDriver) Monitor(claims.Queue, *claims.Session, claims.Entry, <-chan struct{}) {}

func (frozenDriver) Held(context.Context, claims.Queue, *claims.Session, claims.Entry) (bool, error) {
	return true, nil
}

// frozenEngine returns an engine issuing copies of the claim behind f,
// with the claim's guard.
func frozenEngine(t *testing.T, f topo.Fence) (*claims.Engine, claims.Guard) {
	t.Helper()
	g, ok := claims.FenceGuard(f)
	require.True(t, ok)
	fd := frozenDriver{driver: g.Driver().(driver), e: g.Entry(), s: frozenSession(sessionOf(g.Session()))}
	return claims.New(fd, claims.Options{}), g
}

// frozen returns a copy of the lock l as a holder paused since the acquire
// would see it: held, its session alive. Only the store can tell it is
// stale.
func frozen(t *testing.T, l topo.LockDescriptor) topo.Fence {
	t.Helper()
	e, g := frozenEngine(t, l)
	c, err := e.LockName(t.Context(), g.Queue().Path, g.Entry().Contents)
	require.NoError(t, err)
	return c
}

// frozenTerm is frozen for a leadership term.
func frozenTerm(t *testing.T, term topo.Fence) topo.Fence {
	t.Helper()
	e, g := frozenEngine(t, term)
	p, err := e.NewLeaderParticipation(g.Queue().Path, g.Entry().Contents)
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	f, err := p.Term()
	require.NoError(t, err)
	return f
}

// fenceSession returns the session of a claim's fence.
func fenceSession(t testing.TB, f topo.Fence) *session {
	g, ok := claims.FenceGuard(f)
	require.True(t, ok)
	return sessionOf(g.Session())
}

// requireClosed waits (at most waitFor) for done to close.
func requireClosed(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, done, what)
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("%s: Done did not close", what)
	}
}

// requireOpen asserts done is not closed now.
func requireOpen(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, done, what)
	select {
	case <-done:
		t.Fatalf("%s: Done is closed", what)
	default:
	}
}

// requireStoreRefused asserts err is the LockLost of op 0 and that it came
// from Consul's check (the holder's local state said held).
func requireStoreRefused(t *testing.T, err error) {
	t.Helper()
	requireTxnErr(t, err, 0, topo.LockLost)
	require.Truef(t, strings.Contains(err.Error(), "session check") || strings.Contains(err.Error(), "index check") || strings.Contains(err.Error(), "doesn't exist"),
		"not refused by Consul's check: %v", err)
}

// requireFile asserts filePath holds contents at version v.
func requireFile(t *testing.T, c *Conn, filePath, contents string, v topo.Version) {
	t.Helper()
	got, gv, err := c.Get(t.Context(), filePath)
	require.NoError(t, err)
	require.Equal(t, contents, string(got), "%s was written", filePath)
	require.Equal(t, v, gv, "%s was written", filePath)
}

// TestGuardedWriteAfterSessionExpiry (issue 11, stale holder (a)): once
// Consul dropped the holder's session, the holder's guarded write is
// refused (locally: it noticed), a paused copy's is refused by Consul
// before and after a successor acquired, and nothing stale is written.
// The same for a leadership term.
func TestGuardedWriteAfterSessionExpiry(t *testing.T) {
	root := testRoot(t)
	c1 := newShortTTLConn(t, root)
	c2 := newTestConn(t, root)
	ctx := t.Context()
	v, err := c1.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l1, err := c1.Lock(ctx, "d", "one")
	require.NoError(t, err)
	paused := frozen(t, l1)
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	defer p1.Stop()
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	t1, err := p1.Term()
	require.NoError(t, err)
	pausedTerm := frozenTerm(t, t1)

	expireSession(t, c1)
	requireClosed(t, l1.Done(), "lock after session expiry")
	requireClosed(t, t1.Done(), "term after session expiry")
	_, err = topo.GuardedUpdate(ctx, c1, l1, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c1, t1, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c1, paused, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	_, err = topo.GuardedUpdate(ctx, c1, pausedTerm, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	_, err = p1.Term()
	requireCode(t, err, topo.NotLeader)

	l2, err := c2.Lock(ctx, "d", "two")
	require.NoError(t, err)
	require.Greater(t, l2.Token(), l1.Token())
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	defer p2.Stop()
	_, err = p2.WaitForLeadership()
	require.NoError(t, err)
	t2, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, t2.Token(), t1.Token())

	_, err = topo.GuardedUpdate(ctx, c1, paused, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	_, err = topo.GuardedUpdate(ctx, c2, paused, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	_, err = topo.GuardedUpdate(ctx, c1, pausedTerm, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	requireFile(t, c2, "d/f", "0", v)
	_, err = c2.Txn(ctx, topo.IfHeld(l2), topo.IfHeld(t2), topo.UpdateOp("d/f", []byte("two"), v))
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(ctx))
}

// TestGuardedWritePartitionedAndPausedHolder (issue 11, stale holders (b)
// and (c)): the holder is cut off by a proxy and sends nothing while its
// session runs out in Consul; a successor acquires the lock and the
// leadership; right after the partition heals, a paused copy of the old
// holder (whose local state still says held: it noticed nothing) and the
// old holder itself try guarded writes: both are refused, nothing stale is
// written.
func TestGuardedWritePartitionedAndPausedHolder(t *testing.T) {
	root := testRoot(t)
	proxy, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	defer proxy.Close()
	opts := shortTTLOptions()
	opts.Address = proxy.Addr()
	old, err := NewConn(opts, root)
	require.NoError(t, err)
	defer old.Close()
	next := newTestConn(t, root)
	ctx := t.Context()

	v, err := old.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l1, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	p1, err := old.NewLeaderParticipation("e", "old")
	require.NoError(t, err)
	defer p1.Stop()
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	t1, err := p1.Term()
	require.NoError(t, err)
	pausedLock, pausedTerm := frozen(t, l1), frozenTerm(t, t1)

	type won struct {
		f   topo.Fence
		err error
	}
	lockWon, leadWon := make(chan won, 1), make(chan won, 1)
	go func() {
		l, err := next.Lock(ctx, "d", "next")
		lockWon <- won{l, err}
	}()
	p2, err := next.NewLeaderParticipation("e", "next")
	require.NoError(t, err)
	defer p2.Stop()
	go func() {
		_, err := p2.WaitForLeadership()
		if err != nil {
			leadWon <- won{nil, err}
			return
		}
		f, err := p2.Term()
		leadWon <- won{f, err}
	}()
	proxy.Blackhole()
	var l2, t2 topo.Fence
	for _, w := range []struct {
		ch  chan won
		got *topo.Fence
	}{{lockWon, &l2}, {leadWon, &t2}} {
		select {
		case r := <-w.ch:
			require.NoError(t, r.err)
			*w.got = r.f
		case <-time.After(4*shortTTL + waitFor):
			t.Fatal("the successor did not acquire")
		}
	}
	proxy.Heal()

	// (c) the paused holder, first thing after it resumes.
	_, err = topo.GuardedUpdate(ctx, old, pausedLock, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	_, err = topo.GuardedUpdate(ctx, old, pausedTerm, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	// (b) the partitioned holder, which gave up at its session deadline.
	requireClosed(t, l1.Done(), "the partitioned holder's lock")
	requireClosed(t, t1.Done(), "the partitioned holder's term")
	_, err = topo.GuardedUpdate(ctx, old, l1, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, old, t1, "d/f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	requireFile(t, next, "d/f", "0", v)

	require.Greater(t, l2.Token(), l1.Token())
	require.Greater(t, t2.Token(), t1.Token())
	_, err = next.Txn(ctx, topo.IfHeld(l2), topo.IfHeld(t2), topo.UpdateOp("d/f", []byte("next"), v))
	require.NoError(t, err)
	require.NoError(t, l2.(topo.LockDescriptor).Unlock(ctx))
}

// destroySessions destroys every session of c through raw, and waits
// until c noticed.
func destroySessions(t *testing.T, c *Conn, raw *api.Client) {
	t.Helper()
	sessions := connSessions(c)
	for _, s := range sessions {
		_, err := raw.Session().Destroy(s.id, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, s := range sessions {
			if !s.lost() {
				return false
			}
		}
		return true
	}, 2*MinSessionTTL+waitFor, tick, "the Conn did not notice that its sessions were destroyed")
}

// TestTokensIncrease (issue 11): over many handovers of one lock and one
// election between three Conns, with every lock kind, session losses and a
// restart of the (persistent) agent mixed in, every token is greater than
// every earlier holder's.
func TestTokensIncrease(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	root := testRoot(t)
	cfg := api.DefaultConfig()
	cfg.Address = a.Addr()
	raw, err := api.NewClient(cfg)
	require.NoError(t, err)
	// Short sessions: a Conn notices a destroyed session at its next
	// renewal, every half TTL.
	opts := shortTTLOptions()
	opts.Address = a.Addr()
	conns := make([]*Conn, 3)
	for i := range conns {
		conns[i], err = NewConn(opts, root)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	ctx := t.Context()
	_, err = conns[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	// retry runs f until it stops failing with Unavailable (the agent
	// restarting) or LockLost: the Conns' sessions (shortTTL) may lapse
	// while the agent restarts, and a claim call in flight when its Conn
	// gives its session up ends LockLost, as a waiter's does; the next
	// call takes a new session.
	retry := func(f func() error) {
		t.Helper()
		var err error
		require.Eventually(t, func() bool {
			err = f()
			return !topo.IsErrType(err, topo.Unavailable) && !topo.IsErrType(err, topo.LockLost)
		}, waitFor, tick)
		require.NoError(t, err)
	}

	var lockTokens, termTokens []int64
	for round := range 24 {
		t.Logf("round %d", round)
		c := conns[round%3]
		var l topo.LockDescriptor
		retry(func() (err error) {
			switch round % 4 {
			case 0:
				l, err = c.Lock(ctx, "d", "x")
			case 1:
				l, err = c.TryLock(ctx, "d", "x")
				if topo.IsErrType(err, topo.NodeExists) { // a lock-delay outlasted TryLock's patience
					l, err = c.Lock(ctx, "d", "x")
				}
			case 2:
				l, err = c.LockWithTTL(ctx, "d", "x", 2*MinSessionTTL)
			case 3:
				l, err = c.LockName(ctx, "d", "x")
			}
			return err
		})
		lockTokens = append(lockTokens, l.Token())

		p, err := c.NewLeaderParticipation("e", "p")
		require.NoError(t, err)
		var term topo.Fence
		retry(func() error {
			if _, err := p.WaitForLeadership(); err != nil {
				return err
			}
			term, err = p.Term()
			return err
		})
		termTokens = append(termTokens, term.Token())

		switch round % 6 {
		case 2, 5:
			destroySessions(t, c, raw) // the claims end in the store
			requireClosed(t, l.Done(), "lock after its session ended")
			requireClosed(t, term.Done(), "term after its session ended")
		default:
			require.NoError(t, l.Unlock(ctx))
		}
		p.Stop()
		if round == 11 {
			a.Restart(t)
		}
	}
	for _, tokens := range [][]int64{lockTokens, termTokens} {
		require.Positive(t, tokens[0])
		for i := 1; i < len(tokens); i++ {
			require.Greater(t, tokens[i], tokens[i-1], "token %d of %v", i, tokens)
		}
	}
}

// TestRelockSameSessionNewToken: a lock whose release did not reach
// Consul (the agent unreachable during Unlock) keeps its key until the
// engine's background release deletes it; the next Lock through the same
// Conn, on the same session, waits for that and gets a new, greater token,
// and a paused copy of the first lock is refused by Consul's check.
func TestRelockSameSessionNewToken(t *testing.T) {
	root := testRoot(t)
	p, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	opts := testOptions()
	opts.Address = p.Addr()
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := t.Context()
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l1, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	stale := frozen(t, l1)
	p.Blackhole()
	uctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	require.Error(t, l1.Unlock(uctx), "Unlock through a blackholed agent")
	cancel()
	p.Heal()
	l2, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	require.Equal(t, fenceSession(t, l1).id, fenceSession(t, l2).id)
	require.Greater(t, l2.Token(), l1.Token())
	_, err = topo.GuardedUpdate(ctx, c, stale, "d/f", []byte("stale"), v)
	requireStoreRefused(t, err)
	require.NoError(t, l2.Check(ctx))
	require.NoError(t, l2.Unlock(ctx))
}

// TestLockDone (issue 11): a lock's Done closes on Unlock (at once), on
// the session's end, on the key being deleted behind the holder's back
// (whether Done was called before or after) and on Close; not while held.
func TestLockDone(t *testing.T) {
	root := testRoot(t)
	c := newShortTTLConn(t, root)
	ctx := t.Context()
	kv := rawClient(t).KV()
	_, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)

	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	require.Positive(t, l.Token())
	requireOpen(t, l.Done(), "held lock")
	require.NoError(t, l.Check(ctx))
	requireOpen(t, l.Done(), "held lock after Check")
	require.NoError(t, l.Unlock(ctx))
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after Unlock returned")
	}
	own, err := c.LockWithTTL(ctx, "d", "own session", 3*MinSessionTTL)
	require.NoError(t, err)
	require.NoError(t, own.Unlock(ctx))
	requireClosed(t, own.Done(), "own-session lock after Unlock")

	// Deleted behind the holder's back, with Done called before.
	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	done := l.Done()
	_, err = kv.Delete(root+"/d/Lock", nil)
	require.NoError(t, err)
	requireClosed(t, done, "lock whose key was deleted")
	requireCode(t, l.Check(ctx), topo.LockLost)
	requireCode(t, l.Unlock(ctx), topo.LockLost)

	// Deleted before Done was first called.
	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	_, err = kv.Delete(root+"/d/Lock", nil)
	require.NoError(t, err)
	requireClosed(t, l.Done(), "lock whose key was deleted before Done")

	// The session ends in the store.
	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	expireSession(t, c)
	requireClosed(t, l.Done(), "lock whose session was destroyed")

	// The Conn closes; the lock then guards nothing, even through
	// another Conn.
	other, err := NewConn(testOptions(), root)
	require.NoError(t, err)
	l, err = other.Lock(ctx, "d", "x")
	require.NoError(t, err)
	p, err := other.NewLeaderParticipation("e", "x")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	done = l.Done()
	other.Close()
	requireClosed(t, done, "lock of a closed Conn")
	requireClosed(t, term.Done(), "term of a closed Conn")
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("after close"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c, term, "d/f", []byte("after close"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
}

// TestTermFence (issue 11): Term is NotLeader before leadership and after
// it, the same Fence for the whole term, guards transactions, and its
// Done closes on Stop and when the election key is deleted behind the
// leader's back; later terms have greater tokens.
func TestTermFence(t *testing.T) {
	root := testRoot(t)
	c1 := newTestConn(t, root)
	c2 := newTestConn(t, root)
	ctx := t.Context()
	v, err := c1.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)

	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	defer p1.Stop()
	_, err = p1.Term()
	requireCode(t, err, topo.NotLeader)
	lctx, err := p1.WaitForLeadership()
	require.NoError(t, err)
	t1, err := p1.Term()
	require.NoError(t, err)
	again, err := p1.Term()
	require.NoError(t, err)
	require.Same(t, t1, again)
	require.Positive(t, t1.Token())
	require.NoError(t, t1.Check(ctx))
	requireOpen(t, t1.Done(), "current term")
	v, err = topo.GuardedUpdate(ctx, c1, t1, "f", []byte("one"), v)
	require.NoError(t, err)

	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	defer p2.Stop()
	led := make(chan error, 1)
	go func() { _, err := p2.WaitForLeadership(); led <- err }()
	_, err = p2.Term()
	requireCode(t, err, topo.NotLeader)

	p1.Stop()
	requireClosed(t, t1.Done(), "term after Stop")
	require.Error(t, lctx.Err())
	requireCode(t, t1.Check(ctx), topo.Interrupted)
	_, err = p1.Term()
	requireCode(t, err, topo.NotLeader)
	_, err = topo.GuardedUpdate(ctx, c1, t1, "f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)

	require.NoError(t, <-led)
	t2, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, t2.Token(), t1.Token())
	_, err = topo.GuardedUpdate(ctx, c1, frozenTerm(t, t1), "f", []byte("stale"), v)
	requireStoreRefused(t, err)
	requireFile(t, c1, "f", "one", v)

	_, err = rawClient(t).KV().Delete(root+"/elections/e", nil)
	require.NoError(t, err)
	requireClosed(t, t2.Done(), "term whose key was deleted")
	requireCode(t, t2.Check(ctx), topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c2, t2, "f", []byte("stale"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	_, err = p2.Term()
	requireCode(t, err, topo.NotLeader)
}

// TestTxnAnswerLost (issue 11): a transaction whose connection drops
// before its answer arrives is Unavailable (outcome unknown), never a
// success nor a condition outcome.
func TestTxnAnswerLost(t *testing.T) {
	root := testRoot(t)
	proxy, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	defer proxy.Close()
	opts := testOptions()
	opts.Address = proxy.Addr()
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	l, err := c.LockName(ctx, "d", "x")
	require.NoError(t, err)
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)

	proxy.Blackhole()
	done := make(chan error, 1)
	go func() {
		_, err := topo.GuardedUpdate(ctx, c, l, "d/f", []byte("1"), v)
		done <- err
	}()
	var got error
	for got == nil {
		select {
		case got = <-done:
			if got == nil {
				t.Fatal("a transaction whose answer was lost reported success")
			}
		case <-time.After(20 * time.Millisecond):
			proxy.Reset()
		}
	}
	requireCode(t, got, topo.Unavailable)
	proxy.Heal()
	require.NoError(t, l.Unlock(ctx))
}
