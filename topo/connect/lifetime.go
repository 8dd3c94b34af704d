package connect

import (
	"time"

	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/zk2topo"
)

// LockLifetime says how long a lock taken with LockWithTTL lives on after
// its holder stops renewing it (a killed process), on one backend.
type LockLifetime struct {
	// Min and Max bound that time: the lock lapses between Min and Max
	// after the last renewal (Min == Max where the store is exact).
	Min, Max time.Duration
	// Session is set when the store ties the lock to the client's session
	// rather than to the ttl (ZooKeeper): Min and Max are then the session
	// timeout asked of the server, which may clamp it.
	Session bool
	// Floor and Ceiling are the store's bounds of a session's TTL (Consul:
	// consultopo.MinSessionTTL and MaxSessionTTL), 0 where it has none.
	Floor, Ceiling time.Duration
}

// LockLifetimeOf returns the lifetime of a lock taken with ttl on the
// bundled backend impl: etcd leases last whole seconds; ZooKeeper ties
// every lock to the session, whatever the ttl; Consul rounds a session's
// TTL up to whole seconds and into [MinSessionTTL, MaxSessionTTL], and
// invalidates a session up to twice its TTL after the last renewal. It
// reports false for other implementations, whose behaviour it does not
// know.
func LockLifetimeOf(impl string, ttl time.Duration) (LockLifetime, bool) {
	secs := (ttl + time.Second - 1).Truncate(time.Second)
	switch impl {
	case etcd2topo.FactoryName:
		return LockLifetime{Min: secs, Max: secs}, true
	case zk2topo.FactoryName:
		return LockLifetime{Min: zk2topo.DefaultSessionTimeout, Max: zk2topo.DefaultSessionTimeout, Session: true}, true
	case consultopo.FactoryName:
		eff := min(max(secs, consultopo.MinSessionTTL), consultopo.MaxSessionTTL)
		return LockLifetime{Min: eff, Max: 2 * eff, Floor: consultopo.MinSessionTTL, Ceiling: consultopo.MaxSessionTTL}, true
	}
	return LockLifetime{}, false
}
