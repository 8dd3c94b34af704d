package etcd2topo

import (
	"cmp"
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// WaitGone implements claims.Driver: it returns once e is gone from q or
// rewritten. A waiter waits on its predecessor only, so a handover wakes
// one waiter and a joiner none. With a view of q, or another waiter in q,
// it waits in the view; otherwise it watches e's key from the current
// revision, then reads it. A watch etcd ends is opened again, 20 ms to
// 1 s apart.
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	c := d.c
	prefix := c.queuePrefix(q)
	c.mu.Lock()
	c.waiting[prefix]++
	crowd := c.waiting[prefix] > 1 || c.views[prefix] != nil
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.waiting[prefix]--; c.waiting[prefix] == 0 {
			delete(c.waiting, prefix)
		}
		c.mu.Unlock()
	}()
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		var err error
		if crowd {
			var v *queueView
			if v, err = c.openView(ctx, q); err == nil {
				err = v.at(ctx, c, e, func() bool { // e is gone or rewritten
					kv := v.entries[e.Key]
					return kv == nil || tokenOf(q, kv) != e.Token
				})
				c.closeView(v)
			}
		} else {
			err = d.waitGoneOnce(ctx, q, e)
		}
		if !errors.Is(err, errRewatch) {
			return err
		}
		if !c.sleep(ctx, backoff) { // ctx or the Conn ended
			return cmp.Or(ctx.Err(), topo.NewError(topo.Closed, q.Path))
		}
	}
}

// sleep waits d; false at once when ctx or the Conn ends first.
func (c *Conn) sleep(ctx context.Context, d time.Duration) bool {
	lctx, cancel := backendkit.Linked(ctx, c.ctx)
	defer cancel()
	return backendkit.Sleep(lctx, d)
}

func (d driver) waitGoneOnce(ctx context.Context, q claims.Queue, e claims.Entry) error {
	c := d.c
	wctx, cancel := c.watchContext(ctx)
	defer cancel()
	wch := c.cli.Watch(wctx, e.Key, clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, wch, q.Path); err != nil {
		return err
	}
	resp, err := c.cli.Get(ctx, e.Key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 || tokenOf(q, resp.Kvs[0]) != e.Token {
		return nil
	}
	readRev := resp.Header.Revision
	for {
		wr, ok := <-wch
		if !ok || wr.Canceled || wr.Err() != nil {
			return c.watchEnded(ctx, wr.Err(), q.Path)
		}
		for _, ev := range wr.Events {
			// Events up to the read's revision are history it shows (a
			// deletion's event carries the deletion's revision).
			if ev.Kv.ModRevision > readRev && (ev.Type == mvccpb.DELETE || tokenOf(q, ev.Kv) != e.Token) {
				return nil
			}
		}
	}
}

// watchContext returns a context for watches for ctx: it requires a
// leader and ends with ctx, the Conn, or cancel.
func (c *Conn) watchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return backendkit.Linked(clientv3.WithRequireLeader(ctx), c.ctx)
}

// errRewatch: the watch ended; a new one may do.
var errRewatch = errors.New("etcd2topo: watch ended, watching again")

func (c *Conn) watchCreated(ctx context.Context, wch clientv3.WatchChan, path string) error {
	wr, ok := <-wch
	if !ok || wr.Canceled || wr.Err() != nil || !wr.Created {
		return c.watchEnded(ctx, wr.Err(), path)
	}
	return nil
}

// watchEnded is the error of a watch ended with err: ctx's, Closed,
// PermissionDenied, or errRewatch.
func (c *Conn) watchEnded(ctx context.Context, err error, path string) error {
	if ctx.Err() != nil {
		return backendkit.FromContext(ctx, path)
	}
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	if isPermanent(err) {
		return backendkit.Wrap(topo.PermissionDenied, path, err)
	}
	return errRewatch
}
