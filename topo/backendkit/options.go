package backendkit

import "time"

// OrDefault returns v when it is positive, and def otherwise: how a
// backend's constructor fills the fields of its Options left zero (or set
// negative) with their defaults. etcd2topo, zk2topo and consultopo use it.
func OrDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
