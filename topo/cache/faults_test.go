package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestResyncLosesNothing: the store breaks the Cache's watch again and
// again while another Conn writes; the Cache lists again each time, and a
// local recursive watcher sees every file's last value, never a version
// twice, and memory ends equal to the store.
func TestResyncLosesNothing(t *testing.T) {
	ctx := testCtx(t)
	f, open := memoryStore(t)
	var resyncs atomic.Int64
	c := wrap(t, open(), cache.Options{Hooks: cache.Hooks{OnResync: func(error) { resyncs.Add(1) }}})
	defer c.Close()
	_, ch, err := c.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	w := open()
	defer w.Close()
	const files, rounds = 5, 40
	for i := range rounds {
		for j := range files {
			_, err := w.Update(ctx, fmt.Sprintf("r/f%d", j), fmt.Appendf(nil, "v%d", i), nil)
			require.NoError(t, err)
		}
		if i%2 == 1 {
			require.NoError(t, w.Delete(ctx, "r/f0", nil))
		}
		if i%5 == 0 {
			f.BreakWatches(nil)
		}
	}
	want, err := w.List(ctx, "r/")
	require.NoError(t, err)
	requireWatcherConverges(t, ctx, ch, want)
	require.Positive(t, resyncs.Load())
	got, err := c.List(ctx, "r/")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, cache.Healthy, c.State().Health)
}

// TestStaleThenStoreError: while the store fails, the Cache answers from
// memory marked stale, State says Stale; after MaxStaleness reads return
// the store's error; when the store is back the Cache is Healthy and
// current again.
func TestStaleThenStoreError(t *testing.T) {
	ctx := testCtx(t)
	f, open := memoryStore(t)
	raw := open()
	defer raw.Close()
	_, err := raw.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	const maxStale = 300 * time.Millisecond
	c := wrap(t, open(), cache.Options{MaxStaleness: maxStale, ProbeInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond})
	defer c.Close()
	requireGet(t, ctx, c, "f", "one", true)

	f.SetError(topo.Unavailable)
	f.BreakWatches(nil)
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
	st := c.State()
	require.Error(t, st.Err)
	b, _, info, err := c.GetWithInfo(ctx, "f")
	if err == nil { // unless MaxStaleness already passed on a loaded machine
		require.Equal(t, "one", string(b))
		require.True(t, info.Stale && info.FromMemory)
	}
	require.Eventually(t, func() bool {
		_, _, err := c.Get(ctx, "f")
		return topo.IsErrType(err, topo.Unavailable)
	}, 30*time.Second, time.Millisecond, "after MaxStaleness a read returns the store's error")

	f.SetError(nil)
	_, err = raw.Update(ctx, "f", []byte("two"), nil)
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "two")
	require.Equal(t, cache.Healthy, c.State().Health)
}

