package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

var info = topo.ConnInfo{Implementation: "memory", Cell: "zone1", Root: "/t"}

func newConn(t *testing.T, mws ...topo.Middleware) (topo.Conn, *memorytopo.Factory) {
	t.Helper()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("", "/t")
	require.NoError(t, err)
	d := topo.Decorate(info, c, mws...)
	t.Cleanup(d.Close)
	return d, f
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDecorateWithoutMiddlewareIsTheConn(t *testing.T) {
	f := memorytopo.NewFactory()
	c, err := f.NewConn("", "/t")
	require.NoError(t, err)
	defer c.Close()
	require.Same(t, c, topo.Decorate(info, c).(*memorytopo.Conn))
	require.Same(t, c, topo.Decorate(info, c, nil).(*memorytopo.Conn))
}

func TestDecorateOrderFirstIsOutermost(t *testing.T) {
	var order []string
	var mu sync.Mutex
	tag := func(name string) topo.Middleware {
		return middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
			return middleware.Hooks{Around: func(ctx context.Context, c middleware.Call, next func(context.Context) error) error {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return next(ctx)
			}}
		})
	}
	c, _ := newConn(t, tag("a"), tag("b"))
	_, _, err := c.Get(ctxT(t), "x")
	require.ErrorIs(t, err, topo.NoNode, "a decorator must not change the result")
	require.Equal(t, []string{"a", "b"}, order)
}

func TestMetrics(t *testing.T) {
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	c, _ := newConn(t, m.Middleware())
	ctx := ctxT(t)

	v, err := c.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/f", []byte("1"))
	require.ErrorIs(t, err, topo.NodeExists)
	_, err = c.Update(ctx, "d/f", []byte("2"), v)
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "nope")
	require.ErrorIs(t, err, topo.NoNode)

	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Create", "code": "OK"}))
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Create", "code": "NodeExists"}))
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Update", "code": "OK"}))
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Get", "code": "NoNode"}))

	// Locks held, and how they end.
	l, err := c.Lock(ctx, "d", "me")
	require.NoError(t, err)
	require.Equal(t, 1.0, gauge(t, reg, "topo_locks_held", nil))
	require.NoError(t, l.Check(ctx))
	require.NoError(t, l.Unlock(ctx))
	require.ErrorIs(t, l.Unlock(ctx), topo.Interrupted)
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil))
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "unlock"}))
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_wait_seconds", nil))

	// Watches: active while open; a watch restarted after a failure counts.
	wctx, cancel := context.WithCancel(ctx)
	_, ch, err := c.Watch(wctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, 1.0, gauge(t, reg, "topo_watches_active", map[string]string{"op": "Watch"}))
	cancel()
	for range ch {
	}
	require.Equal(t, 0.0, gauge(t, reg, "topo_watches_active", map[string]string{"op": "Watch"}))

	// Leadership held, then given up.
	p, err := c.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	require.Equal(t, 1.0, gauge(t, reg, "topo_leadership_held", map[string]string{"election": "elec"}))
	p.Stop()
	<-lctx.Done()
	require.Eventually(t, func() bool {
		return gauge(t, reg, "topo_leadership_held", map[string]string{"election": "elec"}) == 0
	}, 30*time.Second, time.Millisecond)

	n, err := testutil.GatherAndCount(reg, "topo_call_duration_seconds")
	require.NoError(t, err)
	require.Positive(t, n)
}

func TestMetricsWatchRestarts(t *testing.T) {
	m, reg := registeredMetrics(t, middleware.MetricsOptions{Namespace: "app"})
	c, f := newConn(t, m.Middleware())
	ctx := ctxT(t)
	_, err := c.Create(ctx, "f", []byte("1"))
	require.NoError(t, err)
	_, ch, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, 1, f.BreakWatches(topo.NewError(topo.Unavailable, "f")))
	for range ch {
	}
	wctx, cancel := context.WithCancel(ctx)
	_, ch, err = c.Watch(wctx, "f")
	require.NoError(t, err)
	cancel()
	for range ch {
	}
	require.Equal(t, 1.0, counter(t, reg, "app_topo_watch_restarts_total", map[string]string{"op": "Watch"}))
}

