package etcd2topo

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// The descriptor: a held lock.

// lockDescriptor is a held lock: its entry (key, revision, lease).
type lockDescriptor struct {
	cl *claim

	mu       sync.Mutex
	released bool
}

// Check returns nil only while the holder can prove it holds the lock:
// its lease's last acknowledged renewal is recent enough (the lease's
// proven-until time, see SafetyMargin, has not passed, before and after
// the read) and a linearizable read shows its entry, unchanged since it
// was put and on its lease. It returns LockLost once the lease is lost or
// presumed lost, or the entry was deleted or rewritten; Interrupted after
// Unlock; Closed after the Conn's Close; and the read's error (Timeout,
// Interrupted, Unavailable, PermissionDenied) when etcd cannot answer.
func (ld *lockDescriptor) Check(ctx context.Context) error {
	cl := ld.cl
	ld.mu.Lock()
	released := ld.released
	ld.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, cl.path)
	}
	if err := cl.c.check(ctx, cl.path); err != nil {
		return err
	}
	if cl.lease.lost() {
		return cl.c.ownEntryGone(cl.path)
	}
	// Values included: etcd 3.7 leaves the Lease out of keys-only reads.
	resp, err := cl.c.cli.Get(ctx, cl.key)
	if err != nil {
		return cl.c.convertError(ctx, err, cl.path)
	}
	if !cl.ours(resp.Kvs) || cl.lease.lost() {
		return cl.c.ownEntryGone(cl.path)
	}
	return nil
}

// Unlock deletes the lock's entry if it is still ours (one transaction on
// its ModRevision), handing the lock to the next waiter, and revokes the
// lease if it is the lock's own (LockWithTTL with a non-default TTL,
// LockName, a second lock of one directory through one Conn). It returns
// LockLost if the entry was already gone or rewritten (it then deletes
// nothing), Interrupted on a second call, Closed after the Conn's Close.
// If etcd cannot be reached it returns that error (Unavailable, Timeout)
// and keeps trying to delete the entry in the background for as long as
// the Conn is open; PermissionDenied is returned as is and not retried.
func (ld *lockDescriptor) Unlock(ctx context.Context) error {
	cl := ld.cl
	ld.mu.Lock()
	if ld.released {
		ld.mu.Unlock()
		return topo.NewError(topo.Interrupted, cl.path)
	}
	ld.released = true
	ld.mu.Unlock()
	if err := cl.c.closedErr(cl.path); err != nil {
		return err
	}
	resp, err := cl.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(cl.key), "=", cl.rev)).
		Then(clientv3.OpDelete(cl.key)).
		Commit()
	if err != nil {
		if !isPermanent(err) {
			// Release in the background, without holding the caller
			// beyond its context.
			cl.removeAsync(true)
		} else {
			cl.release()
		}
		return cl.c.convertError(ctx, err, cl.path)
	}
	if cl.own {
		cl.c.dropLease(cl.lease)
	}
	cl.release()
	if !resp.Succeeded {
		return topo.NewError(topo.LockLost, cl.path)
	}
	return nil
}
