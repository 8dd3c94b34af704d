package memorytopo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestWatchGoroutinesReleased starts many watches, ends them by every
// route (delete, cancel, Close) and checks that their goroutines exit.
func TestWatchGoroutinesReleased(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	other, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	defer other.Close()

	const n = 20
	var drained []<-chan struct{}
	drain := func(ch <-chan *topo.WatchData) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range ch {
			}
		}()
		drained = append(drained, done)
	}
	drainRec := func(ch <-chan *topo.WatchDataRecursive) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range ch {
			}
		}()
		drained = append(drained, done)
	}
	cancels := make([]context.CancelFunc, 0, n)
	for i := range n {
		p := fmt.Sprintf("w/%d", i)
		_, err := c.Create(ctx, p, nil)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		_, ch, err := c.Watch(wctx, p)
		require.NoError(t, err)
		drain(ch)
		_, rch, err := c.WatchRecursive(wctx, "w/")
		require.NoError(t, err)
		drainRec(rch)
		// Watches on another Conn, ended by deletes and cancels.
		_, och, err := other.Watch(ctx, p)
		require.NoError(t, err)
		drain(och)
	}
	for i := range n {
		_, err := c.Update(ctx, fmt.Sprintf("w/%d", i), []byte("x"), nil)
		require.NoError(t, err)
	}
	for i := range n / 2 {
		cancels[i]()
	}
	for i := range n {
		require.NoError(t, other.Delete(ctx, fmt.Sprintf("w/%d", i), nil))
	}
	c.Close()
	for _, cancel := range cancels {
		cancel()
	}
	for _, d := range drained {
		<-d
	}
}

func TestWatchEvents(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "f", []byte("1"))
	require.NoError(t, err)
	cur, ch, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "1", string(cur.Contents))

	v, err := c.Update(ctx, "f", []byte("2"), nil)
	require.NoError(t, err)
	var last *topo.WatchData
	for last == nil || string(last.Contents) != "2" {
		last = <-ch
		require.NoError(t, last.Err)
	}
	require.Equal(t, v, last.Version)
	require.NoError(t, c.Delete(ctx, "f", nil))
	wd := <-ch
	requireCode(t, wd.Err, topo.NoNode)
	_, ok := <-ch
	require.False(t, ok)

	// A lock entry is not a file to watch.
	_, err = c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	_, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	es, err := c.ListDir(ctx, "d/locks", false)
	require.NoError(t, err)
	_, _, err = c.Watch(ctx, "d/locks/"+es[0].Name)
	requireCode(t, err, topo.NoNode)
}

// TestWatchRecursiveFlushesOnCancel checks that a cancelled WatchRecursive
// still reports every change made before the cancel, then Interrupted.
func TestWatchRecursiveFlushesOnCancel(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	wctx, cancel := context.WithCancel(ctx)
	initial, ch, err := c.WatchRecursive(wctx, "p/")
	require.NoError(t, err)
	require.Empty(t, initial)
	const n = 50
	for i := range n {
		_, err := c.Update(ctx, fmt.Sprintf("p/%d", i%5), fmt.Appendf(nil, "%d", i), nil)
		require.NoError(t, err)
	}
	_, err = c.Create(ctx, "q/not-watched", nil)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "p/0", nil))
	cancel()

	latest := map[string]*topo.WatchDataRecursive{}
	var final *topo.WatchDataRecursive
	for ev := range ch {
		if topo.IsErrType(ev.Err, topo.Interrupted) {
			final = ev
			continue
		}
		require.Nil(t, final, "no event after Interrupted")
		latest[ev.Path] = ev
	}
	require.NotNil(t, final)
	require.Len(t, latest, 5)
	requireCode(t, latest["p/0"].Err, topo.NoNode)
	for i := 1; i < 5; i++ {
		require.Equal(t, fmt.Sprint(n-5+i), string(latest[fmt.Sprintf("p/%d", i)].Contents))
	}
}

func TestWatchRecursiveSkipsLocks(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	initial, ch, err := c.WatchRecursive(wctx, "")
	require.NoError(t, err)
	require.Len(t, initial, 1)
	ld, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
	_, err = c.Update(ctx, "d/f", []byte("y"), nil)
	require.NoError(t, err)
	ev := <-ch
	require.Equal(t, "d/f", ev.Path, "lock entries are not reported")
	require.Equal(t, "y", string(ev.Contents))
	cancel()
	for range ch {
	}
}

// TestBreakWatches checks that BreakWatches ends active watches with the
// given error after their pending events, and leaves later watches alone.
func TestBreakWatches(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "w/f", []byte("1"))
	require.NoError(t, err)
	_, ch, err := c.Watch(ctx, "w/f")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "w/")
	require.NoError(t, err)
	_, err = c.Update(ctx, "w/f", []byte("2"), nil)
	require.NoError(t, err)

	require.Equal(t, 2, f.BreakWatches(topo.Unavailable))

	var last *topo.WatchData
	for wd := range ch {
		if wd.Err == nil {
			require.Equal(t, "2", string(wd.Contents))
		}
		last = wd
	}
	requireCode(t, last.Err, topo.Unavailable)
	var lastRec *topo.WatchDataRecursive
	for wd := range rch {
		if wd.Err == nil {
			require.Equal(t, "2", string(wd.Contents))
		}
		lastRec = wd
	}
	requireCode(t, lastRec.Err, topo.Unavailable)

	// Watching again works, and a later break spares nothing else.
	wctx, cancel := context.WithCancel(ctx)
	cur, ch, err := c.Watch(wctx, "w/f")
	require.NoError(t, err)
	require.Equal(t, "2", string(cur.Contents))
	cancel()
	for wd := range ch {
		last = wd
	}
	requireCode(t, last.Err, topo.Interrupted)
	require.Equal(t, 0, f.BreakWatches(nil))
}
