package backendkit

import "context"

// SyncCount turns the sync of a WatchRecursive that returns how many
// events hold every change up to a store revision, and that revision (the
// sync of topo/cache's RevisionSyncWatcher), into one that returns the
// count only (the sync of topo/cache's SyncWatcher), with the same errors.
// Used by etcd2topo and memorytopo, whose WatchRecursiveSync is their
// WatchRecursiveSyncRevision without the revision, and by topo/middleware's
// decorators. The returned func is
// safe for concurrent use if sync is.
func SyncCount(sync func(context.Context) (uint64, int64, error)) func(context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		n, _, err := sync(ctx)
		return n, err
	}
}
