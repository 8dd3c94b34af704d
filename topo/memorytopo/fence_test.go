package memorytopo_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// shortTTL is the SessionTTL of the stores whose sessions lapse in these
// tests (after Partition or PauseKeepAlive). Nothing waits for it by
// time: the tests wait for the successor's Lock, which returns once the
// lapse happened.
const shortTTL = 20 * time.Millisecond

func requireClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what)
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("%s: Done not closed", what)
	}
}

func requireOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what)
	select {
	case <-ch:
		t.Fatalf("%s: Done closed while held", what)
	default:
	}
}

// TestTokensIncreaseOverHandovers hands one lock over many times between
// several Conns, with every way of taking it (Lock, TryLock, LockWithTTL,
// LockName) and every way of losing it (Unlock, ExpireSession, a lapse
// after PauseKeepAlive or Partition, Close) mixed in, and checks that
// every holder's token is greater than every earlier holder's.
func TestTokensIncreaseOverHandovers(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: shortTTL})
	conns := make([]*memorytopo.Conn, 4)
	for i := range conns {
		conns[i] = newConn(t, f)
	}
	_, err := conns[0].Create(ctx, "d/f", nil)
	require.NoError(t, err)
	// Other files and locks move the store's revision meanwhile.
	_, err = conns[0].Create(ctx, "other/f", nil)
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(1, 2))
	last := int64(0)
	for round := range 200 {
		i := rng.IntN(len(conns))
		c := conns[i]
		var ld topo.LockDescriptor
		switch round % 4 {
		case 0:
			ld, err = c.Lock(ctx, "d", "h")
		case 1:
			ld, err = c.TryLock(ctx, "d", "h")
		case 2:
			ld, err = c.LockWithTTL(ctx, "d", "h", shortTTL)
		case 3:
			ld, err = c.Lock(ctx, "d", "h")
		}
		require.NoError(t, err, "round %d", round)
		tok := ld.Token()
		require.Greater(t, tok, last, "round %d: token not above the previous holder's", round)
		require.Equal(t, tok, ld.Token(), "fixed for the claim's life")
		last = tok
		_, err = c.Update(ctx, "other/f", []byte(fmt.Sprint(round)), nil)
		require.NoError(t, err)
		ol, err := c.LockName(ctx, "other", "x")
		require.NoError(t, err)
		require.NoError(t, ol.Unlock(ctx))

		switch rng.IntN(5) {
		case 0, 1:
			require.NoError(t, ld.Unlock(ctx))
		case 2:
			c.ExpireSession()
		case 3:
			// A pause: the next holder's Lock waits for the lapse.
			c.PauseKeepAlive()
			next := conns[(i+1)%len(conns)]
			nld, err := next.Lock(ctx, "d", "n")
			require.NoError(t, err)
			requireClosed(t, ld.Done(), "lapsed holder")
			require.Greater(t, nld.Token(), last)
			last = nld.Token()
			c.ResumeKeepAlive()
			require.NoError(t, nld.Unlock(ctx))
		case 4:
			c.Partition()
			next := conns[(i+1)%len(conns)]
			nld, err := next.Lock(ctx, "d", "n")
			require.NoError(t, err)
			require.Greater(t, nld.Token(), last)
			last = nld.Token()
			c.Heal()
			requireCode(t, ld.Check(ctx), topo.LockLost)
			require.NoError(t, nld.Unlock(ctx))
		}
		requireClosed(t, ld.Done(), fmt.Sprintf("round %d", round))
		if round%50 == 49 {
			// A Conn restart.
			c.Close()
			conns[i] = newConn(t, f)
		}
	}
}

