package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
)

// The subtests of package semaphore on the backend under test: it is built
// only from a Conn's locks and transactions, so every backend must run it.

const semProbe = 50 * time.Millisecond

func newSemaphore(s *store, c topo.Conn, dir string, limit int) *semaphore.Semaphore {
	s.t.Helper()
	sem, err := semaphore.New(c, dir, limit, semaphore.Options{ProbeInterval: semProbe})
	require.NoError(s.t, err)
	return sem
}

// testSemaphoreLimit: up to the limit hold at once, TryAcquire says
// NodeExists beyond it, a release admits a waiter, tokens increase.
func testSemaphoreLimit(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	cs := s.conns(3)
	sems := make([]*semaphore.Semaphore, 3)
	for i, c := range cs {
		sems[i] = newSemaphore(s, c, "sem", 2)
	}
	a, err := sems[0].Acquire(ctx)
	require.NoError(t, err)
	b, err := sems[1].TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, b.Token(), a.Token())
	_, err = sems[2].TryAcquire(ctx)
	requireCode(t, err, topo.NodeExists, "TryAcquire of a full semaphore")
	hs, err := sems[2].Holders(ctx)
	require.NoError(t, err)
	require.Len(t, hs, 2)

	got := make(chan error, 1)
	var c topo.LockDescriptor
	go func() {
		var err error
		c, err = sems[2].Acquire(ctx)
		got <- err
	}()
	requireNothing(t, got, "Acquire of a full semaphore")
	require.NoError(t, a.Unlock(ctx))
	err, _ = recv(t, got, "Acquire after a holder released")
	require.NoError(t, err)
	require.Greater(t, c.Token(), b.Token())
	require.NoError(t, c.Check(ctx))
	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, c.Unlock(ctx))
	requireCode(t, c.Unlock(ctx), topo.Interrupted, "a second Unlock")
	hs, err = sems[0].Holders(ctx)
	require.NoError(t, err)
	require.Empty(t, hs)
}

