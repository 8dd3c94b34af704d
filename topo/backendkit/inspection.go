package backendkit

import "fmt"

// MetaField is one item of what a store itself keeps about a path, beyond
// the topology interface's version, in the store's own terms (etcd's
// revisions, ZooKeeper's zxids and ACL, Consul's indexes): Name is its
// snake_case name, Value an int64, a uint64 (Consul's flags), a string or
// a []string. Backends return
// them from a StoreMeta method (see topo/inspect.StoreMeta).
type MetaField struct {
	Name  string
	Value any
}

// RevisionEvent is one change of a file in a store's history, as a
// backend that keeps one reports it (etcd2topo's WatchFromRevision).
type RevisionEvent struct {
	// Path is the file's canonical path.
	Path string
	// Revision is the store's revision of the change (the file's version
	// after it, for a write).
	Revision int64
	// Value is the file's contents after a write; Deleted is set for a
	// deletion.
	Value   []byte
	Deleted bool
}

// CompactedError is the cause of a Compacted error of a backend that
// keeps a history (etcd2topo's WatchFromRevision): the revision asked for
// is older than the oldest the store still has.
type CompactedError struct {
	Revision, Oldest int64
}

// Error names both revisions.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("revision %d was compacted: the oldest revision the store still has is %d", e.Revision, e.Oldest)
}
