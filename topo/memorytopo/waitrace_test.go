package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// Adversarial tests of the in-process wait (claims.GoneSignaler: one
// GoneAhead read gives the waiter its distance from the head and the
// channel to park on, made under the store's read lock). Each races a
// removal, a cancellation or a Close against a waiter's look and park,
// many times, and checks the outcome, never the timing: a lock has one
// holder at most, and it is free again once every returned descriptor
// is unlocked.

// raceRounds is how many times each race runs.
const raceRounds = 200

// requireFree fails unless the lock of dir is free: a TryLock of a fresh
// Conn of f gets it (then releases it).
func requireFree(t *testing.T, f *memorytopo.Factory, dir string) {
	t.Helper()
	c, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	defer c.Close()
	ld, err := c.TryLock(testCtx(t), dir, "probe")
	require.NoError(t, err, "the lock of %s is not free", dir)
	require.NoError(t, ld.Unlock(testCtx(t)))
}

// requireHeldElsewhere fails unless the lock of dir is held: a TryLock of
// a fresh Conn of f gets NodeExists.
func requireHeldElsewhere(t *testing.T, f *memorytopo.Factory, dir string) {
	t.Helper()
	c, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	defer c.Close()
	_, err = c.TryLock(testCtx(t), dir, "probe")
	requireCode(t, err, topo.NodeExists)
}

// lockResult is what a Lock call returned.
type lockResult struct {
	ld  topo.LockDescriptor
	err error
}

func goLock(ctx context.Context, c *memorytopo.Conn, dir, contents string) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		ld, err := c.Lock(ctx, dir, contents)
		ch <- lockResult{ld, err}
	}()
	return ch
}

// TestWaiterPredecessorLostWhileParking: waiter w queues behind m, which
// waits behind holder h; m's session expires while w makes its first look
// and parks (the channel it parks on is made by compare-and-swap under the
// read lock, closed under the write lock). m returns LockLost, h keeps the
// lock, and w is granted once h unlocks, with a greater token.
func TestWaiterPredecessorLostWhileParking(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range raceRounds {
		h, m, w := newConn(t, f), newConn(t, f), newConn(t, f)
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		mr := goLock(ctx, m, "d", "m")
		require.Eventually(t, func() bool { return memorytopo.LockEntries(setup, "d") == 2 }, waitLimit, poll)
		wr := goLock(ctx, w, "d", "w")
		if round%2 == 0 {
			runtime.Gosched()
		}
		m.ExpireSession()
		r := <-mr
		requireCode(t, r.err, topo.LockLost)
		require.NoError(t, hl.Check(ctx), "round %d: the holder lost its lock", round)
		if round%3 == 0 {
			// Let w park for sure before the handover, now and then.
			require.Eventually(t, func() bool { return memorytopo.Awaited(setup, "d") == 1 }, waitLimit, poll)
		}
		require.NoError(t, hl.Unlock(ctx))
		r = <-wr
		require.NoError(t, r.err, "round %d", round)
		require.Greater(t, r.ld.Token(), hl.Token())
		require.NoError(t, r.ld.Check(ctx))
		requireHeldElsewhere(t, f, "d")
		require.NoError(t, r.ld.Unlock(ctx))
		requireFree(t, f, "d")
		h.Close()
		m.Close()
		w.Close()
	}
}

// TestWaiterHandoverRacesLook: the holder unlocks while the waiter
// behind it makes its first look (and a second waiter queues behind
// that): each waiter is granted in turn, never two at once.
func TestWaiterHandoverRacesLook(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range raceRounds {
		h, a, b := newConn(t, f), newConn(t, f), newConn(t, f)
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		ar := goLock(ctx, a, "d", "a")
		br := goLock(ctx, b, "d", "b")
		require.NoError(t, hl.Unlock(ctx))
		// a and b queued in either order: exactly one of them holds now.
		var first, second <-chan lockResult
		var r lockResult
		select {
		case r = <-ar:
			first, second = ar, br
		case r = <-br:
			first, second = br, ar
		}
		_ = first
		require.NoError(t, r.err, "round %d", round)
		require.NoError(t, r.ld.Check(ctx))
		select {
		case r2 := <-second:
			t.Fatalf("round %d: two holders (%v)", round, r2.err)
		default:
		}
		requireHeldElsewhere(t, f, "d")
		require.NoError(t, r.ld.Unlock(ctx))
		r = <-second
		require.NoError(t, r.err, "round %d", round)
		require.NoError(t, r.ld.Unlock(ctx))
		requireFree(t, f, "d")
		h.Close()
		a.Close()
		b.Close()
	}
}

// TestWaiterOwnSessionLostAtHandover: the waiter's own session expires
// (its entry is dropped behind its back) while the holder unlocks. The
// waiter either returns LockLost or a descriptor that is already lost
// (its Done closed, Check LockLost); either way the lock is free after.
func TestWaiterOwnSessionLostAtHandover(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range raceRounds {
		h, w := newConn(t, f), newConn(t, f)
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		wr := goLock(ctx, w, "d", "w")
		if round%2 == 0 {
			require.Eventually(t, func() bool { return memorytopo.Awaited(setup, "d") == 1 }, waitLimit, poll)
		} else {
			require.Eventually(t, func() bool { return memorytopo.LockEntries(setup, "d") == 2 }, waitLimit, poll)
		}
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, hl.Unlock(ctx)) })
		wg.Go(w.ExpireSession)
		wg.Wait()
		r := <-wr
		if r.err != nil {
			requireCode(t, r.err, topo.LockLost)
		} else {
			requireClosed(t, r.ld.Done(), fmt.Sprintf("round %d: granted, then its session expired", round))
			requireCode(t, r.ld.Check(ctx), topo.LockLost)
			requireCode(t, r.ld.Unlock(ctx), topo.LockLost)
		}
		requireFree(t, f, "d")
		h.Close()
		w.Close()
	}
}

