package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/realstores"
	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// backend opens connections to one store, each with its own session.
type backend struct {
	name string
	// start starts the store (once) and fills open and openCut.
	start func(t *testing.T, b *backend)
	// open returns a new Conn on the store.
	open func(t *testing.T) topo.Conn
	// openCut returns a new Conn whose traffic crosses a fault, with a
	// short session/lease TTL of ttl, and the funcs to cut and heal it.
	openCut func(t *testing.T) (conn topo.Conn, cut, heal func())
	// ttl is the semaphore TTL used for cut holders.
	ttl time.Duration
}

func backends() []backend {
	all := realstores.All("/sem")
	var out []backend
	for _, name := range realstores.Names() {
		mk := all[name]
		out = append(out, backend{name: name, start: func(t *testing.T, b *backend) {
			s := mk(t)
			b.open, b.openCut, b.ttl = s.Open, s.OpenCut, s.CutTTL
		}})
	}
	return out
}

var seq atomic.Int64

// dir returns a semaphore directory unique to the subtest.
func dir(t *testing.T) string {
	return fmt.Sprintf("s%d-%d", time.Now().UnixNano(), seq.Add(1))
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestSemaphore(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.start(t, &b)
			t.Run("AdmitsUpToLimit", func(t *testing.T) { testLimit(t, b) })
			t.Run("NeverMoreThanLimit", func(t *testing.T) { testNeverMore(t, b) })
			t.Run("CrashedHolderFreesSlot", func(t *testing.T) { testCrashed(t, b) })
			t.Run("CancelledWaitLeavesNothing", func(t *testing.T) { testCancelled(t, b) })
			t.Run("BadInput", func(t *testing.T) { testBadInput(t, b) })
		})
	}
}

