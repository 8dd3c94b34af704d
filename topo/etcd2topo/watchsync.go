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

// progressRetry is how long sync waits for a progress notification before
// asking again (a request sent while the watch reopened gets no answer).
const progressRetry = 500 * time.Millisecond

// watchSync is how far one WatchRecursive has delivered: every change up
// to rev is among its first sent events. Its goroutine moves it after
// each batch, re-read and progress notification.
type watchSync struct {
	s     *stream // the watch's (its Conn, key and path)
	mu    sync.Mutex
	rev   int64
	sent  uint64
	moved chan struct{} // closed and replaced when rev moves
	done  chan struct{} // closed when the watch's goroutine ends
}

// advance records that every change up to rev is among the first sent
// events. Called by the watch's goroutine only.
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

// sync is WatchRecursiveSyncRevision's sync.
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
			// On the watch's gRPC stream (its context's metadata picks it).
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
// SyncWatcher describes: sync reads the store's revision with one
// count-only Get and, until the watch passes it, asks etcd for a progress
// notification (answered once every watch on the Conn's stream is up to
// date). Its errors are the Get's, ctx's, and Interrupted once the watch
// ended.
func (c *Conn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	init, out, sync, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return init, out, backendkit.SyncCount(sync), nil
}
