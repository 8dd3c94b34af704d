package semaphore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestChurnInProcess: a semaphore of capacity 3 under churn on memorytopo
// (whose waiters park through the claims engine's in-process wait): 9
// workers acquire and then release, lose their session (ExpireSession)
// or give up an Acquire by cancelling it, many times. At no moment do more
// than 3 hold a permit, no token is given twice, and every Acquire that
// is not cancelled is admitted (no wake-up is lost).
func TestChurnInProcess(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 2 * time.Second})
	const limit, workers, rounds = 3, 9, 25
	d := dir(t)
	var (
		inside, maxInside atomic.Int64
		admitted          atomic.Int64
		tokensMu          sync.Mutex
		tokens            = map[int64]bool{}
		wg                sync.WaitGroup
	)
	errs := make(chan error, workers)
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			c, err := f.NewConn("", "/sem")
			if err != nil {
				errs <- err
				return
			}
			defer func() { c.Close() }()
			for r := range rounds {
				s, err := semaphore.New(c, d, limit, semaphore.Options{ProbeInterval: 100 * time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				if (w+r)%5 == 4 {
					// Gives up: cancelled at once or while it waits.
					actx, cancel := context.WithCancel(ctx)
					go cancel()
					ld, err := s.Acquire(actx)
					cancel()
					if err == nil {
						// Admitted before the cancellation: a permit like
						// any other.
						admitted.Add(1)
						_ = ld.Unlock(ctx)
					} else if !topo.IsErrType(err, topo.Interrupted) {
						errs <- fmt.Errorf("worker %d round %d: cancelled Acquire: %w", w, r, err)
						return
					}
					continue
				}
				ld, err := s.Acquire(ctx)
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
					return
				}
				admitted.Add(1)
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				tokensMu.Lock()
				dup := tokens[ld.Token()]
				tokens[ld.Token()] = true
				tokensMu.Unlock()
				if dup {
					errs <- fmt.Errorf("token %d given twice", ld.Token())
					return
				}
				// Hold the permit for a read of the record, which never
				// lists more than the limit.
				if hs, err := s.Holders(ctx); err != nil || len(hs) > limit {
					errs <- fmt.Errorf("worker %d round %d: Holders: %d, %v", w, r, len(hs), err)
					return
				}
				runtime.Gosched()
				inside.Add(-1) // before the permit goes, whichever way
				if (w+r)%7 == 6 {
					c.ExpireSession()
					continue
				}
				if err := ld.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("worker %d round %d: Unlock: %w", w, r, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, maxInside.Load(), int64(limit), "more holders at once than the limit")
	t.Logf("%d admissions, at most %d at once", admitted.Load(), maxInside.Load())
}
