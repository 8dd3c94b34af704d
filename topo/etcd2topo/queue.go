package etcd2topo

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The queue: waiting for the entries ahead of ours to go.
//
// Our entry holds the lock (or leads) once no entry of its queue (see
// queueEntry) has a lower ModRevision than ours, the rule Vitess's waiters
// follow too. An entry ahead of ours stops blocking us when it is deleted,
// or when it is rewritten (its ModRevision moves past ours; without a
// lease it is no entry at all). Every read behind the decision is a
// linearizable one (etcd's default; the package never asks for
// serializable reads).

// wait waits until none of cl's older entries is left. It first opens a
// watch on the queue at the current revision (so that etcd serves it from
// its synced watcher group, which delivers events as they are applied; a
// watch at a past revision waits for a catch-up pass that runs every
// 100 ms), then reads the entries older than ours, then crosses them off
// as their deletions or rewrites arrive. The watch starts at the current
// revision of the member serving it, which may lag the member that
// answered our claim, so it can replay writes at or below the read's
// revision: the put of our own entry, or the deletion of an earlier entry
// of a name that was put again before the read (names are reused, see
// claim.go). The read accounts for all of those, so events at or below
// its revision are skipped; none after it is missed, since the watch was
// confirmed, at a revision no later than the read's, before the read
// began. It returns LockLost if our own entry is deleted
// or rewritten, or its lease is lost (the Conn's proven-until time for it
// passed, see SafetyMargin), PermissionDenied if etcd refuses the watch or
// the read, and the context's error (Timeout, Interrupted) or Closed.
func (cl *claim) wait(ctx context.Context) error {
	backoff := 20 * time.Millisecond
	for {
		err := cl.waitOnce(ctx)
		if err == nil || !errors.Is(err, errRewatch) {
			return err
		}
		// The watch broke (no leader, member gone, ...): start over after a
		// pause, which keeps a persistent failure from becoming a busy loop.
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return backendkit.FromContext(ctx, cl.path)
		case <-cl.c.ctx.Done():
			t.Stop()
			return topo.NewError(topo.Closed, cl.path)
		case <-cl.lease.done:
			t.Stop()
			return cl.c.ownEntryGone(cl.path)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// errRewatch tells wait that the watch ended for a reason that a new watch
// may fix.
var errRewatch = errors.New("etcd2topo: watch ended, watching again")

func (cl *claim) waitOnce(callerCtx context.Context) error {
	c := cl.c
	// Every request of the wait ends with the lease, too.
	ctx, bcancel := cl.lease.bind(callerCtx)
	defer bcancel()
	err := cl.waitBound(ctx)
	if err != nil && cl.lease.lost() && callerCtx.Err() == nil {
		return c.ownEntryGone(cl.path)
	}
	return err
}

func (cl *claim) waitBound(ctx context.Context) error {
	c := cl.c
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	wch := c.cli.Watch(wctx, cl.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, wch, cl.path); err != nil {
		return err
	}
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpGet(cl.prefix, clientv3.WithPrefix(), clientv3.WithMaxModRev(cl.rev-1)),
		clientv3.OpGet(cl.key),
	).Commit()
	if err != nil {
		return c.convertError(ctx, err, cl.path)
	}
	if !cl.ours(resp.Responses[1].GetResponseRange().Kvs) {
		return c.ownEntryGone(cl.path)
	}
	older := olderEntries(resp.Responses[0].GetResponseRange().Kvs, cl.prefix, cl.key, cl.rev)
	readRev := resp.Header.Revision
	for len(older) > 0 {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-wch:
		case <-cl.lease.done:
			return c.ownEntryGone(cl.path)
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			return c.watchEnded(ctx, wr.Err(), cl.path)
		}
		for _, ev := range wr.Events {
			// A deletion's event carries the deletion's revision.
			if ev.Kv.ModRevision <= readRev {
				continue // history the read already reflects
			}
			k := string(ev.Kv.Key)
			if k == cl.key {
				// Deleted, or rewritten by someone: either way we lost our
				// place in the queue.
				return c.ownEntryGone(cl.path)
			}
			// Deleted, or rewritten (which moves it behind us: its
			// ModRevision is now past ours): it no longer blocks us.
			delete(older, k)
		}
	}
	if cl.lease.lost() {
		return c.ownEntryGone(cl.path)
	}
	return nil
}

// ours reports whether kvs (a read of our entry's key) shows our entry:
// present, never rewritten (ModRevision and CreateRevision are the
// revision we put it at) and on our lease.
func (cl *claim) ours(kvs []*mvccpb.KeyValue) bool {
	return len(kvs) == 1 && kvs[0].CreateRevision == cl.rev && kvs[0].ModRevision == cl.rev &&
		kvs[0].Lease == int64(cl.lease.id)
}

// ownEntryGone returns the error for a wait or hold whose own entry or
// lease is gone: Closed when Close revoked its lease, LockLost otherwise.
func (c *Conn) ownEntryGone(path string) error {
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return topo.NewError(topo.LockLost, path)
}

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