func TestTermTokensIncrease(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: shortTTL})
	conns := []*memorytopo.Conn{newConn(t, f), newConn(t, f), newConn(t, f)}
	parts := make([]topo.LeaderParticipation, len(conns))
	for i, c := range conns {
		p, err := c.NewLeaderParticipation("el", fmt.Sprint("id", i))
		require.NoError(t, err)
		parts[i] = p
		_, err = p.Term()
		requireCode(t, err, topo.NotLeader)
	}
	last := int64(0)
	for round := range 60 {
		i := round % len(parts)
		p := parts[i]
		lctx, err := p.WaitForLeadership()
		require.NoError(t, err)
		term, err := p.Term()
		require.NoError(t, err, "round %d", round)
		again, err := p.Term()
		require.NoError(t, err)
		require.Same(t, term, again, "the same Fence for the whole term")
		require.Greater(t, term.Token(), last, "round %d", round)
		last = term.Token()
		require.NoError(t, term.Check(context.Background()))
		requireOpen(t, term.Done(), "leading")
		switch round % 3 {
		case 0:
			p.Stop()
			requireCode(t, term.Check(context.Background()), topo.Interrupted)
			np, err := conns[i].NewLeaderParticipation("el", fmt.Sprint("id", i))
			require.NoError(t, err)
			parts[i] = np
		case 1:
			conns[i].ExpireSession()
			requireCode(t, term.Check(context.Background()), topo.LockLost)
		case 2:
			conns[i].ExpireSession()
		}
		requireClosed(t, term.Done(), "term ended")
		requireClosed(t, lctx.Done(), "leadership context")
		_, err = p.Term()
		requireCode(t, err, topo.NotLeader)
	}
	for _, p := range parts {
		p.Stop()
	}
}

func TestDoneClosesOnEveryEnd(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: shortTTL})
	c := newConn(t, f)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)

	ld, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	requireOpen(t, ld.Done(), "held")
	require.NoError(t, ld.Unlock(ctx))
	requireClosed(t, ld.Done(), "Unlock")
	require.Equal(t, ld.Done(), ld.Done(), "one channel")

	ld, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	c.ExpireSession()
	requireClosed(t, ld.Done(), "ExpireSession")
	requireCode(t, ld.Unlock(ctx), topo.LockLost) // never closes twice

	ld, err = c.LockWithTTL(ctx, "d", "x", shortTTL)
	require.NoError(t, err)
	c.PauseKeepAlive()
	requireClosed(t, ld.Done(), "lapsed lease")
	requireCode(t, ld.Check(ctx), topo.LockLost)
	c.ResumeKeepAlive()

	c2 := newConn(t, f)
	ld, err = c2.Lock(ctx, "d", "x")
	require.NoError(t, err)
	c2.Close()
	requireClosed(t, ld.Done(), "Close")
}

// guardedWrites is the stale-holder scenario shared by the three ways of
// losing a lock: holder a takes the lock on d and writes d/f through a
// guarded update; lose makes the store drop a's lock while successor b
// takes it (lose returns b's descriptor); b writes; then a's guarded
// writes (update and delete, with and without version) must all be
// refused with LockLost at index 0, and the file's content and history
// must hold only b's writes after a's first.
func guardedWrites(t *testing.T, f *memorytopo.Factory, lose func(a, b *memorytopo.Conn, la topo.LockDescriptor) topo.LockDescriptor) {
	ctx := testCtx(t)
	a, b := newConn(t, f), newConn(t, f)
	v0, err := a.Create(ctx, "d/f", []byte("a0"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	va, err := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("a1"), v0)
	require.NoError(t, err)

	lb := lose(a, b, la)
	require.Greater(t, lb.Token(), la.Token())
	vb, err := topo.GuardedUpdate(ctx, b, lb, "d/f", []byte("b1"), va)
	require.NoError(t, err)

	// The stale holder tries everything, through its own Conn and
	// another one, before or without looking at its lock.
	for _, via := range []topo.Conn{a, b} {
		_, err = topo.GuardedUpdate(ctx, via, la, "d/f", []byte("stale"), vb)
		requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
		_, err = topo.GuardedUpdate(ctx, via, la, "d/f", []byte("stale"), nil)
		requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
		_, err = topo.GuardedUpdate(ctx, via, la, "d/new", []byte("stale"), nil)
		requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
		err = topo.GuardedDelete(ctx, via, la, "d/f", nil)
		requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
	}
	got, v, err := b.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "b1", string(got), "zero stale writes")
	require.Equal(t, vb, v)
	_, _, err = b.Get(ctx, "d/new")
	requireCode(t, err, topo.NoNode)
	// Every version after vb would be a stale write: there is none.
	kvs, err := b.List(ctx, "d/")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.NoError(t, lb.Unlock(ctx))
}

