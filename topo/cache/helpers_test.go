package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// gatedConn holds back the events of its WatchRecursive channels while
// its gate is closed, so that a test controls how far a Cache's watch has
// got.
type gatedConn struct {
	topo.Conn
	mu      sync.Mutex
	open    chan struct{} // closed while the gate is open
	cancels []context.CancelFunc
	before  func() // run before each WatchRecursive of the store, if set
}

// setBeforeWatch sets a func run before each later WatchRecursive asks
// the store (so at the moment a Cache lists again).
func (g *gatedConn) setBeforeWatch(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.before = f
}

func newGated(c topo.Conn) *gatedConn {
	g := &gatedConn{Conn: c, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gatedConn) Unwrap() topo.Conn { return g.Conn }

// hold closes the gate: events are held back from now on.
func (g *gatedConn) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// release opens the gate.
func (g *gatedConn) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gatedConn) gate() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

func (g *gatedConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	g.mu.Lock()
	before := g.before
	g.mu.Unlock()
	if before != nil {
		before()
	}
	wctx, cancel := context.WithCancel(ctx)
	init, in, err := g.Conn.WatchRecursive(wctx, prefix)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	g.mu.Lock()
	g.cancels = append(g.cancels, cancel)
	g.mu.Unlock()
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer close(out)
		for ev := range in {
			select {
			case <-g.gate():
			case <-wctx.Done():
			}
			if wctx.Err() != nil && ctx.Err() == nil {
				// Broken by the test: what was held back is lost, as with
				// a watch the store ended.
				out <- &topo.WatchDataRecursive{Path: prefix, WatchData: topo.WatchData{Err: topo.NewError(topo.Unavailable, prefix)}}
				for range in {
				}
				return
			}
			out <- ev
		}
	}()
	return init, out, nil
}

// watching reports whether a WatchRecursive started since the last
// breakWatches has returned.
func (g *gatedConn) watching() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cancels) > 0
}

// breakWatches ends the watches started so far with Unavailable, dropping
// the events held back.
func (g *gatedConn) breakWatches() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cancel := range g.cancels {
		cancel()
	}
	g.cancels = nil
}

// requireGet reads p through c and checks its contents and whether memory
// answered.
func requireGet(t testing.TB, ctx context.Context, c *cache.Cache, p, want string, fromMemory bool) cache.Info {
	t.Helper()
	b, _, info, err := c.GetWithInfo(ctx, p)
	require.NoErrorf(t, err, "Get(%q)", p)
	require.Equalf(t, want, string(b), "Get(%q)", p)
	require.Equalf(t, fromMemory, info.FromMemory, "Get(%q) from memory", p)
	return info
}

// waitHolds waits (polling the Cache, whose watch runs on its own) until
// the Cache answers p with want from memory.
func waitHolds(t testing.TB, ctx context.Context, c *cache.Cache, p, want string) {
	t.Helper()
	require.Eventuallyf(t, func() bool {
		b, _, info, err := c.GetWithInfo(ctx, p)
		return err == nil && info.FromMemory && string(b) == want
	}, 30*time.Second, time.Millisecond, "the Cache never answered %q with %q from memory", p, want)
}
