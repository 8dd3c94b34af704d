package consultopo

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// consulFence is what Txn needs from a Fence this backend issued (a
// *lockDescriptor or a *term) to guard a transaction with IfHeld.
type consulFence interface {
	topo.Fence
	// target returns the lock (or election) key, the holding session and
	// the fencing token (the key's ModifyIndex at the acquire), the path
	// for errors, and why the claim is known lost or released locally
	// ("" while it may be held).
	target() (key string, sess *session, token uint64, path, lostWhy string)
}

// readHeld reads key with a consistent read bounded by the deadline of h's
// session and reports whether h still holds it (see held.holds), and if
// not, why. It returns an error (Unavailable, PermissionDenied, or
// Timeout/Interrupted when ctx ends) when the read fails while the session
// is within its margin, so that holding cannot be proven.
func (c *Conn) readHeld(ctx context.Context, path, key string, h held) (bool, string, error) {
	rctx, cancel := context.WithDeadline(ctx, h.sess.validUntil())
	defer cancel()
	pair, _, err := c.kv.Get(key, c.consistentOptions(rctx))
	switch {
	case !h.sess.alive():
		return false, sessionLostReason(h.sess), nil
	case err != nil:
		return false, "", c.convertError(ctx, err, path)
	case !h.holds(pair):
		return false, "the lock key was deleted, taken over or written since the acquire", nil
	}
	return true, "", nil
}

// Token implements topo.Fence.Token: the ModifyIndex Consul gave the lock
// key <dir>/Lock when this lock acquired it, that is the Raft index of the
// acquiring transaction (see acquire for why it is strictly greater for
// every later holder).
func (l *lockDescriptor) Token() int64 { return int64(l.held.token) }

// Done implements topo.Fence.Done. The channel closes on Unlock, when the
// lock's session ends or passes its local deadline (see session), when
// Check finds the lock lost, and when the key is deleted, taken over or
// written behind the holder's back: the first call of Done starts a watch
// of the key (consistent blocking queries, each waiting up to
// Options.WatchPollDuration) that runs until the channel closes. Store
// errors are retried; an ACL refusal ends the watch, leaving the other
// causes to close the channel.
func (l *lockDescriptor) Done() <-chan struct{} {
	l.watchOnce.Do(func() {
		if l.done.Err() == nil {
			l.c.spawn(l.watch)
		}
	})
	return l.done.Done()
}

// watch follows the lock key until the claim ends, and marks the lock lost
// when a read shows the key no longer held by its acquire.
func (l *lockDescriptor) watch() {
	ctx := l.done
	var index uint64
	retry := 50 * time.Millisecond
	for {
		pair, meta, err := l.c.kv.Get(l.key, l.c.consistentBlocking(ctx, index))
		switch {
		case ctx.Err() != nil:
			return
		case isPermanent(err):
			slog.Debug("consultopo: the watch behind a lock's Done was refused", "key", l.key, "err", err)
			return
		case err != nil:
			if !sleepCtx(ctx, retry) {
				return
			}
			retry = min(2*retry, watchRetryMax)
			continue
		case !l.held.holds(pair):
			_ = l.markLost("the lock key was deleted, taken over or written since the acquire")
			return
		}
		retry = 50 * time.Millisecond
		index = nextIndex(index, meta.LastIndex)
	}
}

// target implements consulFence.
func (l *lockDescriptor) target() (key string, sess *session, token uint64, path, lostWhy string) {
	l.mu.Lock()
	unlocked, lost := l.unlocked, l.lost
	l.mu.Unlock()
	sess = l.held.sess
	switch {
	case unlocked:
		lostWhy = "the lock was released"
	case lost || !sess.alive():
		lostWhy = sessionLostReason(sess)
	}
	return l.key, sess, l.held.token, l.path, lostWhy
}

// Token implements topo.Fence.Token for a leadership term: the ModifyIndex
// Consul gave the election key when this term acquired it (the Raft index
// of the acquiring transaction, strictly greater from term to term,
// whoever leads; see acquire).
func (t *term) Token() int64 { return int64(t.held.token) }

// Done implements topo.Fence.Done for a term: the leadership context's
// channel, closed when the term ends (Stop, Close, the session's end or
// local deadline, the key seen deleted or taken over by the term's monitor,
// or Check finding the term lost).
func (t *term) Done() <-chan struct{} { return t.ctx.Done() }

// Check implements topo.Fence.Check for a term: Closed after the Conn's
// Close (whatever happened to the term before); Interrupted once Stop
// ended it; LockLost once it ended otherwise (or the session passed its
// deadline); otherwise like the Check of a lock, a consistent read of the
// election key bounded by the session's deadline, which ends the term when
// it shows the key no longer held by the term's acquire.
func (t *term) Check(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, t.path); err != nil {
		return err
	}
	if t.c.isClosed() {
		return topo.NewError(topo.Closed, t.path)
	}
	if _, _, _, _, why := t.target(); why != "" {
		if t.released.Load() {
			return backendkit.Wrap(topo.Interrupted, t.path, errors.New(why))
		}
		return backendkit.Wrap(topo.LockLost, t.path, errors.New(why))
	}
	held, why, err := t.c.readHeld(ctx, t.path, t.key, t.held)
	switch {
	case err != nil:
		return err
	case !held:
		t.cancel()
		return backendkit.Wrap(topo.LockLost, t.path, errors.New(why))
	}
	return nil
}

// target implements consulFence for a term.
func (t *term) target() (key string, sess *session, token uint64, path, lostWhy string) {
	sess = t.held.sess
	switch {
	case t.released.Load():
		lostWhy = "the leadership term was ended by Stop"
	case t.ctx.Err() != nil:
		lostWhy = "the leadership term ended"
	case !sess.alive():
		lostWhy = sessionLostReason(sess)
	}
	return t.key, sess, t.held.token, t.path, lostWhy
}

// Term implements topo.LeaderParticipation.Term: the current term (the
// same *term value for the whole term) while this participant leads,
// NotLeader otherwise; Closed after the Conn's Close. It does not wait
// for a WaitForLeadership in progress.
func (p *participation) Term() (topo.Fence, error) {
	if p.c.isClosed() {
		return nil, topo.NewError(topo.Closed, p.path)
	}
	if t := p.cur.Load(); t != nil && t.ctx.Err() == nil {
		return t, nil
	}
	return nil, topo.NewError(topo.NotLeader, p.path)
}
