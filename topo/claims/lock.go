package claims

import (
	"context"
	"errors"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Lock implements topo.Conn.Lock: the checks of backendkit.CheckContext
// and backendkit.CheckLock, in that order; then an entry on the Conn's
// session (when no file is below dirPath, nothing is written and the
// error is backendkit.LockNeedsFiles': NoNode, or InvalidArgument when
// dirPath is a file), and a
// wait until it heads the queue. While waiting it returns Timeout or
// Interrupted when ctx ends, LockLost when the session is declared lost,
// and Closed when the engine is closed; the waiter's entry is removed then.
func (e *Engine) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	e.count(CallLock)
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return e.lock(ctx, CallLock, p, contents, CreateOptions{RequireFiles: true})
}

// LockWithTTL implements topo.Conn.LockWithTTL: Lock, with ttl checked
// after the other arguments (backendkit.CheckLockWithTTL: InvalidArgument
// when not positive) and passed to Driver.Create.
func (e *Engine) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	e.count(CallLockWithTTL)
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
	if err != nil {
		return nil, err
	}
	return e.lock(ctx, CallLockWithTTL, p, contents, CreateOptions{RequireFiles: true, TTL: ttl})
}

// LockName implements topo.Conn.LockName: Lock without the need for files
// below dirPath. It is the same lock as Lock's on the same directory.
func (e *Engine) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	e.count(CallLockName)
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return e.lock(ctx, CallLockName, p, contents, CreateOptions{})
}

// TryLock implements topo.Conn.TryLock: Lock's checks, then an entry only
// when the queue is empty, in one request (Driver.Create with Exclusive);
// otherwise NodeExists at once, wrapping a *topo.LockHeldError that names
// the head's contents and session (backendkit.LockHeld). It never waits.
func (e *Engine) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	e.count(CallTryLock)
	p, err := checkLock(ctx, dirPath, contents)
	if err != nil {
		return nil, err
	}
	return e.lock(ctx, CallTryLock, p, contents, CreateOptions{RequireFiles: true, Exclusive: true})
}

// checkLock runs the argument checks of the lock methods, in backendkit's
// order: the context, the directory (malformed or reserved: InvalidPath),
// the contents' size (InvalidArgument).
func checkLock(ctx context.Context, dirPath, contents string) (string, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return "", err
	}
	return backendkit.CheckLock(dirPath, contents)
}

// lock runs call for the checked directory p: Hooks.Enter, then an entry
// and the wait for it to head the queue.
func (e *Engine) lock(ctx context.Context, call Call, p, contents string, opts CreateOptions) (topo.LockDescriptor, error) {
	if err := e.enter(ctx, call, p); err != nil {
		return nil, err
	}
	q := Queue{Path: p}
	var ld *lockDescriptor
	if e.roomer != nil {
		if err := e.closedErr(q.Path); err != nil {
			return nil, err
		}
		r, s, err := e.roomer.CreateLock(ctx, q, contents, opts)
		if err != nil {
			return nil, e.createErr(ctx, q, err)
		}
		ld = &r.ld
		if ld.turn != nil && (e.turns == nil || e.defect == DefectGrantSecond || e.defect == DefectSkipWait) {
			ld.turn = nil // waits through waitSignaled
		}
		// A lock the store granted at once, on an in-process store whose
		// driver ends its lock entries only by Delete or with their
		// session (a GoneSignaler without Monitor), is unshared (see
		// sharedBit): no sess.mu in Lock, nor in Unlock unless Done was
		// called. So is one that waits on its turn (TurnSignaler): its
		// session's loss ends the wait by removing its entry, and is read
		// from the session's flag once granted, as for the former.
		ld.claim.initKept(e, q, s, nil, !(e.lazyLocks && (ld.entry.Granted || ld.turn != nil)))
	} else {
		var ent Entry
		s, err := e.createEntry(ctx, q, contents, opts, &ent)
		if err != nil {
			return nil, err
		}
		ld = &lockDescriptor{}
		ld.claim.init(e, q, &ent, s, nil, true)
	}
	if err := e.await(ctx, &ld.claim, nil, ld.turn); err != nil {
		return nil, err
	}
	return ld, nil
}

// LockRoom is room for one lock descriptor, which a driver may allocate
// together with its own record of a lock's entry (see Roomer), so that a
// lock costs one allocation, not two. Its zero value is what a driver
// allocates; the driver sets its entry (SetEntry) and hands it over once,
// and the engine alone uses it from then on.
type LockRoom struct{ ld lockDescriptor }

// SetTurn records in r the channel on which the lock's waiter parks (see
// TurnSignaler): closed once the entry heads its queue or leaves it. A
// TurnSignaler's CreateLock calls it, before it returns r, for an entry
// it did not grant at once; the engine ignores it on any other driver.
func (r *LockRoom) SetTurn(turn <-chan struct{}) { r.ld.turn = turn }