func TestTracing(t *testing.T) {
	exp, tp := memoryTracer(t)
	c, _ := newConn(t, middleware.Tracing(tp))
	ctx := ctxT(t)
	_, err := c.Create(ctx, "a/b", []byte("x"))
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "a/missing")
	require.ErrorIs(t, err, topo.NoNode)

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	require.Equal(t, "topo.Create", spans[0].Name)
	require.Equal(t, "topo.Get", spans[1].Name)
	attrs := map[string]string{}
	for _, a := range spans[1].Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	require.Equal(t, map[string]string{"topo.backend": "memory", "topo.cell": "zone1", "topo.path": "a/missing", "topo.code": "NoNode"}, attrs)
	require.Equal(t, "Error", spans[1].Status.Code.String())
	require.Len(t, spans[1].Events, 1, "the error is recorded")
	require.Equal(t, "Unset", spans[0].Status.Code.String())
}

func TestLogging(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, _ := newConn(t, middleware.Logging(logger))
	ctx := ctxT(t)
	_, _, err := c.Get(ctx, "missing")
	require.ErrorIs(t, err, topo.NoNode)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"topo call", "backend=memory", "cell=zone1", "op=Get", "path=missing", "code=NoNode", "duration="} {
		require.Contains(t, out, want)
	}

	// Below the level: nothing is written.
	var quiet bytes.Buffer
	c2, _ := newConn(t, middleware.Logging(slog.New(slog.NewTextHandler(&quiet, nil))))
	_, _, _ = c2.Get(ctx, "missing")
	require.Empty(t, quiet.String())
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestReadOnly(t *testing.T) {
	var ro middleware.ReadOnly
	c, _ := newConn(t, ro.Middleware())
	ctx := ctxT(t)
	v, err := c.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "held before")
	require.NoError(t, err)
	p, err := c.NewLeaderParticipation("e", "id")
	require.NoError(t, err)

	ro.Set(true)
	require.True(t, ro.Enabled())
	_, err = c.Create(ctx, "d/g", []byte("1"))
	require.ErrorIs(t, err, topo.ReadOnly)
	_, err = c.Update(ctx, "d/f", []byte("2"), v)
	require.ErrorIs(t, err, topo.ReadOnly)
	require.ErrorIs(t, c.Delete(ctx, "d/f", nil), topo.ReadOnly)
	_, err = c.TryLock(ctx, "x", "")
	require.ErrorIs(t, err, topo.ReadOnly)
	_, err = c.LockName(ctx, "x", "")
	require.ErrorIs(t, err, topo.ReadOnly)
	observer, err := c.NewLeaderParticipation("e2", "id")
	require.NoError(t, err, "a participation writes nothing until it joins")
	_, err = observer.WaitForLeadership()
	require.ErrorIs(t, err, topo.ReadOnly)
	_, err = p.WaitForLeadership()
	require.ErrorIs(t, err, topo.ReadOnly)
	var te *topo.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, "e", te.Path)

	// Reads and releases still work; nothing was written.
	got, _, err := c.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "1", string(got))
	_, _, err = c.Get(ctx, "d/g")
	require.ErrorIs(t, err, topo.NoNode)
	require.NoError(t, l.Check(ctx))
	require.NoError(t, l.Unlock(ctx))
	p.Stop()

	ro.Set(false)
	_, err = c.Create(ctx, "d/g", []byte("1"))
	require.NoError(t, err)
}

func TestReadLimit(t *testing.T) {
	c, f := newConn(t, middleware.ReadLimit(2))
	ctx := ctxT(t)
	_, err := c.Create(ctx, "f", []byte("1"))
	require.NoError(t, err)

	// Two reads hang in the store; a third waits for a slot and honours
	// its context; writes are not limited.
	f.Hang()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = c.Get(ctx, "f")
		}()
	}
	require.Eventually(t, func() bool { return f.CallCount(memorytopo.OpGet) == 2 }, 30*time.Second, time.Millisecond)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = c.Get(short, "f")
	require.ErrorIs(t, err, topo.Timeout)
	require.Equal(t, int64(2), f.CallCount(memorytopo.OpGet), "the third read must not reach the store")
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = c.List(cctx, "")
	require.ErrorIs(t, err, topo.Interrupted)
	f.Unhang()
	wg.Wait()
	_, _, err = c.Get(ctx, "f")
	require.NoError(t, err)
}

// metric helpers

// registeredMetrics returns a Metrics with opts, registered in a pedantic
// registry of its own.
func registeredMetrics(t testing.TB, opts middleware.MetricsOptions) (*middleware.Metrics, *prometheus.Registry) {
	t.Helper()
	m := middleware.NewMetrics(opts)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	return m, reg
}

