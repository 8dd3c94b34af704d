package ui_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// TestBrowserStreamRefusedRetried: a live stream answered with an HTTP
// error at a reconnection (503: the store is unreachable) is tried again:
// the badge says why it is not live, and says "live" again once a stream
// started and the read after it succeeded. The browser's EventSource gives
// up for good on such an answer, and the badge said "reconnecting…" until
// the page was reloaded.
func TestBrowserStreamRefusedRetried(t *testing.T) {
	p, store, _ := stalePage(t, []string{"d/x"}, nil)
	p.open("/d")
	remove := store.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive, Err: topo.Unavailable})
	defer remove()
	store.Factory.BreakWatches(nil) // the stream ends; its reconnection is answered 503
	p.wait("the badge to say why", has("#live", "not live: the live stream failed (")+` && `+has("#live", "injected fault"))
	remove()
	p.wait("live again", isLive)
}

// watchCountConn counts the WatchRecursive calls of Conn that are set
// and whose context has not ended (the requests of the live stream the
// server still serves), and the prefixes watched.
type watchCountConn struct {
	topo.Conn
	active   atomic.Int64
	mu       sync.Mutex
	prefixes []string
}

func (c *watchCountConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	cur, ch, err := c.Conn.WatchRecursive(ctx, prefix)
	if err == nil {
		c.active.Add(1)
		context.AfterFunc(ctx, func() { c.active.Add(-1) })
		c.mu.Lock()
		c.prefixes = append(c.prefixes, prefix)
		c.mu.Unlock()
	}
	return cur, ch, err
}

// TestBrowserStreamRefusedProbeClosed: a live stream refused once (the
// next request for it is accepted) while a file outside the directory is
// followed is started again with the same parameters (the file stays
// followed), and the request the page asks again to learn why it was
// refused, accepted, leaves no watch behind on the server.
func TestBrowserStreamRefusedProbeClosed(t *testing.T) {
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	wc := &watchCountConn{Conn: conn}
	p, _ := stalePageOn(t, conn, []string{"d/x", "e/y"}, func(o *ui.Options) { o.Files = wc })
	ctx := context.Background()
	p.open("/d")
	p.fill("#search", "/e")
	p.click("#searchbar button[type=submit]")
	p.wait("the search results", `!!document.querySelector('#search-results a[data-path="/e/y"]')`)
	p.openFile("/e/y")
	p.wait("live", isLive)
	require.Eventually(t, func() bool { return wc.active.Load() == 2 }, time.Minute, 10*time.Millisecond, "the stream of /d and /e/y")
	wc.mu.Lock()
	before := len(wc.prefixes)
	wc.mu.Unlock()
	p.run("forget the badge's states", `(window.liveStates = [], true)`)
	store.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive, Err: topo.Unavailable, Times: 1})
	store.Factory.BreakWatches(nil) // the stream ends; its reconnection is answered 503, the next request accepted
	p.wait("refused, then live again", `window.liveStates.some((s) => s.startsWith("not live: the live stream failed")) && `+isLive)
	// The probe (accepted: two watches) and the stream started again (two).
	wc.mu.Lock()
	after := slices.Sorted(slices.Values(wc.prefixes[before:]))
	wc.mu.Unlock()
	require.Equal(t, []string{"d/", "d/", "e/y", "e/y"}, after, "the probe and the stream started again, each of the directory and the file")
	require.Eventually(t, func() bool { return wc.active.Load() == 2 }, time.Minute, 10*time.Millisecond,
		"the server still watches for a request the page left (the probe)")
	_, err := conn.Update(ctx, "e/y", []byte("changed"), nil)
	require.NoError(t, err)
	p.wait("y's new value", has("#show-text", "changed"))
}

// streamRetryJS records in window.streamRetries the delay (ms) of each
// start of the live stream the page schedules after a refusal (the
// timeouts that call watch again); they run as scheduled.
const streamRetryJS = `(() => {
	window.streamRetries = [];
	const set = window.setTimeout;
	window.setTimeout = (fn, ms, ...args) => {
		if (fn && String(fn).includes("watch(dir, file)")) window.streamRetries.push(ms);
		return set(fn, ms, ...args);
	};
	return true;
})()`

// TestBrowserStreamRefusedBackoff: while the server keeps refusing the
// live stream, the page waits 1 s, then 2 s, ... before it starts it again
// (the request asked again to learn why does not reset the delay); once a
// stream started, the next refusal waits 1 s again.
func TestBrowserStreamRefusedBackoff(t *testing.T) {
	p, store, _ := stalePage(t, []string{"d/x"}, nil)
	p.open("/d")
	p.run("record the stream's retries", streamRetryJS)
	remove := store.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive, Err: topo.Unavailable})
	store.Factory.BreakWatches(nil)
	p.wait("two retries", `window.streamRetries.length >= 2`)
	remove()
	require.Equal(t, []int{1000, 2000}, p.retriesOfStream()[:2], "the delays while the server refuses")
	p.wait("live again", isLive)
	p.run("forget the retries", `(window.streamRetries = [], true)`)
	remove = store.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive, Err: topo.Unavailable})
	defer remove()
	store.Factory.BreakWatches(nil)
	p.wait("a retry", `window.streamRetries.length >= 1`)
	require.Equal(t, []int{1000}, p.retriesOfStream()[:1], "the delay after a stream started")
}

// retriesOfStream are the delays recorded by streamRetryJS.
func (p *page) retriesOfStream() []int {
	p.t.Helper()
	r, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]int](`window.streamRetries`))
	require.NoError(p.t, err)
	return r
}

// scriptConn answers the next WatchRecursive calls of Conn as script
// says, one step each: "refuse" fails the call (Unavailable), "hang"
// blocks it until its context ends (hung counts those blocked); then
// calls go to Conn.
type scriptConn struct {
	topo.Conn
	mu     sync.Mutex
	script []string
	hung   atomic.Int64
}

func (c *scriptConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	c.mu.Lock()
	step := ""
	if len(c.script) > 0 {
		step, c.script = c.script[0], c.script[1:]
	}
	c.mu.Unlock()
	switch step {
	case "refuse":
		return nil, nil, &topo.Error{Code: topo.Unavailable, Err: errors.New("refused by the test")}
	case "hang":
		c.hung.Add(1)
		defer c.hung.Add(-1)
		<-ctx.Done()
		return nil, nil, &topo.Error{Code: topo.Interrupted, Err: ctx.Err()}
	}
	return c.Conn.WatchRecursive(ctx, prefix)
}

// TestBrowserStreamProbeDropped: the request the page asks again to learn
// why its live stream was refused, still unanswered when the page starts
// the stream again (the store hangs on it), is dropped then: it stayed
// open, holding one of the browser's few connections to the server and a
// request on the server, until the store answered it.
func TestBrowserStreamProbeDropped(t *testing.T) {
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	sc := &scriptConn{Conn: conn}
	p, _ := stalePageOn(t, conn, []string{"d/x"}, func(o *ui.Options) { o.Files = sc })
	p.open("/d")
	p.run("forget the badge's states", `(window.liveStates = [], true)`)
	sc.mu.Lock()
	sc.script = []string{"refuse", "hang"} // the reconnection, then the probe
	sc.mu.Unlock()
	store.Factory.BreakWatches(nil)
	p.wait("refused, then live again", `window.liveStates.some((s) => s.startsWith("not live: the live stream failed")) && `+isLive)
	require.Eventually(t, func() bool { return sc.hung.Load() == 0 }, 20*time.Second, 10*time.Millisecond,
		"the probe is still asked after the stream started again")
}
