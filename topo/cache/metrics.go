package cache

import "github.com/prometheus/client_golang/prometheus"

// Metrics is a set of Prometheus metrics about Caches, filled through the
// Hooks its Hooks method returns and exported by registering the Metrics
// itself, a prometheus.Collector, with a registry of the caller's choice
// (nothing is registered globally). Every series carries the label cache
// (the name given to Hooks):
//
//	topo_cache_reads_total{op,outcome}  reads by operation (Get, List, ListDir) and outcome (hit, stale, miss, passed)
//	topo_cache_resyncs_total            relists after the store watch ended
//	topo_cache_health                   the current Health (0 healthy, 1 resyncing, 2 stale, 3 over-limit)
//	topo_cache_watchers                 open local watchers
//
// Calls the Caches make on the store are counted by the store Conn's own
// decorators (topo/middleware.Metrics). Safe for concurrent use; one
// Metrics can serve any number of Caches.
type Metrics struct {
	reads    *prometheus.CounterVec
	resyncs  *prometheus.CounterVec
	health   *prometheus.GaugeVec
	watchers *prometheus.GaugeVec
}

// NewMetrics returns an empty set of metrics whose names start with
// namespace ("" for none).
func NewMetrics(namespace string) *Metrics {
	return &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "topo_cache", Name: "reads_total",
			Help: "Cache reads by operation and outcome."}, []string{"cache", "op", "outcome"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "topo_cache", Name: "resyncs_total",
			Help: "Relists after the store watch ended."}, []string{"cache"}),
		health: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "topo_cache", Name: "health",
			Help: "Cache health: 0 healthy, 1 resyncing, 2 stale, 3 over-limit."}, []string{"cache"}),
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "topo_cache", Name: "watchers",
			Help: "Open local watchers."}, []string{"cache"}),
	}
}

// Hooks returns the Hooks that record one Cache's events under the label
// cache=name. Set them as Options.Hooks.
func (m *Metrics) Hooks(name string) Hooks {
	var outcomes [3][4]prometheus.Counter // op (Get, List, ListDir) x Outcome
	for i, op := range []string{"Get", "List", "ListDir"} {
		for o := Hit; o <= Passed; o++ {
			outcomes[i][o] = m.reads.WithLabelValues(name, op, o.String())
		}
	}
	ops := map[string]int{"Get": 0, "List": 1, "ListDir": 2}
	resyncs, health, watchers := m.resyncs.WithLabelValues(name), m.health.WithLabelValues(name), m.watchers.WithLabelValues(name)
	return Hooks{
		OnRead:     func(op string, o Outcome) { outcomes[ops[op]][o].Inc() },
		OnResync:   func(error) { resyncs.Inc() },
		OnHealth:   func(h Health) { health.Set(float64(h)) },
		OnWatchers: func(n int) { watchers.Set(float64(n)) },
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.reads.Describe(ch)
	m.resyncs.Describe(ch)
	m.health.Describe(ch)
	m.watchers.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.reads.Collect(ch)
	m.resyncs.Collect(ch)
	m.health.Collect(ch)
	m.watchers.Collect(ch)
}