func testLimit(t *testing.T, b backend) {
	ctx := testCtx(t, time.Minute)
	d := dir(t)
	conns := []topo.Conn{b.open(t), b.open(t), b.open(t)}
	sems := make([]*semaphore.Semaphore, 3)
	for i, c := range conns {
		s, err := semaphore.New(c, d, 2, semaphore.Options{Description: fmt.Sprintf("holder %d", i)})
		require.NoError(t, err)
		sems[i] = s
	}
	a, err := sems[0].Acquire(ctx)
	require.NoError(t, err)
	bd, err := sems[1].TryAcquire(ctx)
	require.NoError(t, err)
	require.Greater(t, bd.Token(), a.Token(), "a later admission has a greater token")
	require.NoError(t, a.Check(ctx))
	require.NoError(t, bd.Check(ctx))

	_, err = sems[2].TryAcquire(ctx)
	require.ErrorIs(t, err, topo.NodeExists, "a full semaphore refuses TryAcquire")

	holders, err := sems[2].Holders(ctx)
	require.NoError(t, err)
	require.Len(t, holders, 2)
	require.Equal(t, "holder 0", holders[0].Description)

	got := make(chan topo.LockDescriptor, 1)
	errc := make(chan error, 1)
	go func() {
		ld, err := sems[2].Acquire(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- ld
	}()
	require.NoError(t, a.Unlock(ctx))
	require.ErrorIs(t, a.Unlock(ctx), topo.Interrupted, "a second Unlock")
	select {
	case <-a.Done():
	default:
		t.Fatal("Done of an unlocked holder is not closed")
	}
	require.ErrorIs(t, a.Check(ctx), topo.Interrupted)
	var c topo.LockDescriptor
	select {
	case c = <-got:
	case err := <-errc:
		t.Fatalf("the waiting Acquire failed: %v", err)
	case <-ctx.Done():
		t.Fatal("the waiting Acquire did not get the freed slot")
	}
	require.Greater(t, c.Token(), bd.Token())

	// A guarded write through the holder's descriptor works while held,
	// and is refused once released.
	v, err := topo.GuardedUpdate(ctx, conns[2], c, d+"-data", []byte("x"), nil)
	require.NoError(t, err)
	require.NotNil(t, v)
	require.NoError(t, c.Unlock(ctx))
	_, err = topo.GuardedUpdate(ctx, conns[2], c, d+"-data", []byte("y"), nil)
	require.ErrorIs(t, err, topo.LockLost)
	data, _, err := conns[0].Get(ctx, d+"-data")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
	require.NoError(t, bd.Unlock(ctx))

	holders, err = sems[0].Holders(ctx)
	require.NoError(t, err)
	require.Empty(t, holders)
}

// testNeverMore runs many acquire/release cycles on several Conns, with
// holders that "crash" (close their Conn without releasing) mixed in, and
// counts holders in process and in the store's record.
func testNeverMore(t *testing.T, b backend) {
	ctx := testCtx(t, 3*time.Minute)
	d := dir(t)
	const limit, workers, rounds = 2, 5, 6
	var inside, maxInside atomic.Int64
	var tokensMu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			conn := b.open(t)
			for r := range rounds {
				s, err := semaphore.New(conn, d, limit, semaphore.Options{ProbeInterval: 200 * time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				ld, err := s.Acquire(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				hs, err := s.Holders(ctx)
				if err != nil {
					errs <- err
					return
				}
				if len(hs) > limit {
					errs <- fmt.Errorf("the record lists %d holders, limit %d", len(hs), limit)
				}
				tokensMu.Lock()
				tokens = append(tokens, ld.Token())
				tokensMu.Unlock()
				inside.Add(-1)
				if (w+r)%4 == 3 {
					// Crash: the Conn goes without releasing; its
					// session ends with it.
					conn.Close()
					conn = b.open(t)
					continue
				}
				if err := ld.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("worker %d round %d unlock: %w", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, maxInside.Load(), int64(limit), "more holders at once than the limit")
	seen := map[int64]bool{}
	for _, tok := range tokens {
		require.Falsef(t, seen[tok], "token %d was given twice", tok)
		seen[tok] = true
	}
}

// testCrashed: a holder cut off from the store loses its slot to a waiter
// once its session lapses, and its guarded writes are refused.
func testCrashed(t *testing.T, b backend) {
	ctx := testCtx(t, 2*time.Minute)
	d := dir(t)
	cutConn, cut, heal := b.openCut(t)
	s1, err := semaphore.New(cutConn, d, 1, semaphore.Options{TTL: b.ttl})
	require.NoError(t, err)
	held, err := s1.Acquire(ctx)
	require.NoError(t, err)

	other := b.open(t)
	s2, err := semaphore.New(other, d, 1, semaphore.Options{TTL: b.ttl, ProbeInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = s2.TryAcquire(ctx)
	require.ErrorIs(t, err, topo.NodeExists)

	cut()
	next, err := s2.Acquire(ctx)
	require.NoError(t, err, "the slot of a holder whose session lapsed is freed")
	require.Greater(t, next.Token(), held.Token())
	heal()

	select {
	case <-held.Done():
	case <-ctx.Done():
		t.Fatal("the crashed holder's Done did not close")
	}
	_, err = topo.GuardedUpdate(ctx, cutConn, held, d+"-data", []byte("stale"), nil)
	require.Error(t, err, "a stale holder's guarded write")
	_, _, err = other.Get(ctx, d+"-data")
	require.ErrorIs(t, err, topo.NoNode, "the stale write reached the store")
	require.NoError(t, next.Unlock(ctx))
}

func testCancelled(t *testing.T, b backend) {
	ctx := testCtx(t, time.Minute)
	d := dir(t)
	c1, c2 := b.open(t), b.open(t)
	s1, err := semaphore.New(c1, d, 1, semaphore.Options{})
	require.NoError(t, err)
	held, err := s1.Acquire(ctx)
	require.NoError(t, err)
	s2, err := semaphore.New(c2, d, 1, semaphore.Options{ProbeInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s2.Acquire(wctx)
		errc <- err
	}()
	// Wait until the second contender has registered, then cancel it.
	require.Eventually(t, func() bool {
		entries, err := c1.ListDir(ctx, d+"/contenders", false)
		return err == nil && len(entries) == 2
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	err = <-errc
	require.ErrorIs(t, err, topo.Interrupted)
	// A lock request that was in flight when the context ended is undone
	// in the background (etcd2topo hands it off), so the entry goes soon
	// after Acquire returns, not necessarily before.
	// The contender is cancelled at once when its info file shows, so its
	// Create may still be answering: that file goes too (an Interrupted
	// Create may have been applied).
	if !assert.Eventually(t, func() bool {
		entries, err := c1.ListDir(ctx, d+"/contenders", false)
		return err == nil && len(entries) == 1
	}, 30*time.Second, 10*time.Millisecond) {
		// Say what is left: the entries and every file under them.
		entries, lerr := c1.ListDir(ctx, d+"/contenders", false)
		kvs, err := c1.List(ctx, d+"/contenders/")
		t.Fatalf("the cancelled contender left its entry behind: ListDir %v (%v), files %v (%v)", entries, lerr, kvs, err)
	}
	hs, err := s1.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.NoError(t, held.Unlock(ctx))
}

func testBadInput(t *testing.T, b backend) {
	ctx := testCtx(t, time.Minute)
	c := b.open(t)
	for _, tc := range []struct {
		dir   string
		limit int
		opts  semaphore.Options
		code  topo.ErrorCode
	}{
		{"", 1, semaphore.Options{}, topo.InvalidPath},
		{"a/../b", 1, semaphore.Options{}, topo.InvalidPath},
		{"a/locks", 1, semaphore.Options{}, topo.InvalidPath},
		{"elections/x", 1, semaphore.Options{}, topo.InvalidPath},
		{"ok", 0, semaphore.Options{}, topo.InvalidArgument},
		{"ok", 1, semaphore.Options{TTL: -time.Second}, topo.InvalidArgument},
	} {
		_, err := semaphore.New(c, tc.dir, tc.limit, tc.opts)
		require.ErrorIsf(t, err, tc.code, "New(%q, %d)", tc.dir, tc.limit)
	}
	d := dir(t)
	s, err := semaphore.New(c, d, 2, semaphore.Options{})
	require.NoError(t, err)
	ld, err := s.Acquire(ctx)
	require.NoError(t, err)
	other, err := semaphore.New(c, d, 3, semaphore.Options{})
	require.NoError(t, err)
	_, err = other.TryAcquire(ctx)
	require.ErrorIs(t, err, topo.InvalidArgument, "a contender with another limit")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Acquire(cctx)
	require.True(t, errors.Is(err, topo.Interrupted), "Acquire with a cancelled context: %v", err)
	require.NoError(t, ld.Unlock(ctx))
	entries, err := c.ListDir(ctx, d+"/contenders", false)
	if err == nil {
		require.Empty(t, entries, "failed acquisitions left entries behind")
	} else {
		require.ErrorIs(t, err, topo.NoNode)
	}
}

// TestAcquireRidesOutUnavailable: a waiting Acquire whose reads of the
// record fail with Unavailable for a while (the store out of reach for a
// moment) keeps its place and is admitted at the next release, as a
// lock's wait rides such a blip out; it returned the error and gave up
// its place.
func TestAcquireRidesOutUnavailable(t *testing.T) {
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 2 * time.Second})
	open := func() topo.Conn {
		c, err := f.NewConn("", "/sem")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	ctx := testCtx(t, time.Minute)
	d := dir(t)
	opts := semaphore.Options{ProbeInterval: 20 * time.Millisecond}
	s1, err := semaphore.New(open(), d, 1, opts)
	require.NoError(t, err)
	held, err := s1.Acquire(ctx)
	require.NoError(t, err)

	const fails = 3
	before := f.CallCount(memorytopo.OpGet)
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpGet, Path: d + "/holders", Times: fails})
	s2, err := semaphore.New(open(), d, 1, opts)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		ld, err := s2.Acquire(ctx)
		if err == nil {
			defer func() { _ = ld.Unlock(context.Background()) }()
		}
		got <- err
	}()
	// The waiter's reads fail until the fault has run out; then the slot
	// is released.
	var early error
	ended := false
	require.Eventually(t, func() bool {
		select {
		case early = <-got:
			ended = true
			return true
		default:
		}
		return f.CallCount(memorytopo.OpGet)-before > fails
	}, 30*time.Second, time.Millisecond)
	require.NoError(t, early, "the waiting Acquire after a read failed with Unavailable")
	require.False(t, ended, "the waiter was admitted while the slot was held")
	require.NoError(t, held.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err, "the waiting Acquire after the blip, once the slot was released")
	case <-ctx.Done():
		t.Fatal("the waiter was never admitted")
	}
}
