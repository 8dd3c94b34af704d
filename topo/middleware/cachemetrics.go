package middleware

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topokit/topokit/topo/cache"
)

// cacheMetrics are the series of read caches (topo/cache) in a Metrics;
// see Metrics.CacheHooks.
type cacheMetrics struct {
	reads    *prometheus.CounterVec
	resyncs  *prometheus.CounterVec
	health   *prometheus.GaugeVec
	watchers *prometheus.GaugeVec
	stale    *staleGauge
}

func newCacheMetrics(ns string) cacheMetrics {
	label := []string{"cache"}
	return cacheMetrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "topo_cache", Name: "reads_total",
			Help: "Read cache reads by operation and outcome."}, []string{"cache", "op", "outcome"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "topo_cache", Name: "resyncs_total",
			Help: "Read cache relists after its store watch ended."}, label),
		health: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo_cache", Name: "health",
			Help: "Read cache health: 0 healthy, 1 resyncing, 2 stale, 3 over-limit."}, label),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo_cache", Name: "watchers",
			Help: "Open local watchers of a read cache."}, label),
		stale: &staleGauge{
			desc: prometheus.NewDesc(prometheus.BuildFQName(ns, "topo_cache", "stale_seconds"),
				"Seconds since the read cache's outage began (resyncing or stale); 0 when healthy or over-limit.", label, nil),
			since: map[string]time.Time{},
		},
	}
}

func (c cacheMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.reads, c.resyncs, c.health, c.watchers, c.stale}
}

// CacheHooks returns the cache.Hooks that record one read cache's events
// into m under the label cache=name; set them as cache.Options.Hooks. They
// feed, with m's namespace:
//
//	topo_cache_reads_total{cache,op,outcome}  reads by operation (Get, List, ListDir) and outcome (hit, stale, miss, passed)
//	topo_cache_resyncs_total{cache}           relists after the store watch ended
//	topo_cache_health{cache}                  the current cache.Health (0 healthy, 1 resyncing, 2 stale, 3 over-limit, 4 closed)
//	topo_cache_watchers{cache}                open local watchers
//	topo_cache_stale_seconds{cache}           seconds since the current outage began (the cache left Healthy
//	                                          for Resyncing or Stale), computed when collected; 0 when Healthy
//	                                          or OverLimit (which serves from the store, not stale memory)
//
// The calls the cache makes on its Conn are counted as topo calls when
// that Conn is decorated by m.Middleware. Safe for concurrent use; give
// each cache its own name (two caches under one name share their series).
func (m *Metrics) CacheHooks(name string) cache.Hooks {
	c := m.cache
	var outcomes [3][4]prometheus.Counter // op (Get, List, ListDir) x Outcome
	for i, op := range []string{"Get", "List", "ListDir"} {
		for o := cache.Hit; o <= cache.Passed; o++ {
			outcomes[i][o] = c.reads.WithLabelValues(name, op, o.String())
		}
	}
	ops := map[string]int{"Get": 0, "List": 1, "ListDir": 2}
	resyncs, health, watchers := c.resyncs.WithLabelValues(name), c.health.WithLabelValues(name), c.watchers.WithLabelValues(name)
	c.stale.set(name, time.Time{})
	return cache.Hooks{
		OnRead:   func(op string, o cache.Outcome) { outcomes[ops[op]][o].Inc() },
		OnResync: func(error) { resyncs.Inc() },
		OnHealth: func(h cache.Health, since time.Time) {
			health.Set(float64(h))
			if h == cache.Resyncing || h == cache.Stale {
				c.stale.set(name, since)
			} else {
				c.stale.set(name, time.Time{})
			}
		},
		OnWatchers: func(n int) { watchers.Set(float64(n)) },
	}
}

// staleGauge is topo_cache_stale_seconds: per cache name, when its outage
// began (zero while it has none), turned into seconds when collected.
type staleGauge struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	since map[string]time.Time
}

func (g *staleGauge) set(name string, since time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.since[name] = since
}

// Describe implements prometheus.Collector.
func (g *staleGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *staleGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for name, since := range g.since {
		v := 0.0
		if !since.IsZero() {
			v = now.Sub(since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, name)
	}
}