func TestStaleGuardedWriteAfterExpireSession(t *testing.T) {
	checkNoGoroutineLeak(t)
	guardedWrites(t, memorytopo.NewFactory(), func(a, b *memorytopo.Conn, _ topo.LockDescriptor) topo.LockDescriptor {
		a.ExpireSession()
		lb, err := b.Lock(testCtx(t), "d", "b")
		require.NoError(t, err)
		return lb
	})
}

func TestStaleGuardedWriteAfterPartition(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: shortTTL})
	guardedWrites(t, f, func(a, b *memorytopo.Conn, la topo.LockDescriptor) topo.LockDescriptor {
		a.Partition()
		// a's guarded write sent during the partition waits; it is
		// refused once the partition heals, after b took the lock.
		ctx := testCtx(t)
		type result struct{ err error }
		pending := make(chan result, 1)
		go func() {
			_, err := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("in flight"), nil)
			pending <- result{err}
		}()
		lb, err := b.Lock(ctx, "d", "b") // returns once a's session lapsed
		require.NoError(t, err)
		a.Heal()
		r := <-pending
		requireTxnErr(t, r.err, 0, topo.TxnIfHeld, topo.LockLost)
		return lb
	})
}

func TestStaleGuardedWriteAfterPause(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: shortTTL})
	guardedWrites(t, f, func(a, b *memorytopo.Conn, la topo.LockDescriptor) topo.LockDescriptor {
		// The paused holder sends nothing while its session runs out;
		// the successor acquires; the holder writes at once, before it
		// looked at Done or Check.
		requireOpen(t, la.Done(), "before the pause")
		a.PauseKeepAlive()
		lb, err := b.Lock(testCtx(t), "d", "b")
		require.NoError(t, err)
		a.ResumeKeepAlive()
		return lb
	})
}

func TestGuardedWriteOnTerm(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	a, b := newConn(t, f), newConn(t, f)
	pa, err := a.NewLeaderParticipation("el", "a")
	require.NoError(t, err)
	pb, err := b.NewLeaderParticipation("el", "b")
	require.NoError(t, err)
	defer pa.Stop()
	defer pb.Stop()
	_, err = pa.WaitForLeadership()
	require.NoError(t, err)
	ta, err := pa.Term()
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, a, ta, "state", []byte("a"), nil)
	require.NoError(t, err)
	_, err = pb.Term()
	requireCode(t, err, topo.NotLeader)

	a.ExpireSession()
	_, err = pb.WaitForLeadership()
	require.NoError(t, err)
	tb, err := pb.Term()
	require.NoError(t, err)
	require.Greater(t, tb.Token(), ta.Token())
	_, err = topo.GuardedUpdate(ctx, a, ta, "state", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, b, tb, "state", []byte("b"), nil)
	require.NoError(t, err)
	got, _, err := a.Get(ctx, "state")
	require.NoError(t, err)
	require.Equal(t, "b", string(got))
}

// TestIfHeldAgreesWithCheckOnceAResumeTookTheSession takes a lock and a
// candidacy on one Conn's session, then resumes the candidacy on another
// Conn, which adopts that session (and so the lock's entry with it).
// The lock's holder has lost it (Check says so, Unlock is refused), so an
// IfHeld of it must fail too, before Check is asked and after, and write
// nothing.
func TestIfHeldAgreesWithCheckOnceAResumeTookTheSession(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "q/f", []byte("x"))
	require.NoError(t, err)
	lock, err := c1.Lock(ctx, "q", "holder")
	require.NoError(t, err)
	p := participate(t, c1, "el", "one")
	_, err = p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	info, err := p.ResumeInfo()
	require.NoError(t, err)
	_, err = c2.ResumeLeaderParticipation(ctx, "el", "one", info)
	require.NoError(t, err)

	_, err = c1.Txn(ctx, topo.IfHeld(lock), topo.CreateOp("z", nil))
	requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
	requireCode(t, lock.Check(ctx), topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c1, lock, "z", nil, nil)
	requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
	_, _, err = c1.Get(ctx, "z")
	requireCode(t, err, topo.NoNode)
}
