package consultopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestWatchAcrossIndexReuse: a dev agent restarts empty while a Watch and
// a WatchRecursive are cut off from it (a proxy holds their queries), and
// the watched file is written again, with other contents, at the very
// indexes it had before (CreateIndex and ModifyIndex: the new agent's
// indexes start over). When the watches' queries get through, the Watch
// must end with NoNode (its file was lost with the agent's state, as
// when the agent comes back without it) and the WatchRecursive must
// report the new contents: neither may keep running on the old value.
// Aligning the indexes needs the agent to write nothing of its own
// meanwhile; an attempt where it did is tried again.
func TestWatchAcrossIndexReuse(t *testing.T) {
	acrossIndexReuse(t, watchAcrossIndexReuse)
}

// acrossIndexReuse runs attempt, a scenario that needs a restarted
// agent's indexes to land where the old ones were, on a fresh agent: up
// to three times, until an attempt reports that they did (and so it
// checked), which the agent's own writes can prevent.
func acrossIndexReuse(t *testing.T, attempt func(t *testing.T, a *consultest.Agent, n int) bool) {
	a := consultest.StartAgent(t)
	for n := range 3 {
		if attempt(t, a, n) {
			return
		}
	}
	t.Fatal("the agent's own writes moved the index in every attempt")
}

// watchAcrossIndexReuse runs one attempt of TestWatchAcrossIndexReuse and
// reports whether the file landed at its old indexes (then it checked).
func watchAcrossIndexReuse(t *testing.T, a *consultest.Agent, attempt int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := fmt.Sprintf("reuse%d", attempt)
	open := func(addr string) *Conn {
		opts := testOptions()
		opts.Address = addr
		c, err := NewConn(opts, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	index := func(v topo.Version) int64 { return int64(v.(topo.NumericVersion)) }
	c := open(a.Addr())
	// Past the agent's start-up writes, which a restart repeats.
	for i := range 20 {
		_, err := c.Create(ctx, fmt.Sprintf("pad/%d", i), []byte("x"))
		require.NoError(t, err)
	}
	v, err := c.Create(ctx, "w/f", []byte("before"))
	require.NoError(t, err)
	target := index(v)
	px, err := faultproxy.New(a.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	w := open(px.Addr())
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	_, changes, err := w.Watch(wctx, "w/f")
	require.NoError(t, err)
	_, events, err := w.WatchRecursive(wctx, "w/")
	require.NoError(t, err)

	px.Blackhole()
	a.Restart(t)
	c = open(a.Addr())
	for i := 0; ; i++ {
		v, err = c.Create(ctx, fmt.Sprintf("pad/%d", i), []byte("x"))
		require.NoError(t, err)
		if index(v) >= target-1 {
			break
		}
	}
	if index(v) != target-1 {
		t.Logf("attempt %d: the agent wrote at %d", attempt, target-1)
		return false
	}
	v, err = c.Create(ctx, "w/f", []byte("after"))
	require.NoError(t, err)
	if index(v) != target {
		t.Logf("attempt %d: the agent wrote at %d", attempt, target)
		return false
	}
	px.Heal()

	select {
	case wd := <-changes:
		require.Error(t, wd.Err, "the Watch sent %q, a change of the file it watched, for another file", wd.Contents)
		requireCode(t, wd.Err, topo.NoNode)
		_, ok := <-changes
		require.False(t, ok, "the Watch's channel closes after NoNode")
	case <-time.After(waitFor):
		t.Fatal("the Watch still runs on the lost file's value")
	}
	deadline := time.After(waitFor)
	for {
		select {
		case wd := <-events:
			require.Equal(t, "w/f", wd.Path)
			if wd.Err != nil {
				requireCode(t, wd.Err, topo.NoNode)
				continue
			}
			require.Equal(t, "after", string(wd.Contents))
			return true
		case <-deadline:
			t.Fatal("the WatchRecursive still holds the lost file's value")
		}
	}
}
