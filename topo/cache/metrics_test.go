package cache_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/cache"
)

// TestMetrics: hits, misses, passed reads, resyncs and watchers are
// counted.
func TestMetrics(t *testing.T) {
	ctx := testCtx(t)
	f, open := memoryStore(t)
	m := cache.NewMetrics("")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	c := wrap(t, open(), cache.Options{Hooks: m.Hooks("test")})
	defer c.Close()
	_, err := c.Create(ctx, "c/f", []byte("x"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "c/f", "x")                           // at least one hit
	_, _ = c.List(cache.WithMode(ctx, cache.Consistent), "c/") // read through: a miss
	_, _, _ = c.Get(cache.WithMode(ctx, cache.Bypass), "c/f")
	_, _, err = c.Watch(ctx, "c/f")
	require.NoError(t, err)
	f.BreakWatches(nil)
	waitHolds(t, ctx, c, "c/f", "x")
	require.Eventually(t, func() bool {
		out, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "topo_cache_resyncs_total")
		return err == nil && strings.Contains(string(out), `topo_cache_resyncs_total{cache="test"} 1`)
	}, 30*time.Second, time.Millisecond, "the resync is counted")
	out, err := testutil.CollectAndFormat(m, expfmt.TypeTextPlain, "topo_cache_reads_total", "topo_cache_watchers")
	require.NoError(t, err)
	require.Contains(t, string(out), `topo_cache_watchers{cache="test"} 1`)
	require.Contains(t, string(out), `topo_cache_reads_total{cache="test",op="Get",outcome="passed"} 1`) // Bypass
	// At least waitHolds's last read, and the Consistent List.
	for _, series := range []string{`op="Get",outcome="hit"`, `op="List",outcome="miss"`} {
		series := `topo_cache_reads_total{cache="test",` + series + `} `
		require.Contains(t, string(out), series)
		require.NotContains(t, string(out), series+"0\n")
	}
}
