package memorytopo_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// Probes of the turn path (claims.TurnSignaler): a lock's waiter parks on
// its own entry's channel, closed by the release that makes it the head.

// holders tracks the lock holders of one directory: a new holder may only
// come once every earlier holder released (Unlock) or was told of its
// loss (its Done closed: the loss is declared before the store hands the
// lock on).
type holders struct {
	mu   sync.Mutex
	held map[topo.LockDescriptor]string
}

func (h *holders) acquired(t *testing.T, ld topo.LockDescriptor, who string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var open []string
	for o, name := range h.held {
		select {
		case <-o.Done():
		default:
			open = append(open, name)
		}
	}
	// Read after the others': a holder that lost its lock (its Done
	// closed) before any of them was granted is no second holder; one
	// whose Done is open now was not lost when theirs were read either.
	select {
	case <-ld.Done():
	default:
		for _, name := range open {
			t.Errorf("two holders: %s acquired while %s holds (both Done open)", who, name)
		}
	}
	h.held[ld] = who
}

func (h *holders) released(ld topo.LockDescriptor) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, ld)
}

// TestTurnProbeChaos: contenders on a few Conns Lock (some with contexts
// cancelled at random points of the wait), TryLock and LockWithTTL (a
// short TTL, lapsing while others wait), while a chaos goroutine expires
// sessions and closes Conns. Never two holders; once the chaos stops,
// the lock is free (no stuck queue: a fresh Lock gets it, no entry left),
// and no goroutine is left over.
func TestTurnProbeChaos(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
	setup := newConn(t, f)
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	const nconns, workers = 4, 8
	var cmu sync.Mutex
	conns := make([]*memorytopo.Conn, nconns)
	for i := range conns {
		conns[i] = newConn(t, f)
	}
	conn := func(i int) *memorytopo.Conn {
		cmu.Lock()
		defer cmu.Unlock()
		return conns[i%nconns]
	}
	h := &holders{held: map[topo.LockDescriptor]string{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	acquisitions := make([]int, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				c := conn(w + k)
				who := fmt.Sprintf("w%d/%d@c%d", w, k, (w+k)%nconns)
				var ld topo.LockDescriptor
				var err error
				switch op := r.IntN(11); {
				case op < 5:
					lctx, cancel := context.WithCancel(ctx)
					tm := time.AfterFunc(time.Duration(r.IntN(300))*time.Microsecond, cancel)
					if r.IntN(2) == 0 {
						tm.Stop()
					}
					who += "/lock"
					ld, err = c.Lock(lctx, "d", who)
					if err == nil {
						_ = ld.Done() // shared: the loss closes it
					}
					tm.Stop()
					cancel()
				case op < 7:
					who += "/try"
					ld, err = c.TryLock(ctx, "d", who)
					if err == nil {
						_ = ld.Done()
					}
				case op < 8:
					who += "/name"
					ld, err = c.LockName(ctx, "d", who)
					if err == nil {
						_ = ld.Done()
					}
				default:
					who += "/ttl"
					ld, err = c.LockWithTTL(ctx, "d", who, time.Duration(1+r.IntN(3))*time.Millisecond)
					if err == nil {
						_ = ld.Done()
					}
				}
				if err != nil {
					if !topo.IsErrType(err, topo.Interrupted) && !topo.IsErrType(err, topo.LockLost) &&
						!topo.IsErrType(err, topo.Closed) && !topo.IsErrType(err, topo.NodeExists) &&
						!topo.IsErrType(err, topo.Timeout) {
						t.Errorf("%s: %v", who, err)
					}
					continue
				}
				acquisitions[w]++
				h.acquired(t, ld, who)
				for range r.IntN(20) {
					runtime.Gosched()
				}
				h.released(ld)
				_ = ld.Unlock(ctx)
			}
		})
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(99, 1))
		for k := 0; k < 400; k++ {
			time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
			i := r.IntN(nconns)
			if r.IntN(8) == 0 {
				nc, err := f.NewConn("mem", "/root")
				if err != nil {
					t.Error(err)
					break
				}
				cmu.Lock()
				old := conns[i]
				conns[i] = nc
				cmu.Unlock()
				old.Close()
				t.Cleanup(nc.Close)
			} else {
				conn(i).ExpireSession()
			}
		}
		close(stop)
	})
	wg.Wait()
	t.Logf("acquisitions per worker: %v", acquisitions)
	ld, err := setup.Lock(ctx, "d", "after")
	require.NoError(t, err, "the lock is free once the contenders stopped")
	require.NoError(t, ld.Unlock(ctx))
	require.Equal(t, 0, memorytopo.LockEntries(setup, "d"), "no entry left")
}

