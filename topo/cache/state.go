package cache

import "time"

// Health is what a Cache can currently promise.
type Health int

const (
	// Healthy: the store watch runs and the store answers.
	Healthy Health = iota
	// Resyncing: the watch ended and the Cache is listing the prefix again.
	Resyncing
	// Stale: the store cannot be reached; memory holds the last state seen.
	Stale
	// OverLimit: the subtree outgrew Options.MaxBytes; every call goes to
	// the store.
	OverLimit
	// Closed: Close was called; memory answers nothing any more (see
	// Cache.Close).
	Closed
)

// String returns "healthy", "resyncing", "stale", "over-limit" or
// "closed".
func (h Health) String() string {
	switch h {
	case Resyncing:
		return "resyncing"
	case Stale:
		return "stale"
	case OverLimit:
		return "over-limit"
	case Closed:
		return "closed"
	}
	return "healthy"
}

// State is a snapshot of a Cache's condition.
type State struct {
	// Health is the current condition (Closed once Close was called).
	Health Health
	// Since is when Health last changed.
	Since time.Time
	// Confirmed is the last time the store was seen answering (a watch
	// event, a relist, a probe or a successful pass-through call).
	Confirmed time.Time
	// Err is the error that made the Cache leave Healthy (nil when
	// Healthy).
	Err error
	// Files and Bytes are what memory holds (paths plus values, in bytes).
	Files int
	Bytes int64
	// Watchers is the number of open local watchers.
	Watchers int
	// Revision is the store revision memory holds: every change under the
	// prefix committed at or before it is in memory (see Info.Revision).
	// Once OverLimit, memory holds nothing and Revision is the last one it
	// held.
	Revision int64
}

// Info describes where an answer came from.
type Info struct {
	// FromMemory is true for an answer served from memory, false for one
	// read from the store.
	FromMemory bool
	// Stale is true for an answer served from memory while the Cache was
	// not Healthy.
	Stale bool
	// Confirmed is when the store was last seen answering for an answer
	// from memory; the time of the read for one from the store.
	Confirmed time.Time
	// Revision is, for an answer from memory, the store revision it
	// reflects: every change under the Cache's prefix committed at or
	// before Revision is in the answer (later ones may be too: it is a
	// lower bound). It is the highest topo.WatchData.Revision the store
	// watch has passed (its events, and the initial values of each relist)
	// and, on a Conn that is a RevisionSyncWatcher, the revision a
	// Consistent Get's barrier read; so it never decreases, across relists
	// too, unless the store lost its history (a Consul agent that lost its
	// state starts its indexes again): when a new store watch's first
	// revision is below it, it is 0 until the store's revisions reach the
	// highest one from before. It is 0 when the backend reports no revisions (ZooKeeper's
	// WatchRecursive), until the watch has passed one (a relist of an
	// empty prefix brings none), and for an answer from the store (its
	// read says nothing about a revision). Per backend: an etcd revision,
	// a Consul X-Consul-Index (the prefix's index, which writes elsewhere
	// in the KV store do not move), memorytopo's store revision (a file's
	// Version is the revision that wrote it).
	Revision int64
}
