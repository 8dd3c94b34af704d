package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestEmbedderOutage uses a Cache as an embedder swapping its Conn for
// one would, on etcd, ZooKeeper and Consul: its own writes read back at
// once, another Conn's write seen by a Consistent read at once, bad input
// refused with InvalidPath and nothing written; then, with the Cache's
// Conn cut from the store, stale answers (with their age) until
// MaxStaleness, then the store's error; after the cut heals, the writes
// made meanwhile reach memory and a local watcher, which sees no change
// twice and none out of order.
func TestEmbedderOutage(t *testing.T) {
	onRealStores(t, true, requireEmbedderOutage)
}

func requireEmbedderOutage(t *testing.T, addr string, open func(addr string) topo.Conn) {
	ctx := testCtx(t)
	other := open(addr)
	defer other.Close()
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	const maxStale = 3 * time.Second
	c, err := cache.New(open(p.Addr()), "", cache.Options{MaxStaleness: maxStale,
		ProbeInterval: 50 * time.Millisecond, RetryInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()

	// Reads of the Cache's own writes, and Consistent reads of another's.
	_, err = c.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	b, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "one", string(b))
	_, err = other.Create(ctx, "g", []byte("g"))
	require.NoError(t, err)
	b, _, err = c.Get(cache.WithMode(ctx, cache.Consistent), "g")
	require.NoError(t, err, "a Consistent read must see a write completed before it")
	require.Equal(t, "g", string(b))
	_, err = c.Create(ctx, "bad/", []byte("x"))
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	_, _, err = c.Get(ctx, "")
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	waitHolds(t, ctx, c, "g", "g")

	init, events, err := c.WatchRecursive(ctx, "")
	require.NoError(t, err)
	require.Len(t, init, 2)

	// The cut: stale answers, then the store's error.
	p.Blackhole()
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
	st := c.State()
	require.Error(t, st.Err)
	require.False(t, st.Since.IsZero())
	_, err = other.Update(ctx, "f", []byte("two"), nil)
	require.NoError(t, err)
	_, err = other.Create(ctx, "h", []byte("h"))
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if b, _, info, err := c.GetWithInfo(rctx, "f"); err == nil { // unless MaxStaleness passed on a loaded machine
		require.Equal(t, "one", string(b))
		require.True(t, info.FromMemory && info.Stale)
		require.False(t, info.Confirmed.After(time.Now()))
	}
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, _, info, err := c.GetWithInfo(rctx, "f")
		return err != nil && !info.FromMemory
	}, 30*time.Second, time.Millisecond, "after MaxStaleness a read returns the store's error")

	// Healed: the writes made meanwhile arrive, each once, in order.
	p.Heal()
	waitHolds(t, ctx, c, "f", "two")
	waitHolds(t, ctx, c, "h", "h")
	require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	seen := map[string][]string{}
	for len(seen["f"]) == 0 || len(seen["h"]) == 0 {
		select {
		case ev := <-events:
			require.NoError(t, ev.Err, "the local watcher must survive the outage")
			seen[ev.Path] = append(seen[ev.Path], string(ev.Contents))
		case <-ctx.Done():
			t.Fatalf("the local watcher never saw the writes made during the outage: %v", seen)
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("an event beyond the outage's writes: %q %q %v", ev.Path, ev.Contents, ev.Err)
	default:
	}
	require.Equal(t, map[string][]string{"f": {"two"}, "h": {"h"}}, seen)

	c.Close()
	c.Close()
	_, _, err = c.Get(ctx, "f")
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
	_, err = c.Create(ctx, "k", nil)
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
}
