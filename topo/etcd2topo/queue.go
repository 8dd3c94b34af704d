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
//
// A waiter watches only its predecessor, the entry just ahead of it (the
// greatest ModRevision below ours), and its own entry: a handover (the
// holder's entry deleted) wakes the one waiter behind the holder, and an
// entry joining the queue wakes nobody. Entries older than ours only ever
// leave the queue (a new entry gets a later revision), so once the
// predecessor goes the waiter reads the queue again, as of one revision,
// for the entry now just ahead of it, and holds when none is left. Each
// handover thus costs the same few requests whatever the queue's length.

// predPage is how many entries older than ours one predecessor read asks
// for, newest first: the first queue entry among them is the predecessor.
// Only keys that are no entries (no lease, or deeper keys: files other
// tools wrote there) come before it, so one page nearly always answers;
// otherwise the whole older part of the queue is read.
const predPage = 4

// wait waits until none of cl's older entries is left. It first opens a
// watch on our own entry at the current revision (so that etcd serves it
// from its synced watcher group, which delivers events as they are
// applied; a watch at a past revision waits for a catch-up pass that runs
// every 100 ms). Then, for each predecessor in turn, it opens a watch on
// the predecessor's key at the current revision and reads, in one
// transaction, that key and our own; the predecessor still there
// unchanged, it waits for an event of its key later than the read. The
// watches start at the current revision of the member serving them, which
// may lag the member that answered our claim, so they can replay writes
// at or below the read's revision: the put of our own entry, or the
// deletion of an earlier entry of a name that was put again before the
// read (names are reused, see claim.go). The read accounts for all of
// those, so events at or below its revision are skipped; none after it is
// missed, since each watch was confirmed, at a revision no later than the
// read's, before the read began. With the predecessor gone it reads,
// again in one transaction, the entries older than ours (the newest few,
// see predPage) and our own entry: the newest older entry is the next
// predecessor; with none, our entry holds. It returns LockLost if our own
// entry is deleted or rewritten, or its lease is lost (the Conn's
// proven-until time for it passed, see SafetyMargin), PermissionDenied if
// etcd refuses a watch or a read, and the context's error (Timeout,
// Interrupted) or Closed.
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
	own := c.cli.Watch(wctx, cl.key, clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, own, cl.path); err != nil {
		return err
	}
	// The predecessor the claim's own read found, if any: it is checked
	// like any other (it may have gone since).
	pred := cl.pred
	cl.pred = nil
	for {
		if pred == nil {
			var err error
			if pred, err = cl.predecessor(ctx); err != nil {
				return err
			}
			if pred == nil {
				break
			}
		}
		pctx, pcancel := context.WithCancel(wctx)
		err := cl.waitGone(ctx, own, c.cli.Watch(pctx, string(pred.Key), clientv3.WithCreatedNotify()), pred)
		pcancel()
		if err != nil {
			return err
		}
		pred = nil
	}
	if cl.lease.lost() {
		return c.ownEntryGone(cl.path)
	}
	return nil
}

// predecessor reads, in one transaction, the newest entries older than
// ours and our own entry, and returns the newest older entry (nil when
// none is left); LockLost when our entry is no longer ours.
func (cl *claim) predecessor(ctx context.Context) (*mvccpb.KeyValue, error) {
	c := cl.c
	limit := int64(predPage)
	for {
		resp, err := c.cli.Txn(ctx).Then(
			clientv3.OpGet(cl.prefix, clientv3.WithPrefix(), clientv3.WithMaxModRev(cl.rev-1),
				clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(limit)),
			clientv3.OpGet(cl.key),
		).Commit()
		if err != nil {
			return nil, c.convertError(ctx, err, cl.path)
		}
		if !cl.ours(resp.Responses[1].GetResponseRange().Kvs) {
			return nil, c.ownEntryGone(cl.path)
		}
		rr := resp.Responses[0].GetResponseRange()
		if kv := newestOlder(rr.Kvs, cl.prefix, cl.key, cl.rev); kv != nil || !rr.More {
			return kv, nil
		}
		limit = 0 // a page of keys that are no entries: read them all
	}
}

// newestOlder returns the entry of queue prefix in kvs with the greatest
// ModRevision below rev, other than myKey; nil when there is none.
func newestOlder(kvs []*mvccpb.KeyValue, prefix, myKey string, rev int64) *mvccpb.KeyValue {
	var best *mvccpb.KeyValue
	for _, kv := range kvs {
		if queueEntry(kv, prefix) && kv.ModRevision < rev && string(kv.Key) != myKey &&
			(best == nil || kv.ModRevision > best.ModRevision) {
			best = kv
		}
	}
	return best
}

// waitGone waits, through pch (a watch on pred's key, just opened) and
// own (the watch on our entry), until pred, an entry older than ours, is
// deleted or rewritten. It returns nil then, and the errors of wait.
func (cl *claim) waitGone(ctx context.Context, own, pch clientv3.WatchChan, pred *mvccpb.KeyValue) error {
	c := cl.c
	if err := c.watchCreated(ctx, pch, cl.path); err != nil {
		return err
	}
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(string(pred.Key)), clientv3.OpGet(cl.key)).Commit()
	if err != nil {
		return c.convertError(ctx, err, cl.path)
	}
	if !cl.ours(resp.Responses[1].GetResponseRange().Kvs) {
		return c.ownEntryGone(cl.path)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) != 1 || kvs[0].ModRevision != pred.ModRevision {
		return nil // gone, or rewritten (behind us) already
	}
	readRev := resp.Header.Revision
	for {
		var wr clientv3.WatchResponse
		var ok, mine bool
		select {
		case wr, ok = <-pch:
		case wr, ok = <-own:
			mine = true
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
			if mine {
				// Deleted, or rewritten by someone: either way we lost our
				// place in the queue.
				return c.ownEntryGone(cl.path)
			}
			// Deleted, or rewritten (which moves it behind us: its
			// ModRevision is now past ours): it no longer blocks us.
			return nil
		}
	}
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