// memoryTracer returns a TracerProvider that records every span at once
// in the returned exporter, shut down when t ends.
func memoryTracer(t testing.TB) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return exp, tp
}

func find(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) []float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Gauge != nil:
				out = append(out, m.GetGauge().GetValue())
			case m.Counter != nil:
				out = append(out, m.GetCounter().GetValue())
			case m.Histogram != nil:
				out = append(out, float64(m.GetHistogram().GetSampleCount()))
			}
		}
	}
	return out
}

func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	v := find(t, reg, name, labels)
	require.Len(t, v, 1, "%s%v", name, labels)
	return v[0]
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	return gauge(t, reg, name, labels)
}

func histCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	return uint64(gauge(t, reg, name, labels))
}

// A lock the store drops is counted as ended when its Done closes, with
// no Check or Unlock by the holder; an Unlock afterwards reports nothing
// more, and a lock of a closed Conn ends as Closed.
func TestMetricsLockEndsWithoutUnlock(t *testing.T) {
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	f := memorytopo.NewFactory()
	raw, err := f.NewConn("", "/t")
	require.NoError(t, err)
	c := topo.Decorate(info, raw, m.Middleware())
	ctx := ctxT(t)
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "dropped")
	require.NoError(t, err)
	require.Equal(t, 1.0, gauge(t, reg, "topo_locks_held", nil))

	raw.ExpireSession()
	<-l.Done()
	// The hook lowers the gauge, then observes the hold time.
	ended := func(end string) func() bool {
		return func() bool {
			v := find(t, reg, "topo_lock_hold_seconds", map[string]string{"end": end})
			return len(v) == 1 && v[0] == 1
		}
	}
	require.Eventually(t, ended("LockLost"), 30*time.Second, time.Millisecond, "a dropped lock's end is reported")
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil), "a dropped lock is no longer counted as held")
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"}))
	require.ErrorIs(t, l.Unlock(ctx), topo.LockLost)
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil), "Unlock after the loss does not count it again")
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"}))

	l2, err := c.Lock(ctx, "d", "closed")
	require.NoError(t, err)
	c.Close()
	<-l2.Done()
	require.Eventually(t, ended("Closed"), 30*time.Second, time.Millisecond, "a closed Conn's lock's end is reported")
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil))
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "Closed"}))
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"}))
}

// Every result gets its own calls_total series, by its code's name, on
// one connection and one operation ("OK" for success, "Unknown" for an
// error without a topo code).
func TestMetricsCodes(t *testing.T) {
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	var fail atomic.Pointer[error]
	failing := middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
		return middleware.Hooks{Around: func(ctx context.Context, c middleware.Call, next func(context.Context) error) error {
			if e := fail.Load(); e != nil {
				return *e
			}
			return next(ctx)
		}}
	})
	c, _ := newConn(t, m.Middleware(), failing)
	ctx := ctxT(t)
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	codes := map[string]error{
		"Timeout":          topo.NewError(topo.Timeout, "f"),
		"Unavailable":      topo.NewError(topo.Unavailable, "f"),
		"PermissionDenied": topo.NewError(topo.PermissionDenied, "f"),
		"ReadOnly":         topo.NewError(topo.ReadOnly, "f"),
		"NodeExists":       topo.NewError(topo.NodeExists, "f"),
		"Unknown":          errors.New("no code"),
	}
	for round := 1; round <= 2; round++ {
		for _, e := range codes {
			fail.Store(&e)
			_, _, err := c.Get(ctx, "f")
			require.Equal(t, e, err)
		}
		fail.Store(nil)
		_, _, err := c.Get(ctx, "f")
		require.NoError(t, err)
		_, _, err = c.Get(ctx, "missing")
		require.ErrorIs(t, err, topo.NoNode)
		for name := range codes {
			require.Equal(t, float64(round), counter(t, reg, "topo_calls_total", map[string]string{"op": "Get", "code": name}), name)
		}
		require.Equal(t, float64(round), counter(t, reg, "topo_calls_total", map[string]string{"op": "Get", "code": "OK"}))
		require.Equal(t, float64(round), counter(t, reg, "topo_calls_total", map[string]string{"op": "Get", "code": "NoNode"}))
	}
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Create", "code": "OK"}))
	require.Equal(t, uint64(2*len(codes)+4), histCount(t, reg, "topo_call_duration_seconds", map[string]string{"op": "Get"}))
	require.Equal(t, 0.0, gauge(t, reg, "topo_calls_in_flight", map[string]string{"op": "Get"}))
}

