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

	// ended is cancelled by end, and with the lease's lostCtx: in
	// markLost itself, so that Done is closed the moment the lease is
	// declared lost.
	ended     context.Context
	endNow    context.CancelFunc
	watchOnce sync.Once // starts the watch behind Done
}

// newLockDescriptor returns the descriptor of the held claim cl.
func newLockDescriptor(cl *claim) *lockDescriptor {
	ld := &lockDescriptor{cl: cl}
	ld.ended, ld.endNow = context.WithCancel(cl.lease.lostCtx)
	return ld
}

// Token returns the lock's fencing token: the revision etcd put the
// lock's entry at (its CreateRevision, which is also its ModRevision: an
// entry is never rewritten while held).
//
// It is strictly greater for every later holder of the same directory:
// revisions only grow (across lease loss, Conn and member restarts: etcd
// persists them), and a holder holds only once no entry of the queue is
// older (a lower ModRevision), deciding on reads at or after its own put.
// An earlier holder's entry was therefore put before the later holder's
// entry, at a lower revision: had the later holder's entry been older, the
// earlier holder would have waited for it (Lock and the election wait)
// or given up (TryLock, which puts, reads and decides in one
// transaction), and an entry that is deleted and put again gets a new,
// higher revision.
func (ld *lockDescriptor) Token() int64 { return ld.cl.rev }

// Done returns a channel closed once the lock ends: Unlock, the loss of
// its lease (etcd expired or revoked it, or the Conn could no longer prove
// it alive, see SafetyMargin), the Conn's Close, or the deletion or
// rewrite of its entry behind the holder's back. The first call starts a
// watch on the entry (one etcd watch per lock whose Done is used), which
// ends with the lock; if etcd refuses that watch (PermissionDenied), Done
// closes on the other causes only.
func (ld *lockDescriptor) Done() <-chan struct{} {
	ld.watchOnce.Do(func() {
		if ld.ended.Err() != nil {
			return
		}
		go ld.watch()
	})
	return ld.ended.Done()
}

// end closes Done (idempotent).
func (ld *lockDescriptor) end() { ld.endNow() }

// watch closes Done when the Conn closes or the entry is deleted or
// rewritten (the lease's loss closes it without help, see ended), and
// returns once Done is closed.
func (ld *lockDescriptor) watch() {
	cl := ld.cl
	ctx, cancel := context.WithCancel(cl.c.ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			ld.end()
		case <-ld.ended.Done():
		}
		cancel()
	}()
	if err := cl.follow(ctx); err == nil || ctx.Err() != nil {
		ld.end()
		return
	}
	// etcd refused the watch for good: Done closes on the lease's loss,
	// Unlock or Close.
	<-ctx.Done()
}

// heldClaim returns the claim IfHeld compares in the store, or ok false
// when the lock is known to have ended here: unlocked, its lease lost
// (or no longer proven alive), or Done closed.
func (ld *lockDescriptor) heldClaim() (cl *claim, ok bool) {
	ld.mu.Lock()
	released := ld.released
	ld.mu.Unlock()
	if ld.ended.Err() != nil {
		return ld.cl, false
	}
	return ld.cl, !released && !ld.cl.lease.lost()
}

// Check returns nil only while the holder can prove it holds the lock:
// its lease's last acknowledged renewal is recent enough (the lease's
// proven-until time, see SafetyMargin, has not passed, before and after
// the read) and a linearizable read shows its entry, unchanged since it
// was put and on its lease. It returns LockLost once the lease is lost or
// presumed lost, or the entry was deleted or rewritten; Interrupted after
// Unlock; Closed after the Conn's Close (whatever happened to the lock
// before); and the read's error (Timeout,
// Interrupted, Unavailable, PermissionDenied) when etcd cannot answer.
func (ld *lockDescriptor) Check(ctx context.Context) error {
	cl := ld.cl
	if cl.c.isClosed() {
		return cl.c.check(ctx, cl.path)
	}
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

// Unlock closes Done and deletes the lock's entry if it is still ours (one transaction on
// its ModRevision), handing the lock to the next waiter, and revokes the
// lease if it is the lock's own (LockWithTTL with a non-default TTL,
// LockName, a second lock of one directory through one Conn). It returns
// LockLost if the entry was already gone or rewritten (it then deletes
// nothing), Interrupted on a second call, Closed after the Conn's Close
// (also on a second call: Close released the lock).
// If etcd cannot be reached it returns that error (Unavailable, Timeout)
// and keeps trying to delete the entry in the background for as long as
// the Conn is open; PermissionDenied is returned as is and not retried.
func (ld *lockDescriptor) Unlock(ctx context.Context) error {
	cl := ld.cl
	ld.mu.Lock()
	if ld.released {
		ld.mu.Unlock()
		if err := cl.c.closedErr(cl.path); err != nil {
			return err
		}
		return topo.NewError(topo.Interrupted, cl.path)
	}
	ld.released = true
	ld.mu.Unlock()
	ld.end()
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
