package cache

import (
	"context"
	"time"

	"github.com/topokit/topokit/topo"
)

// SyncWatcher is an optional interface of a topo.Conn: a WatchRecursive
// that can tell when it has delivered every change committed before a
// point in time. A Cache whose Conn implements it answers Consistent Gets
// from memory after such a barrier (one cheap store read, then a wait for
// its watch) instead of reading the file through; other Conns keep
// reading through. The Cache looks for it on the Conn it is given only,
// not through wrappers: a decorator that forwards WatchRecursive must
// implement it too for its Cache to use it (topo/middleware's do).
//
// Implemented by etcd2topo (a count-only linearizable Get gives the
// store revision; the watch passes it with its events or an etcd progress
// notification) and memorytopo (every write is queued to its watchers
// before it returns). zk2topo and consultopo do not implement it (see
// docs/cache.md).
type SyncWatcher interface {
	// WatchRecursiveSync is WatchRecursive (same arguments, initial
	// values, events and errors) plus sync. sync(ctx) reads the store's
	// current revision and returns n once every change, under prefix,
	// committed at or before that revision is among the first n events
	// sent on the channel (the initial values are not events). A change
	// may be coalesced with a later one of the same file, and is then
	// among the first n as that later event. sync costs one read of the
	// store when the watch has already passed the revision; otherwise it
	// waits for the watch. It returns the store's error (Unavailable,
	// Timeout, ...) when the revision cannot be read, the error of ctx
	// (Timeout, Interrupted) when ctx ends first, and Interrupted once the
	// watch has ended. sync is safe for concurrent use.
	WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error)
}

// RevisionSyncWatcher is an optional interface of a topo.Conn: a
// SyncWatcher whose sync also returns the store revision its barrier
// reached, so that a Consistent Get answered from memory reports in
// Info.Revision at least the store's revision when the call began (writes
// elsewhere in the store included), not only the highest revision the
// watch's events carried. The Cache prefers it to SyncWatcher, and looks
// for it on the Conn it is given only, as for SyncWatcher.
//
// Implemented by etcd2topo (the revision of the count-only Get, or the
// higher one the watch has passed) and memorytopo (the store's revision,
// read under the store's lock).
type RevisionSyncWatcher interface {
	SyncWatcher
	// WatchRecursiveSyncRevision is WatchRecursiveSync whose sync also
	// returns rev, a store revision at least the one it read: every
	// change under prefix committed at or before rev is among the first
	// n events (in the sense of topo.WatchData.Revision). Same errors.
	WatchRecursiveSyncRevision(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (n uint64, rev int64, err error), error)
}

// syncFunc is a store watch's sync: the first n events hold every change
// committed at or before the store revision it read; rev is that revision,
// or 0 when the Conn does not say it (a SyncWatcher only).
type syncFunc func(context.Context) (n uint64, rev int64, err error)

// watch starts the store watch of the prefix, with its sync when the
// Conn has one (nil otherwise), and end, which ends that watch alone
// (its channel then closes; see catchUp).
func (c *Cache) watch() ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, syncFunc, context.CancelFunc, error) {
	ctx, end := context.WithCancel(c.ctx)
	init, ch, sync, err := c.watchCtx(ctx)
	if err != nil {
		end()
		return nil, nil, nil, nil, err
	}
	return init, ch, sync, end, nil
}

func (c *Cache) watchCtx(ctx context.Context) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, syncFunc, error) {
	if sw, ok := c.conn.(RevisionSyncWatcher); ok {
		return sw.WatchRecursiveSyncRevision(ctx, c.prefix)
	}
	if sw, ok := c.conn.(SyncWatcher); ok {
		init, ch, sync, err := sw.WatchRecursiveSync(ctx, c.prefix)
		if sync == nil {
			return init, ch, nil, err
		}
		return init, ch, func(ctx context.Context) (uint64, int64, error) {
			n, err := sync(ctx)
			return n, 0, err
		}, err
	}
	init, ch, err := c.conn.WatchRecursive(ctx, c.prefix)
	return init, ch, nil, err
}

// barrierWait bounds a barrier: one not passed by then (a store watch
// held up, etcd deferring its progress notification behind another watch
// of the Conn still catching up) gives way to a read through the store.
const barrierWait = time.Second

// barrier waits until memory holds every change committed before the
// call (and raises c.rev to the revision the barrier read, when sync says
// it), and returns the generation of the watch that delivered them; ok
// is false when it cannot tell (no sync, the Cache not Healthy, the store
// or ctx failing, the watch replaced meanwhile, barrierWait passed): then
// the store must answer.
func (c *Cache) barrier(ctx context.Context) (gen uint64, ok bool) {
	c.mu.RLock()
	sync, gen := c.sync, c.gen
	ok = sync != nil && c.health == Healthy && !c.closed
	c.mu.RUnlock()
	if !ok {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, barrierWait)
	defer cancel()
	n, rev, err := sync(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.noteStore(err)
		}
		return 0, false
	}
	for {
		c.mu.RLock()
		moved := c.gen != gen || c.health != Healthy || c.closed
		passed := c.received >= n
		behind := rev > c.rev
		changed := c.changed
		c.mu.RUnlock()
		switch {
		case moved:
			return 0, false
		case passed && behind:
			c.mu.Lock()
			if c.gen == gen {
				c.passRev(rev, false)
			}
			c.mu.Unlock()
			return gen, true
		case passed:
			return gen, true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, false
		case <-c.ctx.Done():
			return 0, false
		}
	}
}
