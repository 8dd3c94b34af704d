package topo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
)

var factorySeq atomic.Int64

// uniqueFactoryName returns a name no other test (or -count run) registered.
func uniqueFactoryName(t *testing.T) string {
	return fmt.Sprintf("test-factory-%d-%s", factorySeq.Add(1), t.Name())
}

func TestRegisterFactory(t *testing.T) {
	name := uniqueFactoryName(t)
	var calls []string
	f := topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		calls = append(calls, cell+"|"+addr+"|"+root)
		return memorytopo.NewFactory().Create(cell, addr, root)
	})
	require.NoError(t, topo.RegisterFactory(name, f))
	require.Contains(t, topo.Factories(), name)
	require.True(t, slices.IsSorted(topo.Factories()), "Factories is sorted")

	got, err := topo.GetFactory(name)
	require.NoError(t, err)
	conn, err := got.Create("cell1", "addr", "/root")
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, []string{"cell1|addr|/root"}, calls)

	// A duplicate is an error, and the first registration stays.
	err = topo.RegisterFactory(name, topo.FactoryFunc(func(string, string, string) (topo.Conn, error) {
		return nil, errors.New("the second factory must not be used")
	}))
	require.Error(t, err)
	require.Contains(t, err.Error(), name)
	got, err = topo.GetFactory(name)
	require.NoError(t, err)
	conn, err = got.Create("cell2", "addr", "/root")
	require.NoError(t, err)
	conn.Close()
	require.Len(t, calls, 2)

	require.Error(t, topo.RegisterFactory("", f), "an empty name is refused")
	require.Error(t, topo.RegisterFactory(uniqueFactoryName(t), nil), "a nil factory is refused")
}

func TestRegisterFactoryConcurrent(t *testing.T) {
	name := uniqueFactoryName(t)
	f := topo.FactoryFunc(func(string, string, string) (topo.Conn, error) { return nil, errors.New("unused") })
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if topo.RegisterFactory(name, f) == nil {
				wins.Add(1)
			}
			_, _ = topo.GetFactory(name)
			_ = topo.Factories()
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load(), "exactly one of several concurrent registrations of a name succeeds")
}

func TestBundledMemoryFactoryRegistered(t *testing.T) {
	require.Contains(t, topo.Factories(), "memory")
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	require.NotNil(t, f)
}

func TestGetFactoryUnknown(t *testing.T) {
	_, err := topo.GetFactory("no-such-backend")
	require.True(t, topo.IsErrType(err, topo.NoImplementation), "got %v", err)
	require.Contains(t, err.Error(), "no-such-backend")
	for _, name := range topo.Factories() {
		require.Contains(t, err.Error(), name, "the error names the registered implementations")
	}

	ts, err := topo.OpenServer("no-such-backend", "addr", "/root")
	require.Nil(t, ts)
	require.True(t, topo.IsErrType(err, topo.NoImplementation), "got %v", err)
	require.Contains(t, err.Error(), "memory")
}

func TestOpenServer(t *testing.T) {
	name := uniqueFactoryName(t)
	mem := memorytopo.NewFactory()
	var cells []string
	require.NoError(t, topo.RegisterFactory(name, topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		cells = append(cells, cell)
		if addr == "fail" {
			return nil, topo.NewError(topo.Unavailable, addr)
		}
		return mem.Create(cell, addr, root)
	})))

	ts, err := topo.OpenServer(name, "mem", "/global")
	require.NoError(t, err)
	defer ts.Close()
	require.Equal(t, []string{topo.GlobalCell}, cells, "OpenServer opens the global cell")
	ctx := t.Context()
	_, err = ts.GlobalCell().Create(ctx, "x", []byte("y"))
	require.NoError(t, err)
	// The global connection is rooted at /global in the store "mem".
	raw, err := mem.Create("raw", "mem", "/")
	require.NoError(t, err)
	defer raw.Close()
	data, _, err := raw.Get(ctx, "global/x")
	require.NoError(t, err)
	require.Equal(t, "y", string(data))

	_, err = topo.OpenServer(name, "fail", "/global")
	require.True(t, topo.IsErrType(err, topo.Unavailable), "the factory's error is returned: %v", err)

	// The bundled memory backend by name.
	ts2, err := topo.OpenServer("memory", uniqueFactoryName(t), "/g") // a fresh store per run
	require.NoError(t, err)
	defer ts2.Close()
	_, err = ts2.GlobalCell().Create(ctx, "f", nil)
	require.NoError(t, err)
}

