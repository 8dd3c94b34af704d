package middleware

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topokit/topokit/topo"
)

// Metrics is a set of Prometheus metrics about topo calls, filled by the
// decorator its Middleware returns and exported by registering the
// Metrics itself, a prometheus.Collector, with a registry of the caller's
// choice (the library never registers anything globally). Every metric
// carries the labels backend (the factory name) and cell:
//
//	topo_calls_total{op,code}           calls by operation and topo error code ("OK" on success)
//	topo_call_duration_seconds{op}      call latency histogram (seconds)
//	topo_calls_in_flight{op}            calls under way
//	topo_locks_held                     locks held through the decorated connections
//	topo_lock_wait_seconds              time from a lock call to holding the lock (seconds)
//	topo_lock_hold_seconds{end}         time a lock was held (seconds), by how it ended: "unlock" or the error code
//	                                    ("LockLost" when the store dropped it, "Closed" when its Conn was closed,
//	                                    counted when its Done closes, whether or not the holder calls Unlock)
//	topo_watches_active{op}             open Watch / WatchRecursive channels
//	topo_watch_restarts_total{op}       watches started on a path whose previous watch on the same connection ended with an error other than Interrupted
//	topo_leadership_held{election}      1 while this process leads the election, else 0
//	topo_leadership_changes_total{election}  leadership terms gained or lost by this process
//
// The topo_cache_* series of read caches (topo/cache), labelled cache
// instead, are fed by the hooks of CacheHooks.
//
// A Metrics is safe for concurrent use and can decorate any number of
// connections, cells and Servers at once.
type Metrics struct {
	calls        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	locksHeld    *prometheus.GaugeVec
	lockWait     *prometheus.HistogramVec
	lockHold     *prometheus.HistogramVec
	watches      *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	leading      *prometheus.GaugeVec
	leaderChange *prometheus.CounterVec
	cache        cacheMetrics
}

// MetricsOptions tune NewMetrics. The zero value is usable.
type MetricsOptions struct {
	// Namespace prefixes every metric name ("myapp" gives
	// myapp_topo_calls_total). Empty means no prefix.
	Namespace string
	// Buckets are the latency histograms' buckets, in seconds;
	// prometheus.DefBuckets when empty.
	Buckets []float64
}

// NewMetrics returns an empty set of metrics. Register it (it is a
// prometheus.Collector) and decorate connections with its Middleware.
func NewMetrics(opts MetricsOptions) *Metrics {
	b := opts.Buckets
	if len(b) == 0 {
		b = prometheus.DefBuckets
	}
	ns := opts.Namespace
	base := []string{"backend", "cell"}
	with := func(l ...string) []string { return append(append([]string{}, base...), l...) }
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "topo", Name: "calls_total",
			Help: "topo calls by operation and result code."}, with("op", "code")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "topo", Name: "call_duration_seconds",
			Help: "Latency of topo calls, in seconds.", Buckets: b}, with("op")),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo", Name: "calls_in_flight",
			Help: "topo calls under way."}, with("op")),
		locksHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo", Name: "locks_held",
			Help: "Locks currently held."}, base),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "topo", Name: "lock_wait_seconds",
			Help: "Time from a lock call to holding the lock, in seconds.", Buckets: b}, base),
		lockHold: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "topo", Name: "lock_hold_seconds",
			Help: "Time a lock was held, in seconds, by how it ended.", Buckets: b}, with("end")),
		watches: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo", Name: "watches_active",
			Help: "Open watches."}, with("op")),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "topo", Name: "watch_restarts_total",
			Help: "Watches restarted after their previous watch on the same path ended with an error."}, with("op")),
		leading: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: "topo", Name: "leadership_held",
			Help: "1 while this process leads the election."}, with("election")),
		leaderChange: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "topo", Name: "leadership_changes_total",
			Help: "Leadership terms gained or lost by this process."}, with("election")),
		cache: newCacheMetrics(ns),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.calls, m.duration, m.inFlight, m.locksHeld, m.lockWait, m.lockHold,
		m.watches, m.restarts, m.leading, m.leaderChange}, m.cache.collectors()...)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Middleware returns the decorator that records calls into m.
