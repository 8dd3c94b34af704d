package etcd2topo

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// progressRetry is how long a sync waits for a progress notification
// before asking etcd for one again (a request sent while the watch was
// being reopened gets no answer).
const progressRetry = 500 * time.Millisecond

// watchSync is how far one WatchRecursive has delivered: every change up
// to rev is among the first sent events of its channel. Its goroutine
// moves it forward after each batch of events it sent, after a re-read
// of a compacted history, and on each progress notification (which etcd
// sends a watch once it has sent every event up to the notified
// revision).
type watchSync struct {
	s     *stream // the watch's (its Conn, key and path)
	mu    sync.Mutex
	rev   int64
	sent  uint64
	moved chan struct{} // closed and replaced when rev moves
	done  chan struct{} // closed when the watch's goroutine ends
}

// advance records that every change up to rev was sent, sent events in
// all. Called by the watch's goroutine only.
func (w *watchSync) advance(rev int64, sent uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = sent
	if rev > w.rev {
		w.rev = rev
		close(w.moved)
		w.moved = make(chan struct{})
	}
}

// sync implements the sync of cache.RevisionSyncWatcher: a count-only
// linearizable Get of the watched key gives the store's revision, then
// it waits until the watch has passed it, asking etcd for a progress
// notification when it has not yet. It returns the number of events sent
// and the revision the watch had passed with them (at least the one read).
func (w *watchSync) sync(ctx context.Context) (uint64, int64, error) {
	resp, err := w.s.c.cli.Get(ctx, w.s.key, clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, w.s.c.convertError(ctx, err, w.s.path)
	}
	target := resp.Header.Revision
	var retry <-chan time.Time
	for {
		w.mu.Lock()
		rev, sent, moved := w.rev, w.sent, w.moved
		w.mu.Unlock()
		if rev >= target {
			return sent, rev, nil
		}
		if retry == nil {
			// The request goes on the watch's gRPC stream (chosen by the
			// metadata of the watch's context); etcd answers once every
			// watch on that stream is up to date.
			if err := w.s.c.cli.RequestProgress(clientv3.WithRequireLeader(w.s.ctx)); err != nil {
				return 0, 0, w.s.c.convertError(ctx, err, w.s.path)
			}
			retry = time.After(progressRetry)
		}
		select {
		case <-moved:
		case <-retry:
			retry = nil
		case <-w.done:
			return 0, 0, backendkit.Wrap(topo.Interrupted, w.s.path, errors.New("watch ended"))
		case <-ctx.Done():
			return 0, 0, w.s.c.convertError(ctx, ctx.Err(), w.s.path)
		}
	}
}

// WatchRecursiveSync is WatchRecursive plus sync, as topo/cache's
// SyncWatcher describes: sync makes one count-only linearizable Get (one
// round trip, no values) for the store's revision; when the watch has
// not passed that revision yet it asks etcd for a progress notification
// on the watch's stream and waits for the watch to pass it (etcd answers
// once every watch on the Conn's stream is up to date). Its errors are
// Get's (Unavailable, Timeout, ...), those of ctx, and Interrupted once
// the watch has ended.
func (c *Conn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	init, out, sync, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return init, out, backendkit.SyncCount(sync), nil
}

// WatchRecursiveSyncRevision is WatchRecursiveSync whose sync also returns
// the etcd revision the watch has passed with its first n events: at least
// the header revision of its count-only Get (topo/cache's
// RevisionSyncWatcher). Same errors.
func (c *Conn) WatchRecursiveSyncRevision(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, int64, error), error) {
	init, out, ws, err := c.watchRecursive(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return init, out, ws.sync, nil
}
