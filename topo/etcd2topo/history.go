package etcd2topo

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// WatchFromRevision calls fn with every change of the file p (or, with
// prefix, of every file whose path starts with p) from etcd's history,
// from revision rev on, then with the live changes, until ctx ends (nil)
// or fn returns an error (returned as is). Lock and election entries are
// left out. It fails with Compacted (wrapping a
// *backendkit.CompactedError) when revision rev was compacted, and
// with PermissionDenied when the user may not read the keys. When the
// watch breaks (no leader, a member gone) it returns Unavailable with
// next, the revision to resume from (the one after the last change
// reported). Close ends it with Interrupted; on a closed Conn it fails
// with Closed. Safe for concurrent use.
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
			rel := strings.TrimPrefix(string(ev.Kv.Key), c.rootPrefix)
			next = ev.Kv.ModRevision + 1
			if topo.IsReserved(rel) {
				continue // lock and election entries are not files
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
	if isPermanent(werr) { // any of etcd's auth refusals (authErrors)
		return next, backendkit.Wrap(topo.PermissionDenied, "/"+p, werr)
	}
	if werr == nil {
		werr = errors.New("the watch channel closed")
	}
	return next, backendkit.Wrap(topo.Unavailable, "/"+p, werr)
}
