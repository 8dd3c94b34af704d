package consultopo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// keyWatchSubs returns how many Watch calls share the Conn's query on
// key's file (0: none).
func (c *Conn) keyWatchSubs(p string) int {
	c.mu.Lock()
	kw := c.keyWatches[c.key(p)]
	c.mu.Unlock()
	if kw == nil {
		return 0
	}
	kw.mu.Lock()
	defer kw.mu.Unlock()
	return len(kw.subs)
}

// TestWatchesOfAFileShareAQuery runs several watches of one file on one
// Conn: they cost one blocking query, and each keeps its semantics (its
// first value, every change, cancellation ending it alone, NoNode on
// delete), also one started after a change.
func TestWatchesOfAFileShareAQuery(t *testing.T) {
	const n = 8
	c := newTestConn(t, testRoot(t))
	ctx := t.Context()
	v, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)

	var chans []<-chan *topo.WatchData
	var cancels []func()
	for range n {
		wctx, cancel := context.WithCancel(ctx)
		cur, ch, err := c.Watch(wctx, "f")
		require.NoError(t, err)
		require.Equal(t, "v0", string(cur.Contents))
		chans, cancels = append(chans, ch), append(cancels, cancel)
	}
	require.Equal(t, n, c.keyWatchSubs("f"))
	// One blocking query out for them all (none between two answers).
	require.Eventually(t, func() bool { held, _ := c.slots.usage(); return held == 1 }, waitFor, tick)

	// Cancelling one ends it alone.
	cancels[0]()
	for wd := range chans[0] {
		require.True(t, topo.IsErrType(wd.Err, topo.Interrupted), "%v", wd.Err)
	}
	require.Eventually(t, func() bool { return c.keyWatchSubs("f") == n-1 }, waitFor, tick)

	v, err = c.Update(ctx, "f", []byte("v1"), v)
	require.NoError(t, err)
	for i := 1; i < n; i++ {
		wd := <-chans[i]
		require.NoError(t, wd.Err)
		require.Equal(t, "v1", string(wd.Contents))
		require.Equal(t, v, wd.Version)
	}

	// A watch started after the change gets v1 first, then what follows.
	cur, late, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "v1", string(cur.Contents))
	_, err = c.Update(ctx, "f", []byte("v2"), v)
	require.NoError(t, err)
	for _, ch := range append(chans[1:], late) {
		wd := <-ch
		require.NoError(t, wd.Err)
		require.Equal(t, "v2", string(wd.Contents))
	}

	// A delete ends them all with NoNode, and the shared query with them.
	require.NoError(t, c.Delete(ctx, "f", nil))
	for _, ch := range append(chans[1:], late) {
		wd := <-ch
		require.True(t, topo.IsErrType(wd.Err, topo.NoNode), "%v", wd.Err)
		_, open := <-ch
		require.False(t, open)
	}
	require.Eventually(t, func() bool { return c.keyWatchSubs("f") == 0 }, waitFor, tick)
	require.Eventually(t, func() bool { held, _ := c.slots.usage(); return held == 0 }, waitFor, tick)
	for _, cancel := range cancels {
		cancel()
	}
}