// TestSlowWatcherDropped: 100,000 changes (four writers, each sending
// transactions of 64 updates) while one local recursive watcher reads
// nothing: it is dropped with ErrSlowWatcher, and a watcher that reads
// keeps up and ends on every file's last value, on memorytopo, etcd,
// ZooKeeper and Consul. The two watchers are on two Caches of the store so
// that the slow one's buffer (16 events) is less than the changes every
// store watch must deliver however much it coalesces (every file ends on
// another value), and the reading one's (65,536) so large that no pause
// of its reader on a loaded machine gets it dropped.
func TestSlowWatcherDropped(t *testing.T) {
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); requireSlowWatcherDropped(t, open) })
	t.Run("etcd", func(t *testing.T) { requireSlowWatcherDropped(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
	t.Run("zk", func(t *testing.T) { requireSlowWatcherDropped(t, zkOpen(t, zktest.Start(t), newRoot(), false)) })
	t.Run("consul", func(t *testing.T) { requireSlowWatcherDropped(t, consulOpen(t, consultest.Start(t), newRoot())) })
}

func requireSlowWatcherDropped(t *testing.T, open func() topo.Conn) {
	// 100,000 writes to a real store take a while on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	raw := open()
	defer raw.Close()
	// At most 64 writes per transaction on every backend (Consul's limit).
	const writers, files = 4, 64
	const rounds = 100_000/(writers*files) + 1
	final := fmt.Sprint(rounds - 1)
	batch := func(w, round int) []topo.TxnOp {
		ops := make([]topo.TxnOp, files)
		for j := range ops {
			ops[j] = topo.UpdateOp(fmt.Sprintf("s/w%d/f%02d", w, j), fmt.Append(nil, round), nil)
		}
		return ops
	}
	for w := range writers {
		_, err := raw.Txn(ctx, batch(w, -1)...)
		require.NoError(t, err)
	}
	slowCache := wrap(t, open(), cache.Options{WatcherBuffer: 16})
	defer slowCache.Close()
	_, slow, err := slowCache.WatchRecursive(ctx, "s/")
	require.NoError(t, err)
	go func() {
		// Once the slow watcher is dropped (its last event stays in its
		// channel), its Cache's store watch is only load: stop it.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for slowCache.State().Watchers > 0 && ctx.Err() == nil {
			<-tick.C
		}
		slowCache.Close()
	}()
	c := wrap(t, open(), cache.Options{WatcherBuffer: 1 << 16})
	defer c.Close()
	_, fast, err := c.WatchRecursive(ctx, "s/")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		last := map[string]string{}
		atFinal := 0
		for wd := range fast {
			if wd.Err != nil {
				done <- wd.Err
				return
			}
			v := string(wd.Contents)
			if last[wd.Path] == final {
				atFinal--
			}
			if last[wd.Path] = v; v == final {
				atFinal++
			}
			if atFinal == writers*files {
				done <- nil
				return
			}
		}
		done <- errors.New("closed")
	}()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range rounds {
				if _, err := raw.Txn(ctx, batch(w, i)...); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		require.NoError(t, <-errs)
	}
	require.NoError(t, <-done, "the reading watcher")
	var last *topo.WatchDataRecursive
	for wd := range slow {
		last = wd
	}
	require.NotNil(t, last)
	require.True(t, errors.Is(last.Err, cache.ErrSlowWatcher), "the slow watcher's last event: %v", last.Err)
	require.True(t, topo.IsErrType(last.Err, topo.ResourceExhausted))
}

// TestLocalWatchersShareOneStoreWatch: 1,000 local watchers cost no store
// watch beyond the Cache's one, and each gets the initial value and then
// every change, in order.
func TestLocalWatchersShareOneStoreWatch(t *testing.T) {
	ctx := testCtx(t)
	f, open := memoryStore(t)
	c := wrap(t, open(), cache.Options{})
	defer c.Close()
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "x")
	before := f.CallCount(memorytopo.OpWatch) + f.CallCount(memorytopo.OpWatchRecursive)
	var chans []<-chan *topo.WatchData
	for range 1000 {
		cur, ch, err := c.Watch(ctx, "f")
		require.NoError(t, err)
		require.Equal(t, "x", string(cur.Contents))
		chans = append(chans, ch)
	}
	require.Equal(t, 1000, c.State().Watchers)
	require.Equal(t, before, f.CallCount(memorytopo.OpWatch)+f.CallCount(memorytopo.OpWatchRecursive))
	want := []string{"a", "b", "c"}
	for _, v := range want {
		_, err := c.Update(ctx, "f", []byte(v), nil)
		require.NoError(t, err)
	}
	// The store watch may coalesce changes of a file; every local watcher
	// gets exactly what it delivered: the same values, in write order,
	// ending on the last.
	var first []string
	for i, ch := range chans {
		var got []string
		for len(got) == 0 || got[len(got)-1] != "c" {
			wd := <-ch
			require.NoError(t, wd.Err, "watcher %d", i)
			got = append(got, string(wd.Contents))
		}
		if i == 0 {
			first = got
			require.Subset(t, want, got)
			require.IsIncreasing(t, got)
		}
		require.Equal(t, first, got, "watcher %d", i)
	}
}

// TestOverLimitBypasses: a subtree beyond MaxBytes turns the Cache into a
// pass-through that still answers correctly; its local watchers end with
// ErrOverLimit and State says OverLimit.
func TestOverLimitBypasses(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	c := wrap(t, open(), cache.Options{MaxBytes: 100})
	defer c.Close()
	_, err := c.Create(ctx, "small", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "small", "x")
	_, ch, err := c.Watch(ctx, "small")
	require.NoError(t, err)
	_, err = c.Create(ctx, "big", make([]byte, 200))
	require.NoError(t, err)
	var last *topo.WatchData
	for wd := range ch {
		last = wd
	}
	require.True(t, errors.Is(last.Err, cache.ErrOverLimit), "%v", last.Err)
	require.Equal(t, cache.OverLimit, c.State().Health)
	requireGet(t, ctx, c, "small", "x", false)
}

