package memorytopo_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestUnsharedLockSessionLoss: an uncontended lock is on no session's list
// until its Done is first called (claims' unshared claims); its session's
// loss ends it all the same, whether Done was called before the loss,
// after it or never: Done is closed, Check, IfHeld and Unlock say
// LockLost, a second Unlock Interrupted; and a lock released before the
// loss stays released.
func TestUnsharedLockSessionLoss(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	for _, d := range []string{"a", "b", "c", "r"} {
		_, err := c.Create(ctx, d+"/f", nil)
		require.NoError(t, err)
	}
	before, err := c.Lock(ctx, "a", "x")
	require.NoError(t, err)
	doneBefore := before.Done()
	after, err := c.Lock(ctx, "b", "x")
	require.NoError(t, err)
	never, err := c.TryLock(ctx, "c", "x")
	require.NoError(t, err)
	released, err := c.Lock(ctx, "r", "x")
	require.NoError(t, err)
	require.NoError(t, released.Unlock(ctx))

	c.ExpireSession()
	select {
	case <-doneBefore:
	default:
		t.Fatal("Done taken before the loss is not closed by it")
	}
	select {
	case <-after.Done():
	default:
		t.Fatal("Done taken after the loss is not closed")
	}
	for _, ld := range []topo.LockDescriptor{before, after, never} {
		requireCode(t, ld.Check(ctx), topo.LockLost)
		_, err := c.Txn(ctx, topo.IfHeld(ld), topo.UpdateOp("a/f", []byte("v"), nil))
		require.Error(t, err)
		requireCode(t, ld.Unlock(ctx), topo.LockLost)
		requireCode(t, ld.Unlock(ctx), topo.Interrupted)
	}
	requireCode(t, released.Check(ctx), topo.Interrupted)
	requireCode(t, released.Unlock(ctx), topo.Interrupted)
}

// TestUnsharedLockRaces: Done, Unlock, Check and the session's loss raced
// on uncontended locks: exactly one Unlock returns nil or LockLost (the
// others Interrupted), and Done, once taken, is closed once the lock is
// released or lost. Run with -race.
func TestUnsharedLockRaces(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	for i := range 300 {
		ld, err := c.Lock(ctx, "d", "x")
		require.NoError(t, err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firsts int
		var dones []<-chan struct{}
		for range 2 {
			wg.Go(func() {
				ch := ld.Done()
				mu.Lock()
				dones = append(dones, ch)
				mu.Unlock()
			})
			wg.Go(func() {
				err := ld.Unlock(ctx)
				if err == nil || topo.IsErrType(err, topo.LockLost) {
					mu.Lock()
					firsts++
					mu.Unlock()
					return
				}
				require.True(t, topo.IsErrType(err, topo.Interrupted), "%v", err)
			})
			wg.Go(func() { _ = ld.Check(ctx) })
		}
		if i%3 == 0 {
			wg.Go(c.ExpireSession)
		}
		wg.Wait()
		require.Equal(t, 1, firsts, "round %d: Unlocks that released", i)
		for _, ch := range dones {
			select {
			case <-ch:
			default:
				t.Fatalf("round %d: Done not closed after the lock was released", i)
			}
		}
	}
}
