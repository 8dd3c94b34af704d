package consultopo

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/stacks"
	"github.com/topokit/topokit/topo"
)

// sendBlocked reports whether a goroutine of fn (a watch's, named by its
// function) is blocked sending an event to a full channel.
func sendBlocked(fn string) bool {
	for _, g := range stacks.All() {
		if strings.Contains(g, "[select") && strings.Contains(g, "backendkit.Send") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

// TestWatchInterruptedAfterBlockedSend: a watch whose context ends while
// it waits to send a value to a reader that does not read still ends with
// Interrupted once the reader drains the channel (the events before it,
// then Interrupted, then the channel closes), as when the context ends
// during a query. The watch goroutine is seen blocked in its send (a
// goroutine dump, polled) before the cancel, so it is the failed send
// that ends the loop.
func TestWatchInterruptedAfterBlockedSend(t *testing.T) {
	ctx := t.Context()
	c := newTestConn(t, testRoot(t))

	t.Run("Watch", func(t *testing.T) {
		_, err := c.Create(ctx, "w/f", []byte("one"))
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, ch, err := c.Watch(wctx, "w/f")
		require.NoError(t, err)
		_, err = c.Update(ctx, "w/f", []byte("two"), nil)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(ch) == cap(ch) }, waitFor, tick, "the first change fills the channel")
		_, err = c.Update(ctx, "w/f", []byte("three"), nil)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return sendBlocked("(*Conn).Watch.func") }, waitFor, tick, "the watch waits to send the second change")
		cancel()

		wd := <-ch
		require.NoError(t, wd.Err)
		require.Equal(t, "two", string(wd.Contents))
		wd, ok := <-ch
		require.True(t, ok, "the channel closed without Interrupted")
		requireCode(t, wd.Err, topo.Interrupted)
		_, ok = <-ch
		require.False(t, ok, "the channel stays open after Interrupted")
	})

	t.Run("WatchRecursive", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, ch, err := c.WatchRecursive(wctx, "r/")
		require.NoError(t, err)
		// One transaction: one answer with more differences than the
		// channel holds.
		var ops []topo.TxnOp
		for i := range cap(ch) + 2 {
			ops = append(ops, topo.CreateOp("r/f"+strconv.Itoa(10+i), []byte("v")))
		}
		_, err = c.Txn(ctx, ops...)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(ch) == cap(ch) && sendBlocked("(*Conn).WatchRecursive.func") }, waitFor, tick, "the watch waits to send a change")
		cancel()

		for i := range cap(ch) {
			wd, ok := <-ch
			require.True(t, ok)
			require.NoError(t, wd.Err)
			require.Equal(t, "r/f"+strconv.Itoa(10+i), wd.Path)
		}
		wd, ok := <-ch
		require.True(t, ok, "the channel closed without Interrupted")
		requireCode(t, wd.Err, topo.Interrupted)
		_, ok = <-ch
		require.False(t, ok, "the channel stays open after Interrupted")
	})
}