// TestOverLimitAtStart: a subtree already beyond MaxBytes when the Cache
// starts gives a Cache that is OverLimit from the start and serves every
// call, local watches too, from the store.
func TestOverLimitAtStart(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	raw := open()
	defer raw.Close()
	_, err := raw.Create(ctx, "big", make([]byte, 200))
	require.NoError(t, err)
	c := wrap(t, open(), cache.Options{MaxBytes: 100})
	defer c.Close()
	st := c.State()
	require.Equal(t, cache.OverLimit, st.Health)
	require.True(t, errors.Is(st.Err, cache.ErrOverLimit), "%v", st.Err)
	require.Zero(t, st.Bytes)
	_, _, info, err := c.GetWithInfo(ctx, "big")
	require.NoError(t, err)
	require.False(t, info.FromMemory)
	_, ch, err := c.Watch(ctx, "big")
	require.NoError(t, err)
	require.Zero(t, c.State().Watchers, "a local watcher of a Cache over its limit")
	_, err = raw.Update(ctx, "big", []byte("small"), nil)
	require.NoError(t, err)
	wd := <-ch
	require.NoError(t, wd.Err)
	require.Equal(t, "small", string(wd.Contents))
}

// TestStateErrNamesTheFailure: while the store answers reads (the probe
// finds no file, a definite answer) but the watch cannot be started
// again, State().Err is the failure that keeps the Cache from Healthy,
// never the probe's NoNode.
func TestStateErrNamesTheFailure(t *testing.T) {
	ctx := testCtx(t)
	f, open := memoryStore(t)
	c := wrap(t, open(), cache.Options{ProbeInterval: 5 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	defer c.Close()
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "x")
	defer f.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive})()
	f.BreakWatches(nil)
	// The Cache moves between Stale (a new watch failed) and Resyncing
	// (a probe answered); wait for the latter.
	var st cache.State
	require.Eventually(t, func() bool {
		st = c.State()
		return st.Health == cache.Resyncing || topo.IsErrType(st.Err, topo.NoNode)
	}, 30*time.Second, time.Millisecond)
	require.Error(t, st.Err)
	require.Falsef(t, topo.IsErrType(st.Err, topo.NoNode), "State().Err while %v: %v", st.Health, st.Err)
}

// TestNoPendingWritesWithoutWatch: a Cache that no longer watches (over
// its limit, or closed with LeaveConnOpen) passes every call to the store,
// and keeps nothing of the writes made through it: before, each write's
// mark waited for a watch that would never deliver it, so a long-lived
// Cache over its limit grew with every write. On etcd.
func TestNoPendingWritesWithoutWatch(t *testing.T) {
	ctx := testCtx(t)
	open := etcdOpen(t, etcdtest.Start(t), newRoot())
	raw := open()
	defer raw.Close()
	_, err := raw.Create(ctx, "big", make([]byte, 200))
	require.NoError(t, err)
	writes := func(c *cache.Cache) {
		t.Helper()
		v, err := c.Create(ctx, "f", []byte("0"))
		require.NoError(t, err)
		for i := range 20 {
			v, err = c.Update(ctx, "f", []byte{byte('1' + i)}, v)
			require.NoError(t, err)
		}
		_, err = c.Txn(ctx, topo.CreateOp("g", []byte("g")), topo.UpdateOp("f", []byte("txn"), v))
		require.NoError(t, err)
		require.NoError(t, c.Delete(ctx, "f", nil))
		require.NoError(t, c.Delete(ctx, "g", nil))
	}

	over := wrap(t, open(), cache.Options{MaxBytes: 100})
	defer over.Close()
	require.Equal(t, cache.OverLimit, over.State().Health)
	writes(over)
	require.Zero(t, cache.PendingWrites(over), "writes waited for by a Cache over its limit")

	closed := wrap(t, raw, cache.Options{LeaveConnOpen: true})
	closed.Close()
	writes(closed)
	require.Zero(t, cache.PendingWrites(closed), "writes waited for by a closed Cache")
}