// TestWaiterOwnSessionLostWhileParked: the waiter's own entry goes with
// its session while it is parked behind a live holder: it is not
// granted, it returns LockLost, and the holder keeps the lock.
func TestWaiterOwnSessionLostWhileParked(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	h, w := newConn(t, f), newConn(t, f)
	_, err := h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for range 20 {
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		wr := goLock(ctx, w, "d", "w")
		require.Eventually(t, func() bool { return memorytopo.Awaited(h, "d") == 1 }, waitLimit, poll)
		w.ExpireSession()
		r := <-wr
		requireCode(t, r.err, topo.LockLost)
		require.Equal(t, 1, memorytopo.LockEntries(h, "d"))
		require.NoError(t, hl.Check(ctx))
		require.NoError(t, hl.Unlock(ctx))
		requireFree(t, f, "d")
	}
}

// TestWaiterCancelledAtGrant: the waiter's context is cancelled as the
// holder unlocks. Either the waiter returns a descriptor that holds the
// lock (and nobody else does), or it returns Interrupted and the lock is
// free: no holder is left that nobody returned.
func TestWaiterCancelledAtGrant(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	h, w := newConn(t, f), newConn(t, f)
	granted, cancelled := 0, 0
	for round := range raceRounds {
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		wr := goLock(wctx, w, "d", "w")
		if round%2 == 0 {
			require.Eventually(t, func() bool { return memorytopo.Awaited(setup, "d") == 1 }, waitLimit, poll)
		}
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, hl.Unlock(ctx)) })
		wg.Go(cancel)
		wg.Wait()
		r := <-wr
		if r.err != nil {
			cancelled++
			requireCode(t, r.err, topo.Interrupted)
			requireFree(t, f, "d")
			continue
		}
		granted++
		require.NoError(t, r.ld.Check(ctx), "round %d", round)
		requireHeldElsewhere(t, f, "d")
		require.NoError(t, r.ld.Unlock(ctx))
		requireFree(t, f, "d")
	}
	t.Logf("granted %d, cancelled %d", granted, cancelled)
}

// TestCloseWithManyWaiters: a Conn with many waiters closes: each returns
// Closed (none is granted, before or after), their entries go, the
// holder keeps the lock, and the waiters of another Conn queued behind
// them are granted one at a time once it unlocks.
func TestCloseWithManyWaiters(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	h, w, x := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	hl, err := h.Lock(ctx, "d", "h")
	require.NoError(t, err)
	const nw, nx = 20, 5
	var ws []<-chan lockResult
	for i := range nw {
		ws = append(ws, goLock(ctx, w, "d", fmt.Sprint("w", i)))
	}
	require.Eventually(t, func() bool { return memorytopo.LockEntries(h, "d") == 1+nw }, waitLimit, poll)
	var xs []<-chan lockResult
	for i := range nx {
		xs = append(xs, goLock(ctx, x, "d", fmt.Sprint("x", i)))
	}
	require.Eventually(t, func() bool { return memorytopo.Awaited(h, "d") == nw+nx }, waitLimit, poll)
	w.Close()
	for _, ch := range ws {
		requireCode(t, (<-ch).err, topo.Closed)
	}
	require.Equal(t, 1+nx, memorytopo.LockEntries(h, "d"))
	require.NoError(t, hl.Check(ctx))
	require.NoError(t, hl.Unlock(ctx))
	pending := xs
	for range nx {
		// Exactly one of the pending waiters is granted; unlock it.
		var got topo.LockDescriptor
		require.Eventually(t, func() bool {
			for i, ch := range pending {
				select {
				case r := <-ch:
					require.NoError(t, r.err)
					got = r.ld
					pending = append(pending[:i:i], pending[i+1:]...)
					return true
				default:
				}
			}
			return false
		}, waitLimit, poll)
		for _, ch := range pending {
			select {
			case r := <-ch:
				t.Fatalf("two holders at once (%v)", r.err)
			default:
			}
		}
		require.NoError(t, got.Check(ctx))
		require.NoError(t, got.Unlock(ctx))
	}
	requireFree(t, f, "d")
}

// TestCloseRacesHandover: the waiters' Conn closes while the holder
// unlocks. A waiter returns Closed, or the descriptor it was granted
// before the Close (whose Check then says Closed); the lock is free
// once that is done, and no waiter is left behind.
func TestCloseRacesHandover(t *testing.T) {
	checkNoGoroutineLeak(t)
	f := memorytopo.NewFactory()
	ctx := testCtx(t)
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range raceRounds / 4 {
		h, w := newConn(t, f), newConn(t, f)
		hl, err := h.Lock(ctx, "d", "h")
		require.NoError(t, err)
		var ws []<-chan lockResult
		for i := range 5 {
			ws = append(ws, goLock(ctx, w, "d", fmt.Sprint("w", i)))
		}
		require.Eventually(t, func() bool { return memorytopo.LockEntries(setup, "d") == 6 }, waitLimit, poll)
		var wg sync.WaitGroup
		wg.Go(func() { require.NoError(t, hl.Unlock(ctx)) })
		wg.Go(w.Close)
		wg.Wait()
		granted := 0
		for _, ch := range ws {
			r := <-ch
			if r.err == nil {
				granted++
				requireCode(t, r.ld.Check(ctx), topo.Closed)
				continue
			}
			requireCode(t, r.err, topo.Closed)
		}
		require.LessOrEqual(t, granted, 1, "round %d", round)
		require.Equal(t, 0, memorytopo.LockEntries(setup, "d"), "round %d", round)
		requireFree(t, f, "d")
		h.Close()
	}
}
