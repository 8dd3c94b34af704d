package templatetopo

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Locks. A lock on dir is a queue of entries at <dir>/locks/<token> (the
// layout of etcd2topo and zk2topo; "locks" is a reserved name, so no file
// can collide with an entry). Each entry belongs to the session of the
// Conn that asked for the lock; the oldest entry holds the lock and the
// others wait, in order. The entry's token is the store revision of its
// creation.
//
// Why tokens are monotone here (the argument every backend must make for
// its own store): a holder's entry is at the head of the queue, so every
// entry created before it has left the queue (released or lost) before it
// is granted; an entry created later has a greater revision. So every later
// holder of dir has a greater token than every earlier one. TryLock only
// creates an entry when the queue is empty, so the same holds for it. The
// revision counter is the store's (not the Conn's or the process's) and
// survives Restart, so Conn restarts and store restarts keep it.

// Lock implements topo.Conn.Lock. It returns NoNode when no file is below
// dirPath, Timeout or Interrupted when ctx ends while waiting (the waiter's
// entry is removed), LockLost when the Conn's session ends while waiting,
// and Closed when the Conn is closed while waiting.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, p, contents, true, false)
}

// LockWithTTL implements topo.Conn.LockWithTTL. ttl must be positive
// (InvalidArgument). This store has no leases: a lock lives as long as the
// session it was taken on, so ttl is rounded up to SessionTimeout, after
// which the store frees the lock of a holder that lost its link (Cut; the
// holder gave it up at the cut). Otherwise it is Lock.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, p, contents, true, false)
}

// LockName implements topo.Conn.LockName: Lock without the need for files
// below dirPath. It is the same lock as Lock's on the same directory.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, p, contents, false, false)
}

// TryLock implements topo.Conn.TryLock: it takes the lock only when nobody
// holds or waits for it (in one request) and returns NodeExists at once
// otherwise, with a *topo.LockHeldError naming the holder's contents and
// session (backendkit.LockHeld). It also returns NoNode when no file is
// below dirPath.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, p, contents, true, true)
}

// checkLock runs the argument checks of the lock methods, in
// backendkit's order: the context, the directory (malformed or reserved:
// InvalidPath), the contents' size (InvalidArgument).
func checkLock(ctx context.Context, dirPath, contents string) (string, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return "", err
	}
	return backendkit.CheckLock(dirPath, contents)
}

// acquire creates the lock entry for the canonical directory p on the
// Conn's session, in one request, and waits until it holds the lock.
func (c *Conn) acquire(ctx context.Context, p, contents string, needFiles, try bool) (topo.LockDescriptor, error) {
	var cl *claim
	err := c.do(func(s *Store) error {
		key := c.full(p)
		if needFiles && !s.hasFilesBelow(key) {
			return errNotFound
		}
		if h := s.head(key); try && h != nil {
			// NodeExists naming the holder (a *topo.Error: mapErr passes
			// it through).
			return backendkit.LockHeld(p, []byte(h.contents), strconv.FormatInt(h.sess.id, 10))
		}
		cl = s.enqueue(c, key, p, contents, c.session(s))
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p)
	}
	if err := c.await(ctx, cl, nil); err != nil {
		return nil, err
	}
	return &lockDescriptor{cl}, nil
}

// await waits until cl's entry is granted. When the wait ends otherwise
// (ctx, the session's end, Close, stop when non-nil, or another call
// withdrawing cl), it takes cl's own entry out of its queue (by identity:
// a waiter that gives up never removes anyone else's entry) and returns
// why: Closed, LockLost (the session ended), Interrupted (stop, or
// withdrawn), or ctx's Timeout or Interrupted. A grant that races with the
// end of ctx wins: ctx bounds only the wait.
func (c *Conn) await(ctx context.Context, cl *claim, stop <-chan struct{}) error {
	select {
	case <-cl.granted:
	case <-cl.done: // withdrawn by another call (Resign, Stop)
	case <-ctx.Done():
	case <-cl.sess.lost:
	case <-c.closing:
	case <-stop:
	}
	won := false
	// If this request is refused (Close, Cut, Restart), the claim has
	// ended already, and its entry goes with its session.
	_ = c.do(func(s *Store) error {
		if s.holds(cl) && !closedChan(stop) {
			won = true
			return nil
		}
		cl.end(claimReleased) // no-op if it already ended
		s.remove(cl)
		return nil
	})
	c.store.mu.Lock()
	lost := cl.state == claimLost
	c.store.mu.Unlock()
	switch {
	case won:
		return nil
	case c.closed.Load():
		return topo.NewError(topo.Closed, cl.path)
	case lost:
		return backendkit.Wrap(topo.LockLost, cl.path, errSessionEnded)
	case closedChan(stop):
		return topo.NewError(topo.Interrupted, cl.path)
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, cl.path)
	}
	return topo.NewError(topo.Interrupted, cl.path) // withdrawn by another call
}

