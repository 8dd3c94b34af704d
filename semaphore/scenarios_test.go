package semaphore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// cancelAtConn cancels a context after its n-th call through the Conn
// (the call itself completes: the store applied it, its caller sees the
// ended context next).
type cancelAtConn struct {
	topo.Conn
	mu     sync.Mutex
	calls  int
	at     int
	cancel context.CancelFunc
	lost   bool // the n-th call's reply is replaced by Unavailable
}

func (c *cancelAtConn) step(err error) error { return c.stepLost(err, c.lost) }

// stepLost counts a call; a lock call's reply is never lost (a Conn that
// fails a Lock does not leave the lock held).
func (c *cancelAtConn) stepLost(err error, lost bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls == c.at {
		c.cancel()
		if lost && err == nil {
			return topo.NewError(topo.Unavailable, "reply lost")
		}
	}
	return err
}

func (c *cancelAtConn) Create(ctx context.Context, p string, b []byte) (topo.Version, error) {
	v, err := c.Conn.Create(ctx, p, b)
	return v, c.step(err)
}
func (c *cancelAtConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	b, v, err := c.Conn.Get(ctx, p)
	return b, v, c.step(err)
}
func (c *cancelAtConn) Delete(ctx context.Context, p string, v topo.Version) error {
	return c.step(c.Conn.Delete(ctx, p, v))
}
func (c *cancelAtConn) Lock(ctx context.Context, p, d string) (topo.LockDescriptor, error) {
	l, err := c.Conn.Lock(ctx, p, d)
	return l, c.stepLost(err, false)
}
func (c *cancelAtConn) TryLock(ctx context.Context, p, d string) (topo.LockDescriptor, error) {
	l, err := c.Conn.TryLock(ctx, p, d)
	return l, c.stepLost(err, false)
}
func (c *cancelAtConn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	r, err := c.Conn.Txn(ctx, ops...)
	return r, c.step(err)
}

// TestAcquireCancelledAtEveryStep: an Acquire (and a TryAcquire) whose
// context ends right after each of its store calls in turn, or whose
// call's reply is lost, leaves the semaphore usable: the slot it may have
// been given frees, and another contender gets it.
func TestAcquireCancelledAtEveryStep(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.start(t, &b)
			for _, try := range []bool{false, true} {
				for _, lost := range []bool{false, true} {
					for at := 1; ; at++ {
						ctx := testCtx(t, time.Minute)
						d := dir(t)
						conn := b.open(t)
						// A dead holder to prune: its Conn is closed.
						dead := b.open(t)
						s0, err := semaphore.New(dead, d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
						require.NoError(t, err)
						_, err = s0.Acquire(ctx)
						require.NoError(t, err)
						dead.Close()

						cctx, cancel := context.WithCancel(ctx)
						cc := &cancelAtConn{Conn: conn, at: at, cancel: cancel, lost: lost}
						s1, err := semaphore.New(cc, d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
						require.NoError(t, err)
						var ld topo.LockDescriptor
						if try {
							ld, err = s1.TryAcquire(cctx)
						} else {
							ld, err = s1.Acquire(cctx)
						}
						cancel()
						cc.mu.Lock()
						calls := cc.calls
						cc.at = -1 // the Unlock below goes through unharmed
						cc.mu.Unlock()
						if err == nil {
							require.NoError(t, ld.Unlock(ctx))
						}
						// Another contender gets the slot.
						s2, err2 := semaphore.New(b.open(t), d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
						require.NoError(t, err2)
						actx, acancel := context.WithTimeout(ctx, 3*b.ttl+5*time.Second)
						next, err2 := s2.Acquire(actx)
						acancel()
						require.NoErrorf(t, err2, "try=%v lost=%v: Acquire after the first acquisition ended at call %d (%v)", try, lost, at, err)
						hs, err2 := s2.Holders(ctx)
						require.NoError(t, err2)
						require.Len(t, hs, 1, "try=%v lost=%v at %d", try, lost, at)
						require.NoError(t, next.Unlock(ctx))
						if calls < at {
							break // the acquisition made fewer calls: all steps done
						}
					}
				}
			}
		})
	}
}

// TestPartitionedHolderStepsDownFirst: a holder cut off from the store
// sees its Done closed no later than another contender is admitted to
// its slot (the store ends its session no sooner than its client does).
func TestPartitionedHolderStepsDownFirst(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.start(t, &b)
			ctx := testCtx(t, 2*time.Minute)
			d := dir(t)
			cutConn, cut, heal := b.openCut(t)
			t.Cleanup(heal)
			s1, err := semaphore.New(cutConn, d, 1, semaphore.Options{TTL: b.ttl})
			require.NoError(t, err)
			held, err := s1.Acquire(ctx)
			require.NoError(t, err)
			s2, err := semaphore.New(b.open(t), d, 1, semaphore.Options{TTL: b.ttl, ProbeInterval: 100 * time.Millisecond})
			require.NoError(t, err)
			cut()
			next, err := s2.Acquire(ctx)
			require.NoError(t, err)
			select {
			case <-held.Done():
			default:
				t.Fatal("another contender was admitted while the cut-off holder's Done was still open")
			}
			heal()
			err = held.Unlock(ctx)
			require.ErrorIs(t, err, topo.LockLost, "Unlock of the cut-off holder after the heal: %v", err)
			hs, err := s2.Holders(ctx)
			require.NoError(t, err)
			require.Len(t, hs, 1)
			require.Equal(t, next.Token(), hs[0].Token)
			require.NoError(t, next.Unlock(ctx))
		})
	}
}

