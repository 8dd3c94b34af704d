package middleware_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// collect returns the text exposition of m's series named names.
func collect(t *testing.T, m prometheus.Collector, names ...string) string {
	t.Helper()
	out, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, names...)
	require.NoError(t, err)
	return string(out)
}

// waitValue waits until the cache's read of p gives want.
func waitValue(t *testing.T, ctx context.Context, c *cache.Cache, p, want string) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, _, err := c.Get(ctx, p)
		return err == nil && string(b) == want
	}, 30*time.Second, time.Millisecond)
}

// TestCacheMetrics: a Metrics counts a read cache's hits, misses, passed
// reads, resyncs and watchers through CacheHooks, beside the topo calls
// of the Conn it decorates, in one registration.
func TestCacheMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
	raw, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	m := middleware.NewMetrics(middleware.MetricsOptions{})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	c, err := cache.New(m.Middleware()(topo.ConnInfo{Implementation: "memory", Cell: "mem"}, raw), "c/", cache.Options{Hooks: m.CacheHooks("test")})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create(ctx, "c/f", []byte("x"))
	require.NoError(t, err)
	// At least one hit: a read may miss (or read through) until the
	// cache's watch has brought the file in.
	require.Eventually(t, func() bool {
		b, _, err := c.Get(ctx, "c/f")
		return err == nil && string(b) == "x" &&
			!strings.Contains(collect(t, m, "topo_cache_reads_total"), `topo_cache_reads_total{cache="test",op="Get",outcome="hit"} 0`+"\n")
	}, 30*time.Second, time.Millisecond, "a read is a hit")
	_, _ = c.List(cache.WithMode(ctx, cache.Consistent), "c/") // read through: a miss
	_, _, _ = c.Get(cache.WithMode(ctx, cache.Bypass), "c/f")
	_, _, err = c.Watch(ctx, "c/f")
	require.NoError(t, err)
	f.BreakWatches(nil)
	waitValue(t, ctx, c, "c/f", "x")
	require.Eventually(t, func() bool {
		return strings.Contains(collect(t, m, "topo_cache_resyncs_total"), `topo_cache_resyncs_total{cache="test"} 1`)
	}, 30*time.Second, time.Millisecond, "the resync is counted")
	out := collect(t, m, "topo_cache_reads_total", "topo_cache_watchers", "topo_calls_total")
	require.Contains(t, out, `topo_cache_watchers{cache="test"} 1`)
	require.Contains(t, out, `topo_cache_reads_total{cache="test",op="Get",outcome="passed"} 1`) // Bypass
	// At least the hit above, and the Consistent List.
	for _, series := range []string{`op="Get",outcome="hit"`, `op="List",outcome="miss"`} {
		series := `topo_cache_reads_total{cache="test",` + series + `} `
		require.Contains(t, out, series)
		require.NotContains(t, out, series+"0\n")
	}
	require.Contains(t, out, `topo_calls_total{backend="memory",cell="mem",code="OK",op="List"} 1`, "the read through is a topo call")
}

// TestCacheStaleSeconds: topo_cache_stale_seconds is 0 while the cache is
// Healthy, the age of the outage (State.Since) while it is Stale, and 0
// again once it is Healthy; topo_cache_health follows, and both carry the
// Metrics' namespace.
func TestCacheStaleSeconds(t *testing.T) {
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
	raw, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	m := middleware.NewMetrics(middleware.MetricsOptions{Namespace: "app"})
	c, err := cache.New(raw, "c/", cache.Options{Hooks: m.CacheHooks("test"), MaxStaleness: time.Hour,
		ProbeInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	stale := func() float64 {
		out := collect(t, m, "app_topo_cache_stale_seconds")
		line := `app_topo_cache_stale_seconds{cache="test"} `
		i := strings.Index(out, line)
		require.GreaterOrEqual(t, i, 0, out)
		v, err := strconv.ParseFloat(strings.TrimSpace(strings.SplitN(out[i+len(line):], "\n", 2)[0]), 64)
		require.NoError(t, err)
		return v
	}
	require.Zero(t, stale(), "healthy")

	f.SetError(topo.NewError(topo.Unavailable, "injected"))
	f.BreakWatches(nil)
	require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
	// Stale, or Resyncing again between two failed watches.
	require.NotContains(t, collect(t, m, "app_topo_cache_health"), `app_topo_cache_health{cache="test"} 0`)
	since := c.State().Since
	lower := time.Since(since).Seconds()
	got := stale()
	upper := time.Since(since).Seconds()
	require.True(t, got >= lower && got <= upper && got > 0, "stale_seconds %v, outage age between %v and %v", got, lower, upper)

	f.SetError(nil)
	require.Eventually(t, func() bool { return c.State().Health == cache.Healthy }, 30*time.Second, time.Millisecond)
	require.Zero(t, stale(), "healthy again")
	require.Contains(t, collect(t, m, "app_topo_cache_health"), `app_topo_cache_health{cache="test"} 0`)
}