// blockingFactory dials only once release is closed; started receives one
// value per dial that began, and conns every Conn it returned.
type blockingFactory struct {
	mem     *memorytopo.Factory
	started chan string
	release chan struct{}
	mu      sync.Mutex
	conns   []topo.Conn
}

func newBlockingFactory() *blockingFactory {
	return &blockingFactory{mem: memorytopo.NewFactory(), started: make(chan string, 16), release: make(chan struct{})}
}

func (b *blockingFactory) Create(cell, addr, root string) (topo.Conn, error) {
	b.started <- cell
	<-b.release
	c, err := b.mem.Create(cell, addr, root)
	if err == nil {
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
	}
	return c, err
}

// count returns how many dials have returned a connection.
func (b *blockingFactory) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *blockingFactory) allClosed(ctx context.Context) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		if _, _, err := c.Get(ctx, "x"); !topo.IsErrType(err, topo.Closed) {
			return false
		}
	}
	return len(b.conns) > 0
}

// TestOpenServerContext: a deadline or cancellation while the factory
// dials returns Timeout or Interrupted naming the address, and the
// connection the abandoned dial returns is closed.
func TestOpenServerContext(t *testing.T) {
	ctx := t.Context()
	b := newBlockingFactory()
	name := uniqueFactoryName(t)
	require.NoError(t, topo.RegisterFactory(name, b))

	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := topo.OpenServerContext(dctx, name, "dead-address:2379", "/global")
	requireCodeT(t, err, topo.Timeout)
	require.ErrorContains(t, err, "dead-address:2379")
	require.Equal(t, topo.GlobalCell, <-b.started)

	cctx, cancel2 := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := topo.OpenServerContext(cctx, name, "dead-address:2379", "/global")
		errc <- err
	}()
	<-b.started
	cancel2()
	requireCodeT(t, <-errc, topo.Interrupted)

	// An already-ended context does not dial.
	_, err = topo.OpenServerContext(cctx, name, "dead-address:2379", "/global")
	requireCodeT(t, err, topo.Interrupted)
	require.Empty(t, b.started)

	// The abandoned dials complete; their connections are closed.
	// Each is closed once its dial returns; wait for both dials.
	close(b.release)
	require.Eventually(t, func() bool { return b.count() == 2 && b.allClosed(ctx) }, waitFor, tick)

	// Without a deadline it waits for the factory, as OpenServer does.
	ts, err := topo.OpenServerContext(ctx, name, "a", "/global")
	require.NoError(t, err)
	defer ts.Close()
	<-b.started
	_, err = ts.GlobalCell().Create(ctx, "x", []byte("y"))
	require.NoError(t, err)
}

// ctxFactory is a ContextFactory whose dial waits for its context.
type ctxFactory struct {
	mem     *memorytopo.Factory
	plain   atomic.Int32
	withCtx atomic.Int32
	key     any
	seen    chan any
}

func (c *ctxFactory) Create(cell, addr, root string) (topo.Conn, error) {
	c.plain.Add(1)
	return c.mem.Create(cell, addr, root)
}

func (c *ctxFactory) CreateContext(ctx context.Context, cell, addr, root string) (topo.Conn, error) {
	c.withCtx.Add(1)
	c.seen <- ctx.Value(c.key)
	if addr == "hang" {
		<-ctx.Done()
		return nil, backendkit.FromContext(ctx, addr)
	}
	return c.mem.Create(cell, addr, root)
}

type ctxKey struct{}

