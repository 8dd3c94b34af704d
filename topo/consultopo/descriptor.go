package consultopo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// lockDescriptor is a lock held through a session. It is the backend's
// topo.Fence for locks (see fence.go).
type lockDescriptor struct {
	c    *Conn
	path string
	key  string
	held held

	// done ends when the claim ends: Unlock, a loss this descriptor
	// noticed (markLost), or the end of its session (including the local
	// deadline and Close): it is a child of the session's claims context,
	// so the session's markLost cancels it before it returns. endDone ends
	// it; it is idempotent.
	done      context.Context
	endDone   context.CancelFunc
	watchOnce sync.Once // starts the watch behind Done

	mu       sync.Mutex
	unlocked bool
	lost     bool
}

// newLockDescriptor returns the descriptor of the lock h took on key.
func newLockDescriptor(c *Conn, path, key string, h held) *lockDescriptor {
	done, cancel := context.WithCancel(h.sess.claims)
	return &lockDescriptor{c: c, path: path, key: key, held: h, done: done, endDone: cancel}
}

// Check implements topo.LockDescriptor.Check. It returns nil only while
// the holder can prove it holds the lock: the lock's session is within its
// safety margin (a renewal acknowledged less than one TTL ago, see
// session) and a consistent read, finished before that margin ran out,
// shows the key held by that session with the LockIndex and ModifyIndex
// (the fencing token) of our acquire. It returns Closed after the Conn's
// Close (whatever happened to the lock before), Interrupted after Unlock;
// LockLost when the session is known lost (destroyed, expired, not
// renewed within the margin)
// or the key is gone, held by another session or acquire, or written since
// the acquire (its ModifyIndex is no longer the token); Unavailable
// (or PermissionDenied) when the read fails within the margin, so that
// holding cannot be proven; Timeout/Interrupted when ctx ends. The read is
// bounded by the margin, so a partitioned holder's Check fails no later
// than its deadline.
func (l *lockDescriptor) Check(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, l.path); err != nil {
		return err
	}
	if l.c.isClosed() {
		return topo.NewError(topo.Closed, l.path)
	}
	l.mu.Lock()
	unlocked, lost := l.unlocked, l.lost
	l.mu.Unlock()
	sess := l.held.sess
	switch {
	case unlocked:
		return backendkit.Wrap(topo.Interrupted, l.path, errors.New("the lock was released"))
	case lost || !sess.alive():
		return l.markLost(sessionLostReason(sess))
	}
	held, why, err := l.c.readHeld(ctx, l.path, l.key, l.held)
	switch {
	case err != nil:
		return err
	case !held:
		return l.markLost(why)
	}
	return nil
}

// sessionLostReason describes why sess can no longer back a lock.
func sessionLostReason(sess *session) string {
	if cause := context.Cause(sess.ctx); cause != nil {
		return "the lock's session ended: " + cause.Error()
	}
	return fmt.Sprintf("the lock's session was not renewed within its TTL (deadline %s)", sess.validUntil().Format(time.RFC3339Nano))
}

// markLost records the loss, closes Done, frees the local claim so other
// lockers of the Conn may proceed, and returns LockLost.
func (l *lockDescriptor) markLost(why string) error {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.endDone()
	l.c.releaseClaim(l.held.cl)
	return backendkit.Wrap(topo.LockLost, l.path, errors.New(why))
}

// Unlock implements topo.LockDescriptor.Unlock: one transaction checks that
// the lock's session still holds <dir>/Lock and deletes the key (so no
// leftover keeps an emptied directory listed, and a key another holder or
// another tool wrote is never deleted), then a lock-specific session is
// destroyed. Done is closed as Unlock starts. It returns Closed after the
// Conn's Close (which destroyed the session, releasing the lock; also on
// a second Unlock), LockLost when the lock had been lost, Interrupted on a
// second Unlock, PermissionDenied
// when the ACL token may not delete the key, and Timeout/Interrupted when
// ctx ends first (the release then completes in the background).
func (l *lockDescriptor) Unlock(ctx context.Context) error {
	closed := l.c.isClosed() // before l.mu: Close takes c.mu
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlocked {
		if closed {
			return topo.NewError(topo.Closed, l.path)
		}
		return backendkit.Wrap(topo.Interrupted, l.path, errors.New("the lock was already released"))
	}
	l.unlocked = true
	l.endDone()
	if closed || l.lost || l.held.sess.lost() {
		l.finish()
		if closed {
			return topo.NewError(topo.Closed, l.path)
		}
		return backendkit.Wrap(topo.LockLost, l.path, errors.New(sessionLostReason(l.held.sess)))
	}
	done := make(chan error, 1)
	release := func() {
		rctx, cancel := context.WithTimeout(l.c.ctx, requestTimeout)
		defer cancel()
		ok, resp, err := l.c.releaseKey(rctx, l.key, l.held.sess)
		l.finish()
		switch {
		case err != nil:
			done <- err
		case ok:
			done <- nil
		case classifyRollback(resp) == rollbackNotHeld || classifyRollback(resp) == rollbackMissing:
			done <- backendkit.Wrap(topo.LockLost, l.path, errors.New("the lock key was deleted or taken over"))
		default:
			done <- rollbackError(l.path, resp)
		}
	}
	if ctx.Done() == nil {
		release()
	} else {
		l.c.spawn(release)
	}
	select {
	case err := <-done:
		return l.c.convertError(ctx, err, l.path)
	case <-ctx.Done():
		return backendkit.FromContext(ctx, l.path)
	}
}

// finish releases the local claim and destroys a lock-specific session.
func (l *lockDescriptor) finish() {
	l.c.releaseClaim(l.held.cl)
	if l.held.sess.own {
		l.c.destroySession(l.held.sess)
	}
}

// String describes the lock for logs.
func (l *lockDescriptor) String() string {
	return fmt.Sprintf("consul lock %s (session %s)", strings.TrimSuffix(l.key, "/"+lockName), l.held.sess.id)
}