// TestTurnProbeReleaseRacesCancel: the holder's release races the cancel
// of the next waiter; the one after must get the lock whichever wins
// (the turn passes on, never lost), and the cancelled waiter either
// returns an error or holds (and then releases).
func TestTurnProbeReleaseRacesCancel(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0, c1, c2 := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range 300 {
		holder, err := c0.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		actx, cancel := context.WithCancel(ctx)
		a := make(chan error, 1)
		go func() {
			ld, err := c1.Lock(actx, "d", "a")
			if err == nil {
				err = ld.Unlock(ctx)
			}
			a <- err
		}()
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "d") == 2 }, waitLimit, poll)
		b := make(chan topo.LockDescriptor, 1)
		go func() {
			ld, err := c2.Lock(ctx, "d", "b")
			if err != nil {
				t.Errorf("round %d: b: %v", round, err)
			}
			b <- ld
		}()
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "d") == 3 }, waitLimit, poll)
		go cancel()
		require.NoError(t, holder.Unlock(ctx))
		if err := <-a; err != nil {
			require.Truef(t, topo.IsErrType(err, topo.Interrupted), "round %d: a: %v", round, err)
		}
		ld := <-b
		require.NotNil(t, ld, "round %d", round)
		require.NoError(t, ld.Check(ctx))
		require.NoError(t, ld.Unlock(ctx))
		require.Equal(t, 0, memorytopo.LockEntries(c0, "d"), "round %d", round)
	}
}

// TestTurnProbeGrantRacesExpire: the holder's release races the expiry of
// the next waiter's session. If that waiter's Lock returns a descriptor,
// its session was lost by the end of the round: Done is closed and Check
// says LockLost; the waiter after it gets the lock either way.
func TestTurnProbeGrantRacesExpire(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0, c1, c2 := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	granted := 0
	for round := range 300 {
		holder, err := c0.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		type res struct {
			ld  topo.LockDescriptor
			err error
		}
		a := make(chan res, 1)
		go func() {
			ld, err := c1.Lock(ctx, "d", "a")
			a <- res{ld, err}
		}()
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "d") == 2 }, waitLimit, poll)
		b := make(chan res, 1)
		go func() {
			ld, err := c2.Lock(ctx, "d", "b")
			b <- res{ld, err}
		}()
		require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "d") == 3 }, waitLimit, poll)
		done := make(chan struct{})
		go func() { c1.ExpireSession(); close(done) }()
		require.NoError(t, holder.Unlock(ctx))
		<-done
		ra := <-a
		if ra.err == nil {
			granted++
			select {
			case <-ra.ld.Done():
			case <-time.After(waitLimit):
				t.Fatalf("round %d: a granted on an expired session: Done never closed", round)
			}
			requireCode(t, ra.ld.Check(ctx), topo.LockLost)
			requireCode(t, ra.ld.Unlock(ctx), topo.LockLost)
		} else {
			requireCode(t, ra.err, topo.LockLost)
		}
		rb := <-b
		require.NoError(t, rb.err, "round %d", round)
		require.NoError(t, rb.ld.Check(ctx))
		require.NoError(t, rb.ld.Unlock(ctx))
		require.Equal(t, 0, memorytopo.LockEntries(c0, "d"), "round %d", round)
	}
	t.Logf("a granted before its expiry in %d of 300 rounds", granted)
}

// TestTurnProbeCloseEndsWait: a Lock and a LockWithTTL waiting with
// contexts that never end return Closed when their Conn closes (the wait
// ends with the Conn's leases), and the lock stays the holder's.
func TestTurnProbeCloseEndsWait(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0 := newConn(t, f)
	c1, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	_, err = c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c0.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	errs := make(chan error, 2)
	go func() {
		_, err := c1.Lock(context.Background(), "d", "plain")
		errs <- err
	}()
	go func() {
		_, err := c1.LockWithTTL(context.Background(), "d", "ttl", time.Hour)
		errs <- err
	}()
	require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 2 }, waitLimit, poll)
	c1.Close()
	requireCode(t, <-errs, topo.Closed)
	requireCode(t, <-errs, topo.Closed)
	require.NoError(t, holder.Check(ctx))
	require.Equal(t, 1, memorytopo.LockEntries(c0, "d"))
	require.NoError(t, holder.Unlock(ctx))
}

