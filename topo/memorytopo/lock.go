package memorytopo

import (
	"context"
	"errors"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// locksDir is the directory, under a locked directory, that holds the lock
// entries (the same layout as etcd2topo and zk2topo).
const locksDir = "locks"

// Lock implements topo.Conn.Lock: the lock entry is attached to c's session
// (Options.SessionTTL), and the oldest entry under dirPath/locks holds the
// lock; waiters queue behind it in order. It returns NoNode when dirPath
// holds no file and InvalidArgument when it is a file with no file below
// it (backendkit.LockNeedsFiles: a file counts only for the directories
// above it, as on the other backends), Timeout or Interrupted when ctx ends while waiting (the
// waiter's entry is removed), LockLost when c's session is lost while
// waiting, InvalidPath for a malformed or reserved dirPath
// (backendkit.CheckLockPath), and Closed after Close.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpLock)
	return c.lock(ctx, OpLock, dirPath, contents, 0, true, false)
}

// LockWithTTL implements topo.Conn.LockWithTTL: like Lock, but the entry has
// its own lease of ttl, which lapses ttl after renewal stops (see
// Conn.PauseKeepAlive and OpKeepAlive). It returns InvalidArgument when ttl
// is not positive.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	c.f.count(OpLockWithTTL)
	if ttl <= 0 {
		// backendkit's order: the context, the directory, the value, then
		// the ttl, all before Closed.
		if err := backendkit.CheckContext(ctx, dirPath); err != nil {
			return nil, err
		}
		_, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
		return nil, err
	}
	return c.lock(ctx, OpLockWithTTL, dirPath, contents, ttl, true, false)
}

// LockName implements topo.Conn.LockName: like Lock, without requiring
// dirPath to hold files, with its own lease of Options.NamedLockTTL.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpLockName)
	return c.lock(ctx, OpLockName, dirPath, contents, c.f.opts.NamedLockTTL, false, false)
}

// TryLock implements topo.Conn.TryLock: it takes the lock only if nobody
// holds or waits for it, atomically, and otherwise returns NodeExists at
// once. It also returns NoNode or InvalidArgument as Lock does when no file lies
// below dirPath.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpTryLock)
	return c.lock(ctx, OpTryLock, dirPath, contents, 0, true, true)
}

// lock is the body of Lock, LockWithTTL, LockName and TryLock. ttl is 0
// for the session, positive for a lease of its own (LockWithTTL refuses a
// non-positive ttl before calling it).
func (c *Conn) lock(ctx context.Context, op Operation, dirPath, contents string, ttl time.Duration, needFiles, try bool) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	p, err := checkLockPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p, []byte(contents)); err != nil {
		return nil, err
	}
	if err := c.enter(ctx, op, p); err != nil {
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	if err := c.closedErr(p); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	d := lookupBelow(s.connRoot(c, false), p)
	if needFiles && !filesBelow(d) {
		isFile := d != nil && d.file != nil
		s.mu.Unlock()
		return nil, backendkit.LockNeedsFiles(p, isFile)
	}
	var e *entry
	var ld *lockDescriptor
	if d != nil && !s.noUnplaced && d.children[locksDir] == nil {
		// No entry of the lock is in the tree (none under d/locks): queue
		// an unplaced entry, the holder when it is the first.
		if holder := d.unplaced; try && holder != nil {
			s.mu.Unlock()
			return nil, backendkit.LockHeld(p, []byte(holder.value), "")
		}
		h := &heldLock{lockDescriptor: lockDescriptor{c: c, path: p}}
		e, ld = &h.e, &h.lockDescriptor
		ld.e = e
		l := s.lockLease(c, ttl) // before the revision, as for addEntry
		e.seq, e.value, e.lease = s.nextRev(), contents, l
		s.placeLater(e, d)
		if e.qprev == nil {
			s.mu.Unlock()
			return ld, nil
		}
	} else {
		dir := joinFull(c.full(p), locksDir)
		if try {
			if holder := s.first(dir); holder != nil {
				s.mu.Unlock()
				return nil, backendkit.LockHeld(p, []byte(holder.value), "")
			}
		}
		e = s.addEntry(dir, contents, s.lockLease(c, ttl))
		ld = &lockDescriptor{c: c, e: e, path: p}
	}
	return s.waitTurn(ctx, c, e, ld)
}