// closedChan reports whether ch (possibly nil) is closed.
func closedChan(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return ch != nil
	default:
		return false
	}
}

// hasFilesBelow reports whether a file is strictly below the store path
// dir.
func (s *Store) hasFilesBelow(dir string) bool {
	if dir == "" {
		return len(s.files) > 0
	}
	for p := range s.files {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// Claims are what a LockDescriptor and a leadership term are: a Fence.
//
// The rules, which make a stale holder harmless:
//   - a claim belongs to the session it was created on, not to the Conn's
//     current session: once that session ended, the claim stays lost, even
//     after the Conn opened a new one;
//   - only its own Unlock (or Stop) or its session's end removes its entry,
//     always by identity (never "the entry at this path"), so a stale
//     Unlock cannot release a successor's lock;
//   - IfHeld and Check ask the store whether the entry still heads its
//     queue; Done and the claim's state are the holder's view, and are
//     never behind the store's here (endSession tells the holder first).

// ownFence is what backendkit.FenceAs looks for behind middleware: a Fence
// this backend issued.
type ownFence interface {
	topo.Fence
	own() *claim
}

func (cl *claim) own() *claim { return cl }

// Token implements topo.Fence: the store revision of the entry's creation.
func (cl *claim) Token() int64 { return cl.token }

// Done implements topo.Fence: closed on Unlock or Stop, and when the
// session ends (the store tells the holder before it hands the claim on).
func (cl *claim) Done() <-chan struct{} { return cl.done }

// Check implements topo.Fence: Interrupted once released, LockLost once
// lost (both known without asking the store), otherwise the store's answer:
// nil while the entry heads its queue. A cut Conn's claims are lost, so
// Check answers at once on a cut Conn too.
func (cl *claim) Check(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, cl.path); err != nil {
		return err
	}
	if err := cl.localErr(); err != nil {
		return err
	}
	err := cl.conn.do(func(s *Store) error {
		if err := cl.stateErr(); err != nil {
			return err
		}
		if !s.holds(cl) {
			return errSessionEnded
		}
		return nil
	})
	return cl.conn.mapErr(ctx, err, cl.path)
}

// localErr is stateErr read under the mutex. (The claim's state is the
// holder's, not the store's; it shares the store's mutex only because both
// live in this process.)
func (cl *claim) localErr() error {
	cl.store.mu.Lock()
	defer cl.store.mu.Unlock()
	return cl.stateErr()
}

// stateErr returns Interrupted for a released claim, LockLost for a lost
// one, nil for a held one. Called with store.mu held.
func (cl *claim) stateErr() error {
	switch cl.state {
	case claimReleased:
		return topo.NewError(topo.Interrupted, cl.path)
	case claimLost:
		return backendkit.Wrap(topo.LockLost, cl.path, errSessionEnded)
	}
	return nil
}

// lockDescriptor is a held lock.
type lockDescriptor struct{ *claim }

// Unlock implements topo.LockDescriptor.Unlock in one request: Done closes,
// then the entry leaves the queue and the next waiter is granted. It
// returns Interrupted when already released and LockLost when the session
// ended (nothing is released then: the entry went with the session).
func (l *lockDescriptor) Unlock(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, l.path); err != nil {
		return err
	}
	if err := l.localErr(); err != nil {
		return err
	}
	err := l.conn.do(func(s *Store) error {
		if err := l.stateErr(); err != nil {
			return err
		}
		l.end(claimReleased)
		s.remove(l.claim)
		return nil
	})
	return l.conn.mapErr(ctx, err, l.path)
}