// testSemaphoreSessionLoss: a holder whose session the store dropped loses
// its slot to a waiter, its Done closes, and its guarded writes are
// refused.
func testSemaphoreSessionLoss(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	held, err := newSemaphore(s, c1, "sem", 1).Acquire(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	var next topo.LockDescriptor
	go func() {
		var err error
		next, err = newSemaphore(s, c2, "sem", 1).Acquire(ctx)
		got <- err
	}()
	requireNothing(t, got, "Acquire while the slot is held")
	s.opts.ExpireSession(t, c1)
	select {
	case <-held.Done():
	case <-time.After(longWait):
		t.Fatal("the holder's Done did not close after its session was dropped")
	}
	err, _ = recv(t, got, "Acquire after the holder's session was dropped")
	require.NoError(t, err)
	require.Greater(t, next.Token(), held.Token())
	_, err = topo.GuardedUpdate(ctx, c1, held, "data", []byte("stale"), nil)
	require.Error(t, err, "a guarded write of a holder whose session was dropped")
	requireNoFile(t, ctx, c2, "data")
	_, err = topo.GuardedUpdate(ctx, c2, next, "data", []byte("fresh"), nil)
	require.NoError(t, err)
	require.NoError(t, next.Unlock(ctx))
}

// testSemaphoreNeverMore: many acquire/release cycles on several Conns,
// with session losses mixed in, never admit more than the limit, counted
// in process and in the store's record.
func testSemaphoreNeverMore(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const limit, workers, rounds = 2, 4, 5
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		conn := s.conn()
		wg.Go(func() {
			for r := range rounds {
				sem, err := semaphore.New(conn, "sem", limit, semaphore.Options{ProbeInterval: semProbe})
				if err != nil {
					errs <- err
					return
				}
				ld, err := sem.Acquire(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if hs, err := sem.Holders(ctx); err != nil || len(hs) > limit {
					errs <- fmt.Errorf("the record lists %d holders (limit %d), %v", len(hs), limit, err)
				}
				inside.Add(-1)
				if (w+r)%3 == 2 {
					// The store drops this worker's session; it goes on
					// with a new Conn.
					s.opts.ExpireSession(t, conn)
					<-ld.Done()
					conn = s.conn()
					continue
				}
				if err := ld.Unlock(context.WithoutCancel(ctx)); err != nil {
					errs <- fmt.Errorf("worker %d round %d unlock: %w", w, r, err)
					return
				}
			}
		})
	}
	requireNoWorkerErrs(t, &wg, errs)
	require.LessOrEqual(t, most.Load(), int64(limit), "more holders at once than the limit")
}

// testSemaphoreHandoverCost (Scale/SemaphoreHandoverCostFlat): in a loop
// of limit+n contenders acquiring and releasing a semaphore of limit
// slots, so that n wait at any time, the Conn calls per acquisition (one
// handover each) do not grow with n = 2, 20, 200: a release wakes the
// contender next in line, not every waiter. (What one Lock costs inside
// the store is the backend's to keep flat; its own handover tests count
// that.)
func testSemaphoreHandoverCost(s *store) {
	t := s.t
	const limit, measured = 2, 40
	var perAcq []float64
	for _, n := range []int{2, 20, 200} {
		var calls atomic.Int64
		count := middleware.Hooks{Around: func(ctx context.Context, _ middleware.Call, next func(context.Context) error) error {
			calls.Add(1)
			return next(ctx)
		}}
		conns := make([]topo.Conn, 4)
		for i := range conns {
			conns[i] = middleware.New(topo.ConnInfo{}, s.conn(), count)
		}
		dir := fmt.Sprintf("sem%d", n)
		ctx, cancel := context.WithCancel(ctxFor(t))
		var (
			acq    atomic.Int64
			lapses atomic.Int64
			mu     sync.Mutex
			c0, c1 int64
			wg     sync.WaitGroup
		)
		// Measured once every contender has queued at least once.
		mark := int64(limit + n + 5)
		errs := make(chan error, limit+n)
		for i := range limit + n {
			// A long TTL: 200 leases or sessions do not lapse under load.
			sem, err := semaphore.New(conns[i%len(conns)], dir, limit, semaphore.Options{TTL: time.Minute, ProbeInterval: time.Minute})
			require.NoError(t, err)
			wg.Go(func() {
				for ctx.Err() == nil {
					ld, err := sem.Acquire(ctx)
					if topo.IsErrType(err, topo.LockLost) && ctx.Err() == nil {
						// The contender's session lapsed under load (not
						// what this test measures): it queues again.
						lapses.Add(1)
						continue
					}
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					switch acq.Add(1) {
					case mark:
						mu.Lock()
						c0 = calls.Load()
						mu.Unlock()
					case mark + measured:
						mu.Lock()
						c1 = calls.Load()
						mu.Unlock()
						cancel()
					}
					if err := ld.Unlock(context.WithoutCancel(ctx)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		requireNoWorkerErrs(t, &wg, errs)
		cancel()
		require.GreaterOrEqual(t, acq.Load(), mark+measured, "%d waiting: the loop ended (its context did) before %d acquisitions", n, mark+measured)
		mu.Lock()
		per := float64(c1-c0) / measured
		mu.Unlock()
		t.Logf("%d waiting: %.1f Conn calls per acquisition (%d sessions lapsed)", n, per, lapses.Load())
		perAcq = append(perAcq, per)
	}
	for i := 1; i < len(perAcq); i++ {
		require.LessOrEqual(t, perAcq[i], 1.25*perAcq[0]+2, "Conn calls per handover grow with the number of waiters: %v", perAcq)
	}
}

// pauseDeleteConn is a Conn whose Delete of a path with the given suffix
// waits until release is closed (after reporting on entered), to stop a
// semaphore holder's Unlock at the step that deletes its info file.
type pauseDeleteConn struct {
	topo.Conn
	suffix  string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *pauseDeleteConn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	if strings.HasSuffix(filePath, c.suffix) {
		c.once.Do(func() { close(c.entered) })
		select {
		case <-c.release:
		case <-ctx.Done():
		}
	}
	return c.Conn.Delete(ctx, filePath, version)
}

// testSemaphoreUnlockEndsFenceFirst: a holder's slot goes to the next
// contender only once the holder's fence has ended. The holder's Unlock is
// stopped midway (at its info file's Delete); if another contender was
// admitted by then, a write guarded by the releasing holder must be
// refused, or with a limit of 1 two writers would be fenced in at once.
func testSemaphoreUnlockEndsFenceFirst(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	pc := &pauseDeleteConn{Conn: c1, suffix: "/info", entered: make(chan struct{}), release: make(chan struct{})}
	held, err := newSemaphore(s, pc, "sem", 1).Acquire(ctx)
	require.NoError(t, err)
	unlocked := make(chan error, 1)
	go func() { unlocked <- held.Unlock(ctx) }()
	resumed := false
	defer func() {
		if !resumed {
			close(pc.release)
			<-unlocked
		}
	}()
	_, _ = recv(t, pc.entered, "the Unlock reaching its info file's Delete")

	got := make(chan error, 1)
	var next topo.LockDescriptor
	go func() {
		var err error
		next, err = newSemaphore(s, c2, "sem", 1).TryAcquire(ctx)
		got <- err
	}()
	err, _ = recv(t, got, "TryAcquire while the holder's Unlock is paused")
	if err != nil {
		// Not admitted yet: nothing to check in this order.
		requireCode(t, err, topo.NodeExists, "TryAcquire while the holder's Unlock is paused")
		return
	}
	_, err = topo.GuardedUpdate(ctx, c1, held, "data", []byte("released holder"), nil)
	require.Error(t, err, "a write guarded by a holder whose slot went to another contender")
	requireNoFile(t, ctx, c2, "data")
	_, err = topo.GuardedUpdate(ctx, c2, next, "data", []byte("next holder"), nil)
	require.NoError(t, err)
	resumed = true
	close(pc.release)
	err, _ = recv(t, unlocked, "the Unlock once resumed")
	require.NoError(t, err)
	require.NoError(t, next.Unlock(ctx))
}

// gateHoldConn is a Conn whose Lock of the semaphore directory dir (the
// queue every Acquire waits in) reports on entered once it returned a
// lock, then waits until release is closed: the contender is next in
// line, between its place in the queue and the lock of its own contender
// directory.
type gateHoldConn struct {
	topo.Conn
	dir     string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (c *gateHoldConn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	ld, err := c.Conn.Lock(ctx, dirPath, contents)
	if err == nil && dirPath == c.dir {
		c.once.Do(func() {
			close(c.entered)
			<-c.release
		})
	}
	return ld, err
}

// testSemaphoreWaiterLosesQueue: the store drops the session of the
// contender next in line just after it got its place at the head of the
// queue (the lock of the semaphore's directory), before it took the lock
// of its own contender directory, which goes on a new session. It has
// lost its place: its Acquire returns LockLost while the slot is still
// held, rather than wait on as the head beside the contender that now
// heads the queue (two heads, the one without a place possibly admitted
// first). The contender behind it is admitted at the release.
func testSemaphoreWaiterLosesQueue(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c0, c1, c2 := s.conn(), s.conn(), s.conn()
	held, err := newSemaphore(s, c0, "sem", 1).Acquire(ctx)
	require.NoError(t, err)

	gc := &gateHoldConn{Conn: c1, dir: "sem", entered: make(chan struct{}), release: make(chan struct{})}
	first := make(chan error, 1)
	var firstLD topo.LockDescriptor
	go func() {
		var err error
		firstLD, err = newSemaphore(s, gc, "sem", 1).Acquire(ctx)
		first <- err
	}()
	released := false
	defer func() {
		if !released {
			close(gc.release)
		}
	}()
	_, _ = recv(t, gc.entered, "the first waiter heading the queue")
	s.opts.ExpireSession(t, c1)
	released = true
	close(gc.release)

	second := make(chan error, 1)
	var secondLD topo.LockDescriptor
	go func() {
		var err error
		secondLD, err = newSemaphore(s, c2, "sem", 1).Acquire(ctx)
		second <- err
	}()
	err, _ = recv(t, first, "the Acquire of the waiter whose session was dropped as it headed the queue, while the slot is held")
	if err == nil {
		_ = firstLD.Unlock(ctx)
	}
	requireCode(t, err, topo.LockLost, "the Acquire of the waiter whose session was dropped as it headed the queue")
	requireNothing(t, second, "the second waiter's Acquire while the slot is held")
	require.NoError(t, held.Unlock(ctx))
	err, _ = recv(t, second, "the second waiter's Acquire after the release")
	require.NoError(t, err)
	hs, err := newSemaphore(s, c0, "sem", 1).Holders(ctx)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.NoError(t, secondLD.Unlock(ctx))
}
