package etcd2topo

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// WatchFromRevision calls fn with every change of file p (with prefix,
// of every file under p) from revision rev on, history then live, until
// ctx ends (nil) or fn fails (its error). Entries are left out. It fails
// with Compacted (wrapping *backendkit.CompactedError) when rev was
// compacted, PermissionDenied when the keys may not be read, and, when
// the watch breaks, Unavailable with next, the revision to resume from.
// Close ends it with Interrupted; a closed Conn fails with Closed. Safe
// for concurrent use.
func (c *Conn) WatchFromRevision(ctx context.Context, p string, prefix bool, rev int64, fn func(backendkit.RevisionEvent) error) (next int64, err error) {
	if err := c.closedErr("/" + p); err != nil {
		return rev, err
	}
	key := c.key(p)
	next = rev
	wctx, cancel := c.watchContext(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(next)}
	if prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	var werr error
	for wr := range c.cli.Watch(wctx, key, opts...) {
		if wr.CompactRevision != 0 {
			return next, backendkit.Wrap(topo.Compacted, "/"+p, &backendkit.CompactedError{Revision: next, Oldest: wr.CompactRevision})
		}
		if werr = wr.Err(); werr != nil {
			break
		}
		for _, ev := range wr.Events {
			rel := c.rel(ev.Kv.Key)
			next = ev.Kv.ModRevision + 1
			if topo.IsReserved(rel) {
				continue
			}
			re := backendkit.RevisionEvent{Path: rel, Revision: ev.Kv.ModRevision}
			if ev.Type == mvccpb.DELETE {
				re.Deleted = true
			} else {
				re.Value = ev.Kv.Value
			}
			if err := fn(re); err != nil {
				return next, err
			}
		}
	}
	if ctx.Err() != nil {
		return next, nil
	}
	if c.isClosed() {
		return next, backendkit.Wrap(topo.Interrupted, "/"+p, errors.New("connection closed"))
	}
	if isPermanent(werr) {
		return next, backendkit.Wrap(topo.PermissionDenied, "/"+p, werr)
	}
	if werr == nil {
		werr = errors.New("the watch channel closed")
	}
	return next, backendkit.Wrap(topo.Unavailable, "/"+p, werr)
}