// TestTurnProbeFIFOWithCancels: waiters w0..w5 queue in order; w1 and w3
// cancel while the holder releases. The others acquire in queue order,
// each once the one before released.
func TestTurnProbeFIFOWithCancels(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0 := newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for round := range 50 {
		holder, err := c0.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		const n = 6
		order := make(chan int, n)
		cancels := make([]context.CancelFunc, n)
		var wg sync.WaitGroup
		for i := range n {
			c := newConn(t, f)
			wctx, cancel := context.WithCancel(ctx)
			cancels[i] = cancel
			wg.Go(func() {
				defer cancel()
				ld, err := c.Lock(wctx, "d", fmt.Sprint(i))
				if err != nil {
					if i != 1 && i != 3 {
						t.Errorf("round %d: w%d: %v", round, i, err)
					}
					return
				}
				order <- i
				if err := ld.Unlock(ctx); err != nil {
					t.Errorf("round %d: w%d: %v", round, i, err)
				}
			})
			require.Eventually(t, func() bool { return memorytopo.LockEntries(c0, "d") == i+2 }, waitLimit, poll)
		}
		go cancels[3]()
		go cancels[1]()
		require.NoError(t, holder.Unlock(ctx))
		wg.Wait()
		close(order)
		var got []int
		for i := range order {
			if i != 1 && i != 3 {
				got = append(got, i)
			}
		}
		require.Equal(t, []int{0, 2, 4, 5}, got, "round %d", round)
		require.Equal(t, 0, memorytopo.LockEntries(c0, "d"))
	}
}

// TestTurnProbePartitionedWaiter: a waiter cut off from the store is
// granted by the store when the holder releases (no request needed), and
// loses the lock when its lease lapses: its Done closes before the next
// waiter gets it. Another round: the waiter's lease lapses while it still
// waits; its Lock returns LockLost and the next waiter gets the lock.
func TestTurnProbePartitionedWaiter(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 200 * time.Millisecond})
	c0, c1, c2 := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for _, releaseFirst := range []bool{true, false} {
		holder, err := c0.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		type res struct {
			ld  topo.LockDescriptor
			err error
		}
		a, b := make(chan res, 1), make(chan res, 1)
		go func() { ld, err := c1.Lock(ctx, "d", "a"); a <- res{ld, err} }()
		require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 1 }, waitLimit, poll)
		go func() { ld, err := c2.Lock(ctx, "d", "b"); b <- res{ld, err} }()
		require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 2 }, waitLimit, poll)
		c1.Partition()
		if releaseFirst {
			require.NoError(t, holder.Unlock(ctx))
			ra := <-a
			require.NoError(t, ra.err, "granted while cut off: the store handed it over")
			done := ra.ld.Done()
			rb := <-b // after the lapse
			require.NoError(t, rb.err)
			select {
			case <-done:
			default:
				t.Fatal("b got the lock while a's Done was open")
			}
			c1.Heal()
			requireCode(t, ra.ld.Unlock(ctx), topo.LockLost)
			require.NoError(t, rb.ld.Unlock(ctx))
		} else {
			requireCode(t, (<-a).err, topo.LockLost)
			c1.Heal()
			require.NoError(t, holder.Unlock(ctx))
			rb := <-b
			require.NoError(t, rb.err)
			require.NoError(t, rb.ld.Unlock(ctx))
		}
		require.Equal(t, 0, memorytopo.LockEntries(c0, "d"))
	}
}

// TestTurnProbeFaultsWhileWaiting: faults on every call and broken
// watches while a Lock waits do not end or disturb the wait (it makes no
// call); once they clear, the holder's release hands the lock over.
func TestTurnProbeFaultsWhileWaiting(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c0, c1 := newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c0.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	type res struct {
		ld  topo.LockDescriptor
		err error
	}
	a := make(chan res, 1)
	go func() { ld, err := c1.Lock(ctx, "d", "a"); a <- res{ld, err} }()
	require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 1 }, waitLimit, poll)
	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable})
	f.BreakWatches(nil)
	requireCode(t, holder.Unlock(ctx), topo.Unavailable)
	select {
	case r := <-a:
		t.Fatalf("the wait ended under faults: %v", r.err)
	default:
	}
	remove()
	require.NoError(t, holder.Unlock(ctx))
	r := <-a
	require.NoError(t, r.err)
	require.NoError(t, r.ld.Check(ctx))
	require.NoError(t, r.ld.Unlock(ctx))
}