func (m *Metrics) Middleware() topo.Middleware {
	return Middleware(func(info topo.ConnInfo) Hooks {
		b, cell := info.Implementation, info.Cell
		failed := newPathSet()
		ops := &opCache{m: m, backend: b, cell: cell}
		return Hooks{
			Around: func(ctx context.Context, c Call, next func(context.Context) error) error {
				om := ops.get(c.Op)
				om.inFlight.Inc()
				start := time.Now()
				err := next(ctx)
				om.inFlight.Dec()
				om.duration.Observe(time.Since(start).Seconds())
				om.counter(err).Inc()
				return err
			},
			OnLockAcquired: func(_ Call, wait time.Duration) {
				m.locksHeld.WithLabelValues(b, cell).Inc()
				m.lockWait.WithLabelValues(b, cell).Observe(wait.Seconds())
			},
			OnLockReleased: func(_ Call, held time.Duration, err error) {
				m.locksHeld.WithLabelValues(b, cell).Dec()
				end := "unlock"
				if err != nil {
					end = codeLabel(err)
				}
				m.lockHold.WithLabelValues(b, cell, end).Observe(held.Seconds())
			},
			OnWatchStart: func(c Call) {
				m.watches.WithLabelValues(b, cell, string(c.Op)).Inc()
				if failed.take(string(c.Op) + "\x00" + c.Path) {
					m.restarts.WithLabelValues(b, cell, string(c.Op)).Inc()
				}
			},
			OnWatchEnd: func(c Call, err error) {
				m.watches.WithLabelValues(b, cell, string(c.Op)).Dec()
				if err != nil && !topo.IsErrType(err, topo.Interrupted) && !topo.IsErrType(err, topo.NoNode) {
					failed.add(string(c.Op) + "\x00" + c.Path)
				}
			},
			OnLeadership: func(c Call, lead bool) {
				v := 0.0
				if lead {
					v = 1
				}
				m.leading.WithLabelValues(b, cell, c.Path).Set(v)
				m.leaderChange.WithLabelValues(b, cell, c.Path).Inc()
			},
		}
	})
}

// opCache holds one connection's metric series per operation, so that a
// call does not look its series up by label values (a hash of every label
// and a map lookup each) in each of the three metrics it records. The
// series are created on first use, as WithLabelValues would.
type opCache struct {
	m             *Metrics
	backend, cell string
	ops           sync.Map // Op -> *opMetrics
}

// opMetrics are one operation's series on one connection.
type opMetrics struct {
	inFlight prometheus.Gauge
	duration prometheus.Observer
	// calls holds the calls_total series by result: index 0 for success,
	// the code for a topo error code, len-1 for an error without one.
	calls [numCodeSlots]atomic.Pointer[prometheus.Counter]
	m     *Metrics
	key   [3]string // backend, cell, op
}

// numCodeSlots covers success, the topo.ErrorCode values below it that
// codeLabel names, and "Unknown".
const numCodeSlots = 32

func (o *opCache) get(op Op) *opMetrics {
	if v, ok := o.ops.Load(op); ok {
		return v.(*opMetrics)
	}
	om := &opMetrics{
		inFlight: o.m.inFlight.WithLabelValues(o.backend, o.cell, string(op)),
		duration: o.m.duration.WithLabelValues(o.backend, o.cell, string(op)),
		m:        o.m,
		key:      [3]string{o.backend, o.cell, string(op)},
	}
	v, _ := o.ops.LoadOrStore(op, om)
	return v.(*opMetrics)
}

// counter returns the calls_total series of a call that returned err.
func (om *opMetrics) counter(err error) prometheus.Counter {
	i := 0
	if err != nil {
		c := topo.CodeOf(err)
		_, named := codeIdents[c]
		switch {
		case !named:
			i = numCodeSlots - 1 // "Unknown"
		case c > 0 && int(c) < numCodeSlots-1:
			i = int(c)
		default: // a code past the slots: looked up each time
			return om.m.calls.WithLabelValues(om.key[0], om.key[1], om.key[2], codeLabel(err))
		}
	}
	if p := om.calls[i].Load(); p != nil {
		return *p
	}
	c := om.m.calls.WithLabelValues(om.key[0], om.key[1], om.key[2], codeLabel(err))
	om.calls[i].Store(&c)
	return c
}
