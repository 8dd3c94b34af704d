package test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testWatchCancelPending: a Watch and a WatchRecursive whose reader reads
// nothing while their files change many times, then cancels: each channel
// sends Interrupted last and closes, and the goroutines the watches
// started end: the count (but for clients' pools: idle HTTP connections
// and zk2topo workers) comes back to within 2 of what it was after a
// first such round (which starts what a Conn keeps: etcd's watch stream),
// after three rounds more.
func testWatchCancelPending(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, w := s.conn(), s.conn()
	const files = 10
	mustCreate(t, ctx, w, "p/f", "0")
	for i := range files {
		mustCreate(t, ctx, w, fmt.Sprintf("p/g%d", i), "0")
	}
	// A Cache (topo/cache's suite) watches the cell for its life: once
	// its local WatchRecursive lists every file, its store watch has
	// started watching them all.
	for _, conn := range []topo.Conn{c, w} {
		require.True(t, eventually(func() bool {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			init, ch, err := conn.WatchRecursive(wctx, "p/")
			require.NoError(t, err)
			cancel()
			for range ch {
			}
			return len(init) == files+1
		}), "WatchRecursive(p/) lists every file")
	}
	round := func(r int) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, ch, err := c.Watch(wctx, "p/f")
		require.NoError(t, err)
		_, rch, err := c.WatchRecursive(wctx, "p/")
		require.NoError(t, err)
		for i := range 50 {
			mustUpdate(t, ctx, w, "p/f", fmt.Sprintf("%d-%d", r, i), nil)
			mustUpdate(t, ctx, w, fmt.Sprintf("p/g%d", i%files), fmt.Sprintf("%d-%d", r, i), nil)
		}
		cancel()
		var last error
		for wd := range ch {
			last = wd.Err
		}
		requireCode(t, last, topo.Interrupted, "the last event of a Watch cancelled with events pending")
		last = nil
		for wd := range rch {
			if wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode) {
				last = wd.Err
			}
		}
		requireCode(t, last, topo.Interrupted, "the last event of a WatchRecursive cancelled with events pending")
	}
	round(0)
	before, _ := watchGoroutines()
	// Three rounds, and a slack of 2 goroutines: a store watch that lives
	// beside the test (a Cache's, in topo/cache's suite) may hold a
	// goroutine or two more at one moment than at another, while a leak of
	// one goroutine per watch leaves 6 more.
	const rounds, slack = 3, 2
	for r := range rounds {
		round(1 + r)
	}
	// A plain poll: the goroutines of the ended watches exit on their own.
	deadline := time.Now().Add(longWait)
	n, stacks := watchGoroutines()
	for n > before+slack && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n, stacks = watchGoroutines()
	}
	require.LessOrEqualf(t, n, before+slack, "goroutines before the watches (%d, with a slack of %d), after they ended:\n%s", before, slack, stacks)
}

// pooled are goroutines that clients keep in pools of their own, as many
// as the load asked for: an idle HTTP connection (Consul), an idle
// zk2topo worker; and zk2topo's forwarders of one-shot ZooKeeper watches,
// one per znode watched, which a live recursive watch beside the test (a
// Cache's, in topo/cache's suite) sets again after each event, so that
// their number at one moment varies (a tree watch left running is still
// counted: its run and follow goroutines).
var pooled = []string{"net/http.(*persistConn)", "zk2topo.(*Conn).worker", "zk2topo.(*treeWatch).forward"}

// watchGoroutines counts the goroutines but those of pooled, and returns
// their stacks.
func watchGoroutines() (int, string) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var kept []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !slices.ContainsFunc(pooled, func(p string) bool { return strings.Contains(g, p) }) {
			n++
			kept = append(kept, g)
		}
	}
	return n, strings.Join(kept, "\n\n")
}