// TestTurnProbeMiddleAndHeadExpire: with a holder and three waiters, the
// middle waiter's session expires (its Lock returns LockLost, nobody is
// granted), then the holder's: the first waiter gets the lock (the
// holder's Done closed first), and its release hands it to the last.
func TestTurnProbeMiddleAndHeadExpire(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := []*memorytopo.Conn{newConn(t, f), newConn(t, f), newConn(t, f), newConn(t, f)}
	_, err := c[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c[0].Lock(ctx, "d", "holder")
	require.NoError(t, err)
	hdone := holder.Done()
	type res struct {
		ld  topo.LockDescriptor
		err error
	}
	var out [4]chan res
	for i := 1; i < 4; i++ {
		out[i] = make(chan res, 1)
		go func() { ld, err := c[i].Lock(ctx, "d", fmt.Sprint(i)); out[i] <- res{ld, err} }()
		require.Eventually(t, func() bool { return memorytopo.Awaited(c[0], "d") == i }, waitLimit, poll)
	}
	c[2].ExpireSession()
	requireCode(t, (<-out[2]).err, topo.LockLost)
	select {
	case r := <-out[1]:
		t.Fatalf("the first waiter ended while the holder holds: %v", r.err)
	case r := <-out[3]:
		t.Fatalf("the last waiter ended while the holder holds: %v", r.err)
	default:
	}
	require.NoError(t, holder.Check(ctx))
	c[0].ExpireSession()
	r1 := <-out[1]
	require.NoError(t, r1.err)
	select {
	case <-hdone:
	default:
		t.Fatal("the holder's Done is open after the next waiter was granted")
	}
	require.NoError(t, r1.ld.Check(ctx))
	require.NoError(t, r1.ld.Unlock(ctx))
	r3 := <-out[3]
	require.NoError(t, r3.err)
	require.NoError(t, r3.ld.Unlock(ctx))
	require.Equal(t, 0, memorytopo.LockEntries(c[0], "d"))
}

// TestTurnProbeTTLHolderLapses: a LockWithTTL holder, and then a LockName
// holder, whose Conn stopped renewing: their lease lapses while two
// waiters wait; the first waiter gets the lock once the holder's Done
// closed, the second once the first released.
func TestTurnProbeTTLHolderLapses(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{NamedLockTTL: 50 * time.Millisecond})
	c0, c1, c2 := newConn(t, f), newConn(t, f), newConn(t, f)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	for _, named := range []bool{false, true} {
		var holder topo.LockDescriptor
		var err error
		if named {
			holder, err = c0.LockName(ctx, "d", "holder")
		} else {
			holder, err = c0.LockWithTTL(ctx, "d", "holder", 50*time.Millisecond)
		}
		require.NoError(t, err)
		hdone := holder.Done()
		type res struct {
			ld  topo.LockDescriptor
			err error
		}
		a, b := make(chan res, 1), make(chan res, 1)
		lock := func(c *memorytopo.Conn, who string) (topo.LockDescriptor, error) {
			if named {
				return c.LockName(ctx, "d", who)
			}
			return c.Lock(ctx, "d", who)
		}
		go func() { ld, err := lock(c1, "a"); a <- res{ld, err} }()
		require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 1 }, waitLimit, poll)
		go func() { ld, err := lock(c2, "b"); b <- res{ld, err} }()
		require.Eventually(t, func() bool { return memorytopo.Awaited(c0, "d") == 2 }, waitLimit, poll)
		c0.PauseKeepAlive()
		ra := <-a
		require.NoError(t, ra.err, "named %v", named)
		select {
		case <-hdone:
		default:
			t.Fatal("a granted while the lapsed holder's Done is open")
		}
		requireCode(t, holder.Check(ctx), topo.LockLost)
		select {
		case r := <-b:
			t.Fatalf("b ended while a holds: %v", r.err)
		default:
		}
		require.NoError(t, ra.ld.Unlock(ctx))
		rb := <-b
		require.NoError(t, rb.err)
		require.NoError(t, rb.ld.Unlock(ctx))
		c0.ResumeKeepAlive()
		require.Equal(t, 0, memorytopo.LockEntries(c0, "d"))
	}
}
