package etcd2topo

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Waiting for an entry to go (the driver's WaitGone): a waiter waits for
// its predecessor only, so a handover wakes the one waiter behind the
// holder and an entry joining the queue wakes nobody.

// WaitGone implements claims.Driver: it returns once e is gone from q, or
// rewritten. In the Conn's view of q when the Conn keeps one or has
// another waiter in q; otherwise it opens a watch on e's key at the
// current revision (which etcd serves from its synced watcher group, as
// events are applied), then reads the key: gone or rewritten (no longer
// e) it returns at once, otherwise at the first event of the key after
// the read. A watch etcd ends (no leader, member gone, compacted) is
// opened again, 20 ms to 1 s apart.
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
	backoff := 20 * time.Millisecond
	for {
		var err error
		if crowd {
			var v *queueView
			if v, err = c.openView(ctx, q); err == nil {
				err = v.waitGone(ctx, c, e)
				c.closeView(v)
			}
		} else {
			err = d.waitGoneOnce(ctx, q, e)
		}
		if !errors.Is(err, errRewatch) {
			return err
		}
		if !c.sleep(ctx, backoff) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errConnClosed
		}
		backoff = min(2*backoff, time.Second)
	}
}

// sleep waits d; it returns false at once when ctx ends or the Conn
// closes first.
func (c *Conn) sleep(ctx context.Context, d time.Duration) bool {
	lctx, cancel := backendkit.Linked(ctx, c.ctx)
	defer cancel()
	return backendkit.Sleep(lctx, d)
}

// errConnClosed is what driver requests return once the Conn is closed.
var errConnClosed = errors.New("etcd2topo: the Conn is closed")

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
		return nil // gone, or rewritten (behind us) already
	}
	readRev := resp.Header.Revision
	for {
		wr, ok := <-wch
		if !ok || wr.Canceled || wr.Err() != nil {
			return c.watchEnded(ctx, wr.Err(), q.Path)
		}
		for _, ev := range wr.Events {
			// A deletion's event carries the deletion's revision; events
			// at or below the read's revision are history it reflects.
			if ev.Kv.ModRevision > readRev && (ev.Type == mvccpb.DELETE || tokenOf(q, ev.Kv) != e.Token) {
				return nil
			}
		}
	}
}

// watchContext returns a context for watches made for ctx: it asks for a
// member with a leader and ends with ctx, with the Conn, or at cancel.
func (c *Conn) watchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return backendkit.Linked(clientv3.WithRequireLeader(ctx), c.ctx)
}

// errRewatch tells a wait that the watch ended for a reason that a new
// watch may fix.
var errRewatch = errors.New("etcd2topo: watch ended, watching again")

// watchCreated waits for the created notification of a watch opened with
// WithCreatedNotify.
func (c *Conn) watchCreated(ctx context.Context, wch clientv3.WatchChan, path string) error {
	wr, ok := <-wch
	if !ok || wr.Canceled || wr.Err() != nil || !wr.Created {
		return c.watchEnded(ctx, wr.Err(), path)
	}
	return nil
}

// watchEnded returns the error for a watch channel that closed or was
// cancelled with err: the context's error, Closed, PermissionDenied when
// etcd refused the watch for good, or errRewatch.
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
