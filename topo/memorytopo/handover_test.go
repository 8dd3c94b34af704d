package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestHandoverOrder checks the lock hand-over of a waiting Lock: when the
// holder's entry goes (Unlock, ExpireSession, Close), the waiter's Lock
// returns only after the old holder's Done has closed and its Check
// fails, so that two holders never both see their lock as held; a waiter
// behind another waiter is not let in when the one ahead of it leaves
// while the holder stays. Each case runs with and without a ListDir of
// the locks directory before the end (a reader of the tree meeting the
// queue).
func TestHandoverOrder(t *testing.T) {
	ends := []struct {
		name string
		end  func(t *testing.T, c *memorytopo.Conn, ld topo.LockDescriptor)
	}{
		{"Unlock", func(t *testing.T, c *memorytopo.Conn, ld topo.LockDescriptor) {
			require.NoError(t, ld.Unlock(context.Background()))
		}},
		{"ExpireSession", func(t *testing.T, c *memorytopo.Conn, ld topo.LockDescriptor) {
			c.ExpireSession()
		}},
		{"Close", func(t *testing.T, c *memorytopo.Conn, ld topo.LockDescriptor) {
			c.Close()
		}},
	}
	for _, placed := range []bool{false, true} {
		for _, end := range ends {
			t.Run(fmt.Sprintf("%s/placed=%v", end.name, placed), func(t *testing.T) {
				ctx := testCtx(t)
				f := memorytopo.NewFactory()
				w := newConn(t, f)
				_, err := w.Create(ctx, "d/f", []byte("x"))
				require.NoError(t, err)
				for round := range 50 {
					h := newConn(t, f)
					held, err := h.Lock(ctx, "d", "holder")
					require.NoError(t, err)
					got := make(chan error, 1)
					go func() {
						ld, err := w.Lock(ctx, "d", "waiter")
						if err == nil {
							// The old holder's claim must have ended by now.
							select {
							case <-held.Done():
							default:
								err = fmt.Errorf("round %d: the waiter holds the lock while the old holder's Done is open", round)
							}
							if err == nil && held.Check(ctx) == nil {
								err = fmt.Errorf("round %d: the old holder's Check passes while the waiter holds the lock", round)
							}
							if uerr := ld.Unlock(ctx); err == nil {
								err = uerr
							}
						}
						got <- err
					}()
					waitForEntries(t, w, 2)
					if placed {
						_, err := w.ListDir(ctx, "d/locks", false)
						require.NoError(t, err)
					}
					end.end(t, h, held)
					require.NoError(t, <-got)
					h.Close()
				}
			})
		}
	}

	// The middle of three leaves (its context ends): the last still waits
	// for the holder, and gets the lock when the holder unlocks.
	for _, placed := range []bool{false, true} {
		t.Run(fmt.Sprintf("MiddleLeaves/placed=%v", placed), func(t *testing.T) {
			ctx := testCtx(t)
			f := memorytopo.NewFactory()
			h, m, l := newConn(t, f), newConn(t, f), newConn(t, f)
			_, err := h.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			held, err := h.Lock(ctx, "d", "holder")
			require.NoError(t, err)
			mctx, cancel := context.WithCancel(ctx)
			mid := make(chan error, 1)
			go func() {
				_, err := m.Lock(mctx, "d", "middle")
				mid <- err
			}()
			waitForEntries(t, h, 2)
			last := make(chan topo.LockDescriptor, 1)
			go func() {
				ld, err := l.Lock(ctx, "d", "last")
				if err != nil {
					t.Error(err)
				}
				last <- ld
			}()
			waitForEntries(t, h, 3)
			if placed {
				_, err := h.ListDir(ctx, "d/locks", false)
				require.NoError(t, err)
			}
			cancel()
			requireCode(t, <-mid, topo.Interrupted)
			select {
			case <-last:
				t.Fatal("the last waiter got the lock while the holder holds it")
			case <-time.After(100 * time.Millisecond):
			}
			require.NoError(t, held.Check(ctx))
			require.NoError(t, held.Unlock(ctx))
			ld := <-last
			require.NotNil(t, ld)
			require.NoError(t, ld.Check(ctx))
			require.NoError(t, ld.Unlock(ctx))
		})
	}
}

// waitForEntries waits until the lock of d has n entries (holder and
// waiters), as c's store sees them.
func waitForEntries(t *testing.T, c *memorytopo.Conn, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return memorytopo.LockEntries(c, "d") == n }, waitLimit, poll)
}

// TestLockExclusiveUnderCancellation races waiters whose contexts end
// (cancelled or timed out, often just as their turn comes), Conns closed
// while their Lock waits, session loss and placement against each other:
// at no time do two live holders exist, the tokens of successive holders
// increase, and every Lock either holds the lock or reports why not.
func TestLockExclusiveUnderCancellation(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	base := newConn(t, f)
	_, err := base.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		holding = map[topo.LockDescriptor]bool{}
		last    int64
	)
	hold := func(ld topo.LockDescriptor) {
		mu.Lock()
		defer mu.Unlock()
		if ld.Check(ctx) != nil {
			return // already lost (an expired session, a closed Conn)
		}
		for o := range holding {
			if o.Check(ctx) == nil {
				t.Errorf("two holders at once: tokens %d and %d", o.(topo.Fence).Token(), ld.(topo.Fence).Token())
			}
		}
		tok := ld.(topo.Fence).Token()
		if tok <= last {
			t.Errorf("token %d after %d", tok, last)
		}
		last = tok
		holding[ld] = true
	}
	release := func(ld topo.LockDescriptor) {
		mu.Lock()
		delete(holding, ld)
		mu.Unlock()
		if err := ld.Unlock(ctx); err != nil && !topo.IsErrType(err, topo.LockLost) && !topo.IsErrType(err, topo.Closed) {
			t.Errorf("Unlock: %v", err)
		}
	}
	allowed := func(err error) bool {
		for _, code := range []topo.ErrorCode{topo.Interrupted, topo.Timeout, topo.LockLost, topo.Closed} {
			if topo.IsErrType(err, code) {
				return true
			}
		}
		return false
	}

	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // placement and session loss
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%7 == 0 {
				_, _ = base.ListDir(ctx, "d/locks", false)
			}
			if i%300 == 0 {
				base.ExpireSession()
			}
			runtime.Gosched()
		}
	})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			own := newConn(t, f)
			for i := range 250 {
				c := topo.Conn(own)
				lctx, cancel := context.WithCancel(ctx)
				switch (g + i) % 4 {
				case 0: // cancelled by another goroutine soon
					go func() { runtime.Gosched(); cancel() }()
				case 1: // a deadline of a few microseconds to a millisecond
					lctx, cancel = context.WithTimeout(ctx, time.Duration(1+i%1000)*time.Microsecond)
				case 2: // its Conn closes while it may wait
					tmp := newConn(t, f)
					c = tmp
					go func() { runtime.Gosched(); tmp.Close() }()
				default:
					c = base
				}
				ld, err := c.Lock(lctx, "d", fmt.Sprint(g))
				if err != nil {
					if !allowed(err) {
						t.Errorf("Lock: %v", err)
					}
					cancel()
					continue
				}
				hold(ld)
				runtime.Gosched()
				release(ld)
				cancel()
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()

	// Nothing is left waiting or holding: the lock is free.
	ld, err := base.TryLock(ctx, "d", "last")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
}