// An Unlock that did not release the lock (its ctx was cancelled) leaves
// it counted as held; its later end is still reported: the store dropping
// it, or an Unlock that does release it.
func TestMetricsUnlockFailedThenLockEnds(t *testing.T) {
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	f := memorytopo.NewFactory()
	raw, err := f.NewConn("", "/t")
	require.NoError(t, err)
	c := topo.Decorate(info, raw, m.Middleware())
	defer c.Close()
	ctx := ctxT(t)
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	l, err := c.Lock(ctx, "d", "unlocked later")
	require.NoError(t, err)
	require.ErrorIs(t, l.Unlock(cancelled), topo.Interrupted)
	require.NoError(t, l.Check(ctx), "the lock is still held")
	require.Equal(t, 1.0, gauge(t, reg, "topo_locks_held", nil), "a lock still held is counted")
	require.NoError(t, l.Unlock(ctx))
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil))
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "unlock"}))

	l, err = c.Lock(ctx, "d", "dropped later")
	require.NoError(t, err)
	require.ErrorIs(t, l.Unlock(cancelled), topo.Interrupted)
	raw.ExpireSession()
	<-l.Done()
	// The series exists only once the end is reported (by the
	// middleware's goroutine that waits for Done): poll with find, which
	// does not fail the test on a series not there yet.
	require.Eventually(t, func() bool {
		v := find(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"})
		return len(v) == 1 && v[0] == 1
	}, 30*time.Second, time.Millisecond, "the end of a lock dropped after a failed Unlock is not reported")
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", nil), "a dropped lock is still counted as held")
}

// OnLeadership reports one participation's terms in order: the end of a
// term (false) before the start of the next (true), even when the next
// begins at once after a Resign, so that topo_leadership_held is 1 while
// the participant leads.
func TestLeadershipReportsInOrder(t *testing.T) {
	var mu sync.Mutex
	var events []bool
	hooks := middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
		return middleware.Hooks{OnLeadership: func(_ middleware.Call, leading bool) {
			mu.Lock()
			events = append(events, leading)
			mu.Unlock()
		}}
	})
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	c, _ := newConn(t, hooks, m.Middleware())
	ctx := ctxT(t)
	p, err := c.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	defer p.Stop()
	const terms = 50
	for i := range terms {
		_, err := p.Campaign(ctx, nil)
		require.NoError(t, err)
		if i < terms-1 {
			require.NoError(t, p.Resign(ctx))
		}
	}
	labels := map[string]string{"election": "e"}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 2*terms-1
	}, 10*time.Second, time.Millisecond, "every term's start and end is reported")
	mu.Lock()
	for i, e := range events {
		require.Equal(t, i%2 == 0, e, "event %d of %v: a term's end reported after the next term's start", i, events)
	}
	mu.Unlock()
	require.Equal(t, 1.0, gauge(t, reg, "topo_leadership_held", labels), "the participant leads")
}

// A decorated Conn is a cache.SyncWatcher (and RevisionSyncWatcher) like
// the backend's: the sync counts the events that hold every write before
// it. Over a Conn without one, the sync is nil.
func TestDecoratedSyncWatcher(t *testing.T) {
	c, _ := newConn(t, middleware.Logging(slog.New(slog.DiscardHandler)))
	ctx := ctxT(t)
	sw, ok := c.(cache.SyncWatcher)
	require.True(t, ok)
	_, ch, sync, err := sw.WatchRecursiveSync(ctx, "s/")
	require.NoError(t, err)
	require.NotNil(t, sync)
	_, err = c.Create(ctx, "s/a", []byte("1"))
	require.NoError(t, err)
	n, err := sync(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	ev := <-ch
	require.Equal(t, "s/a", ev.Path)

	bare := topo.Decorate(info, watchOnly{c}, middleware.Logging(slog.New(slog.DiscardHandler)))
	_, _, sync, err = bare.(cache.SyncWatcher).WatchRecursiveSync(ctx, "s/")
	require.NoError(t, err)
	require.Nil(t, sync, "no sync over a Conn that has none")
}

// watchOnly is a Conn with none of its backend's optional interfaces.
type watchOnly struct{ topo.Conn }
