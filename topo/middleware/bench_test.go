package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// BenchmarkGet: memorytopo's Get undecorated (the baseline every other row
// is compared to), then through each shipped decorator.
func BenchmarkGet(b *testing.B) {
	var ro middleware.ReadOnly
	m := middleware.NewMetrics(middleware.MetricsOptions{})
	for _, bc := range []struct {
		name string
		mws  []topo.Middleware
	}{
		{"plain", nil},
		{"readonly", []topo.Middleware{ro.Middleware()}},
		{"readlimit", []topo.Middleware{middleware.ReadLimit(0)}},
		{"metrics", []topo.Middleware{m.Middleware()}},
		{"tracing-noop", []topo.Middleware{middleware.Tracing(nil)}},
		{"logging-off", []topo.Middleware{middleware.Logging(nil)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := benchConn(b, "f", bc.mws...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.Get(ctx, "f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGuardedUpdate: topo.GuardedUpdate of one file under a held
// lock on memorytopo, undecorated and through a decorator (the wrapped
// backend's GuardedUpdate fast path must survive the decoration).
func BenchmarkGuardedUpdate(b *testing.B) {
	var ro middleware.ReadOnly
	for _, bc := range []struct {
		name string
		mws  []topo.Middleware
	}{
		{"plain", nil},
		{"readonly", []topo.Middleware{ro.Middleware()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := benchConn(b, "d/f", bc.mws...)
			ctx := context.Background()
			l, err := c.Lock(ctx, "d", "bench")
			require.NoError(b, err)
			defer func() { _ = l.Unlock(ctx) }()
			value := []byte("value")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := topo.GuardedUpdate(ctx, c, l, "d/f", value, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLockUnlock: an uncontended Lock and Unlock on memorytopo,
// undecorated and through Metrics (which follows each held lock's Done,
// so that a lock dropped by the store stops counting as held).
func BenchmarkLockUnlock(b *testing.B) {
	m := middleware.NewMetrics(middleware.MetricsOptions{})
	for _, bc := range []struct {
		name string
		mws  []topo.Middleware
	}{
		{"plain", nil},
		{"metrics", []topo.Middleware{m.Middleware()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := benchConn(b, "d/f", bc.mws...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.Lock(ctx, "d", "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchConn returns a Conn of a fresh memorytopo store decorated with mws,
// holding the file p, closed at the end of b.
func benchConn(b *testing.B, p string, mws ...topo.Middleware) topo.Conn {
	b.Helper()
	raw, err := memorytopo.NewFactory().NewConn("", "/b")
	require.NoError(b, err)
	c := topo.Decorate(info, raw, mws...)
	b.Cleanup(c.Close)
	_, err = c.Create(context.Background(), p, []byte("value"))
	require.NoError(b, err)
	return c
}