// SetEntry records in r the lock's entry, as Driver.Create would return
// it: Token, Key, Session, Contents, Granted and Ref (a lock's entry has
// no Value). Roomer.CreateLock calls it once, before it returns r.
func (r *LockRoom) SetEntry(token int64, key, session, contents string, granted bool, ref any) {
	ce := &r.ld.entry
	ce.Token, ce.Key, ce.Session, ce.Contents, ce.Granted, ce.Ref = token, key, session, contents, granted, ref
}

// Roomer is what a Driver may also implement when it allocates a
// LockRoom with each lock entry it creates (memorytopo: with the entry's
// record in its store). The engine then creates every lock's entry
// through CreateLock, not Create: the entry goes into the descriptor's
// room where it was allocated, not through an Entry copied from call to
// call.
type Roomer interface {
	// CreateLock is Driver.Create for the lock queue q (its contract,
	// its options and errors unchanged), with the new entry written into
	// the LockRoom allocated with it (LockRoom.SetEntry) instead of
	// returned. It never returns the same LockRoom twice.
	CreateLock(ctx context.Context, q Queue, contents string, opts CreateOptions) (*LockRoom, *Session, error)
}

// lockDescriptor is a held lock: its claim, in the same allocation. The
// first Unlock sets unlockedBit in the claim's state: every later one
// returns Interrupted (or Closed), whatever the first returned.
type lockDescriptor struct {
	claim
	// turn is the channel its waiter parks on (LockRoom.SetTurn; nil:
	// none), read once, by Lock.
	turn <-chan struct{}
}

// Done implements topo.Fence: the claim's Done; the first call also starts
// the driver's Monitor of the lock, when it has one.
func (l *lockDescriptor) Done() <-chan struct{} {
	l.monitor()
	return l.claim.Done()
}

// Check implements topo.Fence: the claim's Check (see there), after the
// Hooks of CallCheck.
func (l *lockDescriptor) Check(ctx context.Context) error {
	if err := l.eng.prologue(ctx, CallCheck, l.q.Path); err != nil {
		return err
	}
	return l.claim.Check(ctx)
}

// Unlock implements topo.LockDescriptor.Unlock: Done closes, then the entry
// is removed (Driver.Delete), so the next waiter is granted only after the
// holder's Done closed. It returns Closed once the engine is closed (the
// Conn's Close released the lock; also for a second Unlock), Interrupted
// when already released and
// LockLost when lost (the entry goes with its session; the driver is
// asked to remove it at once all the same, within a few seconds, in case
// the store still has it), also when the store says the entry is gone. When the
// removal fails otherwise (the driver's error, mapped: Unavailable, ...)
// the lock is released all the same (Done is closed) and the engine keeps
// removing the entry in the background until it is gone or its session
// ends. A second Unlock returns Interrupted (Closed once the engine is
// closed), also after one that said LockLost.
//
// A context that ends while Hooks.Enter holds the call (memorytopo: its
// Conn partitioned) is a request given up in flight, as it is on the
// other backends: the lock is released all the same and removed in the
// background, and Unlock returns Timeout or Interrupted. (An error
// Hooks.Enter returns otherwise, an injected fault, leaves the lock held.)
func (l *lockDescriptor) Unlock(ctx context.Context) error {
	live := ctx.Err() == nil
	if err := l.eng.prologue(ctx, CallUnlock, l.q.Path); err != nil {
		if !live || ctx.Err() == nil || l.eng.closed.Load() {
			return err
		}
		if again, _ := l.unlock(); !again {
			go l.eng.removeLater(&l.claim)
		}
		return err
	}
	if err := l.eng.closedErr(l.q.Path); err != nil {
		return err
	}
	again, err := l.unlock()
	if again {
		return topo.NewError(topo.Interrupted, l.q.Path)
	}
	// A lock's entry no longer changes once Lock returned it (Acquire
	// runs before): it is read without sess.mu.
	if err != nil {
		if topo.IsErrType(err, topo.LockLost) {
			// The store may still have the entry (its session not ended
			// there yet): remove it now, within removeGrace, rather than
			// leave it to block others until the session ends. Delete
			// goes by the entry's identity, so nothing else is removed.
			dctx, cancel := context.WithTimeout(ctx, removeGrace)
			_ = l.eng.d.Delete(dctx, l.q, l.sess, l.entry.Entry())
			cancel()
		}
		return err
	}
	err = l.eng.d.Delete(ctx, l.q, l.sess, l.entry.Entry())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		return backendkit.Wrap(topo.LockLost, l.q.Path, err)
	}
	go l.eng.removeLater(&l.claim)
	return l.eng.d.MapError(ctx, err, l.q.Path)
}
