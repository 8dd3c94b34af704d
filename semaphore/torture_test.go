package semaphore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/realstores"
	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// TestTorture: holders of a semaphore of capacity 2 acquire (some with a
// context that ends at random), try to acquire, and leave every way:
// Unlock, Unlock with an ended context, their session dropped (memorytopo,
// etcd; their Conn closed on ZooKeeper and Consul), their Conn closed.
// Whenever an Acquire returns, the holders that still
// believe they hold (Done open, Unlock not called) are at most 2, and the
// record lists at most 2. At the end every slot is reusable: 2 fresh
// contenders both get in.
func TestTorture(t *testing.T) {
	for name, mk := range realstores.All("/sem") {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			ctx := testCtx(t, 3*time.Minute)
			d := dir(t)
			const limit, workers, rounds = 2, 6, 12
			var mu sync.Mutex
			live := map[int]topo.LockDescriptor{} // holders that believe they hold
			var next atomic.Int64
			errs := make(chan error, workers*rounds)
			check := func(who string) {
				mu.Lock()
				defer mu.Unlock()
				n := 0
				for _, ld := range live {
					select {
					case <-ld.Done():
					default:
						n++
					}
				}
				if n > limit {
					errs <- fmt.Errorf("%s: %d holders believe they hold (limit %d)", who, n, limit)
				}
			}
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					conn := st.Open(t)
					for r := range rounds {
						s, err := semaphore.New(conn, d, limit, semaphore.Options{ProbeInterval: 100 * time.Millisecond})
						if err != nil {
							errs <- err
							return
						}
						var ld topo.LockDescriptor
						switch rng.IntN(4) {
						case 0:
							ld, err = s.TryAcquire(ctx)
							if topo.IsErrType(err, topo.NodeExists) {
								continue
							}
						case 1:
							actx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(50))*time.Millisecond)
							ld, err = s.Acquire(actx)
							cancel()
							if err != nil && (topo.IsErrType(err, topo.Timeout) || topo.IsErrType(err, topo.Interrupted)) {
								continue
							}
						default:
							ld, err = s.Acquire(ctx)
						}
						if err != nil {
							errs <- fmt.Errorf("worker %d round %d: %w", w, r, err)
							return
						}
						id := int(next.Add(1))
						mu.Lock()
						live[id] = ld
						mu.Unlock()
						check(fmt.Sprintf("worker %d round %d admitted (token %d)", w, r, ld.Token()))
						if hs, err := s.Holders(ctx); err != nil || len(hs) > limit {
							errs <- fmt.Errorf("worker %d round %d: Holders %d, %v", w, r, len(hs), err)
						}
						time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						how := rng.IntN(5)
						if how < 3 || how == 3 {
							mu.Lock()
							delete(live, id)
							mu.Unlock()
						}
						switch how {
						case 0, 1:
							if err := ld.Unlock(ctx); err != nil {
								errs <- fmt.Errorf("worker %d round %d: Unlock: %w", w, r, err)
								return
							}
						case 2:
							cctx, cancel := context.WithCancel(ctx)
							cancel()
							_ = ld.Unlock(cctx)
						case 3:
							conn.Close()
							conn = st.Open(t)
						case 4:
							if st.Expire == nil {
								mu.Lock()
								delete(live, id)
								mu.Unlock()
								conn.Close()
								conn = st.Open(t)
								continue
							}
							st.Expire(t, conn)
							select {
							case <-ld.Done():
							case <-ctx.Done():
								errs <- fmt.Errorf("worker %d round %d: Done open after the session was dropped", w, r)
								return
							}
							mu.Lock()
							delete(live, id)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			// Every slot is reusable.
			var lds []topo.LockDescriptor
			for i := range limit {
				s, err := semaphore.New(st.Open(t), d, limit, semaphore.Options{ProbeInterval: 100 * time.Millisecond})
				require.NoError(t, err)
				actx, cancel := context.WithTimeout(ctx, time.Minute)
				ld, err := s.Acquire(actx)
				cancel()
				require.NoErrorf(t, err, "fresh contender %d", i)
				lds = append(lds, ld)
			}
			for _, ld := range lds {
				require.NoError(t, ld.Unlock(ctx))
			}
		})
	}
}