// TestFencedWritesInTokenOrder: holders of a one-slot semaphore keep
// writing, each guarded by its own holder (IfHeld) and by the version it
// read (compare-and-set), while they release or crash (close their Conn);
// no write of a holder is applied after a write of a later holder (a
// greater token): the slot's fences never overlap.
func TestFencedWritesInTokenOrder(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.start(t, &b)
			ctx := testCtx(t, 2*time.Minute)
			d := dir(t)
			data := d + "-data"
			reader := b.open(t)
			const workers, rounds = 3, 6
			var wg sync.WaitGroup
			errs := make(chan error, workers*rounds*2)
			for w := range workers {
				wg.Go(func() {
					conn := b.open(t)
					for r := range rounds {
						s, err := semaphore.New(conn, d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
						if err != nil {
							errs <- err
							return
						}
						ld, err := s.Acquire(ctx)
						if err != nil {
							errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
							return
						}
						writes, wrote := make(chan int, 1), make(chan struct{})
						go func() {
							n := 0
							var last error
							defer func() {
								if n == 0 {
									errs <- fmt.Errorf("token %d: no guarded write while held: %v", ld.Token(), last)
									close(wrote)
								}
								writes <- n
							}()
							for {
								cur, v, err := conn.Get(ctx, data)
								var prev int64
								switch {
								case topo.IsErrType(err, topo.NoNode):
									v = nil
								case err != nil:
									last = err
									return
								default:
									prev, _ = strconv.ParseInt(string(cur), 10, 64)
								}
								op := topo.CreateOp(data, []byte(strconv.FormatInt(ld.Token(), 10)))
								if v != nil {
									op = topo.UpdateOp(data, []byte(strconv.FormatInt(ld.Token(), 10)), v)
								}
								_, err = conn.Txn(ctx, topo.IfHeld(ld), op)
								if n == 0 && err == nil {
									close(wrote)
								}
								if err != nil {
									if topo.IsErrType(err, topo.BadVersion) || topo.IsErrType(err, topo.NodeExists) {
										continue
									}
									last = err
									return
								}
								if prev > ld.Token() {
									errs <- fmt.Errorf("holder of token %d wrote after holder of token %d", ld.Token(), prev)
								}
								n++
							}
						}()
						<-wrote // the holder has written; now it goes, writing on
						if (w+r)%4 == 3 {
							conn.Close() // a crash: the slot frees by a probe
							<-writes
							conn = b.open(t)
							continue
						}
						// Release while the writer goes on.
						if err := ld.Unlock(ctx); err != nil {
							errs <- fmt.Errorf("worker %d round %d unlock: %w", w, r, err)
						}
						<-writes
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			_, _, err := reader.Get(ctx, data)
			require.NoError(t, err)
		})
	}
}

// TestClosedConnCodes: a holder whose Conn is closed sees Done closed,
// Unlock and Check say Closed or LockLost, and a later Acquire on that
// Conn says Closed; the slot goes to another contender.
func TestClosedConnCodes(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			b.start(t, &b)
			ctx := testCtx(t, time.Minute)
			d := dir(t)
			c1 := b.open(t)
			s1, err := semaphore.New(c1, d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			held, err := s1.Acquire(ctx)
			require.NoError(t, err)
			s2, err := semaphore.New(b.open(t), d, 1, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
			require.NoError(t, err)
			got := make(chan error, 1)
			var next topo.LockDescriptor
			go func() {
				var err error
				next, err = s2.Acquire(ctx)
				got <- err
			}()
			c1.Close()
			select {
			case <-held.Done():
			case <-ctx.Done():
				t.Fatal("Done of a holder whose Conn closed")
			}
			require.NoError(t, <-got)
			err = held.Check(ctx)
			require.True(t, topo.IsErrType(err, topo.Closed) || topo.IsErrType(err, topo.LockLost), "Check: %v", err)
			err = held.Unlock(ctx)
			require.True(t, topo.IsErrType(err, topo.Closed), "Unlock: %v", err)
			_, err = s1.Acquire(ctx)
			require.True(t, topo.IsErrType(err, topo.Closed), "Acquire on a closed Conn: %v", err)
			_, err = s1.TryAcquire(ctx)
			require.True(t, topo.IsErrType(err, topo.Closed), "TryAcquire on a closed Conn: %v", err)
			hs, err := s2.Holders(ctx)
			require.NoError(t, err)
			require.Len(t, hs, 1)
			require.Equal(t, next.Token(), hs[0].Token)
			require.NoError(t, next.Unlock(ctx))
		})
	}
}
