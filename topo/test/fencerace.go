package test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testFenceGuardedRacesUnlock: a holder's guarded writes in flight while
// it unlocks and the next holder (another Conn, queued) takes the lock and
// writes: no write of the first holder lands after the next holder's
// first guarded write, every write reported applied is the holder's last
// before the next holder's (read back by a third Conn's Watch, which
// reports every change in order), and the tokens increase.
func testFenceGuardedRacesUnlock(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a, b, r := s.conn(), s.conn(), s.conn()
	mustCreate(t, ctx, r, "d/f", "x")
	mustCreate(t, ctx, r, "d/data", "init")
	_, ch, err := r.Watch(ctx, "d/data")
	require.NoError(t, err)
	var prevToken int64
	for round := range 5 {
		la := mustLock(t, ctx, a, "d", "a")
		require.Greater(t, la.Token(), prevToken)
		lbCh := lockAsync(t, func() (topo.LockDescriptor, error) { return b.Lock(ctx, "d", "b") })
		var wg sync.WaitGroup
		var stop atomic.Bool
		var okWrites atomic.Int64
		var once sync.Once
		written := make(chan struct{}) // closed after a's third write
		for w := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					_, err := topo.GuardedUpdate(ctx, a, la, "d/data", []byte(fmt.Sprintf("a%d-%d-%d", round, w, i)), nil)
					if err == nil {
						if okWrites.Add(1) == 3 {
							once.Do(func() { close(written) })
						}
						continue
					}
					if !topo.IsErrType(err, topo.LockLost) {
						t.Errorf("guarded write of the unlocking holder: %v", err)
					}
					once.Do(func() { close(written) })
					return
				}
			})
		}
		<-written
		require.NoError(t, la.Unlock(ctx))
		res := <-lbCh
		require.NoError(t, res.err)
		lb := res.l
		require.Greater(t, lb.Token(), la.Token())
		bv := fmt.Sprintf("b%d", round)
		_, err := topo.GuardedUpdate(ctx, b, lb, "d/data", []byte(bv), nil)
		require.NoError(t, err)
		stop.Store(true)
		wg.Wait()
		// After b's value, the watch shows nothing of a's.
		sawB := false
		for !sawB {
			wd, ok := recv(t, ch, "Watch(d/data)")
			require.True(t, ok)
			require.NoError(t, wd.Err)
			sawB = string(wd.Contents) == bv
		}
		_, err = topo.GuardedUpdate(ctx, b, lb, "d/data", []byte("end"+bv), nil)
		require.NoError(t, err)
		wd, ok := recv(t, ch, "Watch(d/data)")
		require.True(t, ok)
		require.Falsef(t, strings.HasPrefix(string(wd.Contents), "a"), "round %d: a's write %q landed after b's", round, wd.Contents)
		require.Equal(t, "end"+bv, string(wd.Contents))
		prevToken = lb.Token()
		require.NoError(t, lb.Unlock(ctx))
	}
}
