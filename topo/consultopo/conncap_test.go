package consultopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// TestWatchesLeaveRoomUnderConnCap runs more watches on one Conn than its
// agent allows connections per client address: the Conn's bound on
// blocking queries keeps a plain Update and a Lock of the same Conn from
// being refused (429, ResourceExhausted), and the watches queued for a
// slot still deliver the change once they get one.
func TestWatchesLeaveRoomUnderConnCap(t *testing.T) {
	const connCap, bound, files, recursive = 30, 20, 35, 5
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{MaxConnsPerClient: connCap})
	opts := testOptions()
	opts.Address, opts.MaxBlockingQueries = a.Addr(), bound
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := t.Context()

	// A file per watch: the watches of one file share a query.
	var versions []topo.Version
	for i := range files {
		v, err := c.Create(ctx, fmt.Sprintf("d/f%d", i), []byte("v0"))
		require.NoError(t, err)
		versions = append(versions, v)
	}
	var chans []<-chan *topo.WatchData
	for i := range files {
		cur, ch, err := c.Watch(ctx, fmt.Sprintf("d/f%d", i))
		require.NoError(t, err)
		require.Equal(t, "v0", string(cur.Contents))
		chans = append(chans, ch)
	}
	var rchans []<-chan *topo.WatchDataRecursive
	for range recursive {
		_, ch, err := c.WatchRecursive(ctx, "d")
		require.NoError(t, err)
		rchans = append(rchans, ch)
	}
	// Poll until the bound's worth of blocking queries is out.
	require.Eventually(t, func() bool { held, _ := c.slots.usage(); return held >= bound }, waitFor, tick)

	for i, v := range versions {
		_, err := c.Update(ctx, fmt.Sprintf("d/f%d", i), []byte("v1"), v)
		require.NoError(t, err, "a plain Update past the blocking queries")
	}
	l, err := c.Lock(ctx, "d", "conncap")
	require.NoError(t, err, "a Lock past the blocking queries")
	require.NoError(t, l.Unlock(ctx))

	for i, ch := range chans {
		wd := <-ch
		require.NotNil(t, wd, "watch %d closed", i)
		require.NoError(t, wd.Err, "watch %d", i)
		require.Equal(t, "v1", string(wd.Contents), "watch %d", i)
	}
	for i, ch := range rchans {
		changed := map[string]bool{}
		for len(changed) < files {
			wd := <-ch
			require.NotNil(t, wd, "recursive watch %d closed", i)
			require.NoError(t, wd.Err, "recursive watch %d", i)
			require.Equal(t, "v1", string(wd.Contents), "recursive watch %d: %s", i, wd.Path)
			changed[wd.Path] = true
		}
	}
	held, waiting := c.slots.usage()
	require.LessOrEqual(t, held, bound)
	t.Logf("after the change: %d blocking queries out, %d waiting", held, waiting)
}

// TestQuerySlotsOrder checks the bound's semaphore: slots go to waiters
// by priority, in the order they asked within one, and a waiter whose
// context ends holds nothing.
func TestQuerySlotsOrder(t *testing.T) {
	bg := context.Background()
	s := newQuerySlots(1, 0)
	require.NoError(t, s.acquire(bg, prioWatch))
	cctx, cancel := context.WithCancel(bg)
	gave := make(chan int, 3)
	cancelled := make(chan error, 1)
	go func() { cancelled <- s.acquire(cctx, prioWatch) }()
	waitWaiting(t, s, 1)
	for i, p := range []uint64{prioWatch, prioWatch, 7} {
		go func() {
			if s.acquire(bg, p) == nil {
				gave <- i
			}
		}()
		waitWaiting(t, s, i+2)
	}
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)
	var order []int
	for range 3 {
		s.release()
		order = append(order, <-gave)
	}
	require.Equal(t, []int{2, 0, 1}, order)
	s.release()
	held, waiting := s.usage()
	require.Equal(t, [2]int{0, 0}, [2]int{held, waiting})

	// No bound: never waits.
	u := newQuerySlots(-1, 1)
	for range 1000 {
		require.NoError(t, u.acquire(bg, prioWatch))
	}
}

// TestQuerySlotsReserve: the claim bound's last free slot goes to a
// head's wait for the key alone, also past waiters that asked first.
func TestQuerySlotsReserve(t *testing.T) {
	bg := context.Background()
	s := claimSlotsFor(3) // two slots, one kept
	require.NoError(t, s.acquire(bg, 5))
	gave := make(chan uint64, 2)
	for _, p := range []uint64{6, prioAcquire} {
		go func() {
			if s.acquire(bg, p) == nil {
				gave <- p
			}
		}()
		if p == 6 {
			waitWaiting(t, s, 1)
		}
	}
	require.Equal(t, uint64(prioAcquire), <-gave) // the waiter of 6 still waits
	s.release()                                   // the query of 5's: the one free slot is still kept
	waitWaiting(t, s, 1)
	s.release() // the acquire's
	require.Equal(t, uint64(6), <-gave)
}

// waitWaiting polls until s has n waiters.
func waitWaiting(t *testing.T, s *querySlots, n int) {
	require.Eventually(t, func() bool { _, w := s.usage(); return w == n }, waitFor, tick)
}

// TestClaimsTakeNoSlot: with every slot of the Conn's bound held by idle
// watches (whose queries would not answer for WatchPollDuration, here far
// beyond the test's deadline), a Lock waiting on the same Conn still gets
// its handover, and a second one after it: a claim's own blocking queries
// (the wait for the predecessor and the key, the watch of the held key)
// take no slot of the watches' bound.
func TestClaimsTakeNoSlot(t *testing.T) {
	const bound = 2
	opts := testOptions()
	opts.MaxBlockingQueries, opts.WatchPollDuration = bound, 10*time.Minute
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	for i := range bound {
		p := fmt.Sprintf("d/f%d", i)
		_, err := c.Create(ctx, p, []byte("v0"))
		require.NoError(t, err)
		_, _, err = c.Watch(ctx, p)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { held, _ := c.slots.usage(); return held >= bound }, waitFor, tick)

	first, err := c.Lock(ctx, "d", "first")
	require.NoError(t, err)
	got := make(chan error, 2)
	for i := range 2 {
		go func() {
			l, err := c.Lock(ctx, "d", fmt.Sprint("waiter", i))
			if err == nil {
				err = l.Unlock(ctx)
			}
			got <- err
		}()
	}
	waitQueued(t, c, c.key("d/"+lockName), 2)
	require.NoError(t, first.Unlock(ctx))
	for range 2 {
		require.NoError(t, <-got, "a handover waited for a slot held by idle watches")
	}
	_, waiting := c.slots.usage()
	require.Zero(t, waiting, "no claim query queued for a slot")
}
