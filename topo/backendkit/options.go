package backendkit

import (
	"strings"
	"time"
)

// OrDefault returns v when it is positive, and def otherwise: how a
// backend's constructor fills the fields of its Options left zero (or set
// negative) with their defaults. etcd2topo, zk2topo and consultopo use it.
func OrDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// SplitAddresses returns the non-empty items, trimmed of spaces, of the
// comma-separated server addresses a Factory's Create is given (nil when
// there is none). etcd2topo and zk2topo use it.
func SplitAddresses(serverAddress string) []string {
	var out []string
	for a := range strings.SplitSeq(serverAddress, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