// waitTurn waits until e, the lock entry of ld, holds its lock, and
// returns ld then. Call with mu held for writing; it releases it. The
// entry's predecessor in its lock's queue grants it the lock when it is
// removed (store.removeEntry sets e.granted, then closes e.wake), so that
// the waiter is back with one channel receive and no second look at the
// store. It returns LockLost when the store dropped e meanwhile, Closed
// when c closed (which drops e), and Timeout or Interrupted when ctx
// ends first (e is removed then).
func (s *store) waitTurn(ctx context.Context, c *Conn, e *entry, ld *lockDescriptor) (topo.LockDescriptor, error) {
	p := ld.path
	for {
		if c.closed.Load() {
			s.mu.Unlock()
			return nil, topo.NewError(topo.Closed, p)
		}
		if e.removed {
			s.mu.Unlock()
			return nil, backendkit.Wrap(topo.LockLost, p, errors.New("session lost while waiting for the lock"))
		}
		if s.lockPredecessor(e) == nil {
			s.mu.Unlock()
			return ld, nil
		}
		wake := make(chan struct{})
		e.wake = wake
		s.lockWaiters++
		s.mu.Unlock()
		if done := ctx.Done(); done == nil {
			<-wake
		} else {
			select {
			case <-wake:
			case <-done:
				s.mu.Lock()
				s.removeEntry(e, false)
				s.mu.Unlock()
				return nil, interruptedOrTimeout(ctx, p)
			}
		}
		// The receive orders this after the write of granted, which
		// nothing changes once it is set.
		if e.granted {
			return ld, nil
		}
		s.mu.Lock()
	}
}

// lockLease returns the lease of a new lock entry of c: a lease of its
// own for a positive ttl, else c's session. Call with mu held for
// writing.
func (s *store) lockLease(c *Conn, ttl time.Duration) *lease {
	if ttl > 0 {
		return s.newLease(c, ttl)
	}
	return s.sessionLease(c)
}

// heldLock is a lock descriptor and its entry in one allocation (the
// uncontended Lock's).
type heldLock struct {
	lockDescriptor
	e entry
}

// lockDescriptor is a held lock of a memorytopo Conn.
type lockDescriptor struct {
	c    *Conn
	e    *entry
	path string // canonical locked directory
	// unlocked is set by Unlock; guarded by the store's mu.
	unlocked bool
}

// Check implements topo.LockDescriptor.Check: nil while held, LockLost once
// the store dropped the lock (ExpireSession, a lapsed lease, also after
// Conn.Partition), Interrupted after Unlock, Closed after the Conn's Close.
func (d *lockDescriptor) Check(ctx context.Context) error {
	c := d.c
	c.f.count(OpCheck)
	if err := backendkit.CheckContext(ctx, d.path); err != nil {
		return err
	}
	if err := c.enter(ctx, OpCheck, d.path); err != nil {
		return err
	}
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	switch {
	case d.unlocked:
		return topo.NewError(topo.Interrupted, d.path)
	case d.e.removed:
		return topo.NewError(topo.LockLost, d.path)
	}
	return nil
}

// Unlock implements topo.LockDescriptor.Unlock: it removes the lock entry,
// letting the next waiter in. A second Unlock returns Interrupted; an
// Unlock after the store dropped the lock returns LockLost; after the
// Conn's Close it returns Closed (Close already released the lock).
func (d *lockDescriptor) Unlock(ctx context.Context) error {
	c := d.c
	c.f.countAt(OpUnlock, uint64(d.e.seq))
	if err := backendkit.CheckContext(ctx, d.path); err != nil {
		return err
	}
	if err := c.enter(ctx, OpUnlock, d.path); err != nil {
		return err
	}
	s := c.s
	s.mu.Lock()
	if d.unlocked {
		s.mu.Unlock()
		return topo.NewError(topo.Interrupted, d.path)
	}
	d.unlocked = true
	if d.e.removed {
		s.mu.Unlock()
		return topo.NewError(topo.LockLost, d.path)
	}
	s.removeEntry(d.e, false)
	s.mu.Unlock()
	return nil
}

// filesBelow reports whether a regular file lies strictly below the node d
// (nil: none). A file that has files below it is also a directory that
// holds files. Call with mu held.
func filesBelow(d *node) bool {
	if d == nil {
		return false
	}
	n := d.files
	if d.file != nil {
		n-- // d itself
	}
	return n > 0
}