// TestContextFactory: OpenServerContext and ConnForCell hand their context
// to a ContextFactory rather than calling Create.
func TestContextFactory(t *testing.T) {
	ctx := t.Context()
	f := &ctxFactory{mem: memorytopo.NewFactory(), key: ctxKey{}, seen: make(chan any, 4)}
	dctx, cancel := context.WithTimeout(context.WithValue(ctx, ctxKey{}, "open-hang"), 50*time.Millisecond)
	defer cancel()
	_, err := topo.OpenServerContext(dctx, "custom", "hang", "/global", topo.WithFactory(f))
	requireCodeT(t, err, topo.Timeout)
	require.Equal(t, "open-hang", <-f.seen)

	ts, err := topo.OpenServerContext(context.WithValue(ctx, ctxKey{}, "open"), "custom", "store", "/global", topo.WithFactory(f))
	require.NoError(t, err)
	defer ts.Close()
	require.Equal(t, "open", <-f.seen)
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: "store", Root: "/zone1"}))
	_, err = ts.ConnForCell(context.WithValue(ctx, ctxKey{}, "cell"), "zone1")
	require.NoError(t, err)
	require.Equal(t, "cell", <-f.seen)
	require.EqualValues(t, 0, f.plain.Load())
	require.EqualValues(t, 3, f.withCtx.Load())
}

// TestWithFactory: a configured Factory given with WithFactory opens the
// global cell and every cell from its CellInfo, with its options, for an
// implementation name that need not be registered.
func TestWithFactory(t *testing.T) {
	ctx := t.Context()
	// History 1: GetVersion of a replaced version is Compacted; the
	// registered memory factory (default history) would return it.
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{History: 1})
	name := uniqueFactoryName(t) // not registered
	var infos []topo.ConnInfo
	var mu sync.Mutex
	mw := func(info topo.ConnInfo, next topo.Conn) topo.Conn {
		mu.Lock()
		infos = append(infos, info)
		mu.Unlock()
		return next
	}
	ts, err := topo.OpenServer(name, "store", "/global", topo.WithFactory(f), topo.WithMiddleware(mw))
	require.NoError(t, err)
	defer ts.Close()

	requireHistoryOne := func(c topo.Conn) {
		t.Helper()
		v1, err := c.Create(ctx, "f", []byte("1"))
		require.NoError(t, err)
		_, err = c.Update(ctx, "f", []byte("2"), v1)
		require.NoError(t, err)
		n, err := backendkit.VersionNumber("f", v1)
		require.NoError(t, err)
		_, err = c.GetVersion(ctx, "f", n)
		requireCodeT(t, err, topo.Compacted)
	}
	requireHistoryOne(ts.GlobalCell())

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: "store", Root: "/zone1"}))
	zone1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	requireHistoryOne(zone1)

	// Both connections are f's, in its store "store".
	raw, err := f.Create("raw", "store", "/")
	require.NoError(t, err)
	defer raw.Close()
	for _, p := range []string{"global/f", "zone1/f"} {
		data, _, err := raw.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "2", string(data))
	}
	mu.Lock()
	require.Equal(t, []topo.ConnInfo{
		{Implementation: name, Cell: topo.GlobalCell, ServerAddress: "store", Root: "/global"},
		{Implementation: name, Cell: "zone1", ServerAddress: "store", Root: "/zone1"},
	}, infos)
	mu.Unlock()

	// Without WithFactory the name must be registered.
	_, err = topo.OpenServer(name, "store", "/global")
	requireCodeT(t, err, topo.NoImplementation)
	_, err = topo.OpenServer(name, "store", "/global", topo.WithFactory(nil))
	requireCodeT(t, err, topo.NoImplementation)

	// For NewServer, WithFactory replaces the factory argument.
	other := memorytopo.NewFactory()
	global, err := f.Create(topo.GlobalCell, "store", "/global")
	require.NoError(t, err)
	ts2 := topo.NewServer(other, global, topo.WithFactory(f))
	defer ts2.Close()
	before := f.CallCount(memorytopo.OpGet)
	zone1b, err := ts2.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, _, err = zone1b.Get(ctx, "f")
	require.NoError(t, err)
	require.Greater(t, f.CallCount(memorytopo.OpGet), before)
	require.EqualValues(t, 0, other.CallCount(memorytopo.OpGet))
}
