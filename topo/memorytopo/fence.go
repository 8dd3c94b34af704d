package memorytopo

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Fencing tokens. A lock's token is the store revision at which its lock
// entry was created (the entry's sequence number, like etcd's
// CreateRevision of the lock key); a term's is the same for the leader's
// candidate entry. Why it is monotone per lock path (and per election):
// the store's revision only grows (one counter per store, atomic, never
// reset: ExpireSession, Partition, Close and faults drop entries but do
// not touch it); entries of one directory are created under the store's
// write lock, so a later entry has a greater revision; and the holder is
// always the oldest live entry, so when a holder's entry goes (Unlock,
// session expiry, lapse after a partition or a pause) the next holder is
// the next-oldest entry, created after it, or an entry created later
// still. An entry older than the holder cannot exist (it would be the
// holder), so no later holder has a smaller token. TryLock adds its entry
// only when the directory has none, so it obeys the same order. An
// uncontended lock's entry that is not placed in the tree yet (see
// placeLater) takes its revision when it is created all the same, and the
// next locker of its directory places it before adding its own entry, so
// it is the oldest entry there as if it had been placed at once.

// Token implements topo.Fence.Token: the store revision at which the lock
// entry was created (see the comment above), positive and fixed.
func (d *lockDescriptor) Token() int64 { return d.e.seq }

// Done implements topo.Fence.Done: the channel closes when the lock entry
// goes, at the moment the store drops it: Unlock, ExpireSession, a lapsed
// lease (also after Partition or PauseKeepAlive), or the Conn's Close.
func (d *lockDescriptor) Done() <-chan struct{} { return d.c.s.done(d.e) }

// term is one leadership term of a participation: the candidate entry
// that was the oldest when WaitForLeadership returned. It is the Fence
// Term returns, the same value for the whole term.
type term struct {
	p *participation
	e *entry
}

// Token implements topo.Fence.Token: the store revision at which the
// leader's candidate entry was created (see the comment above).
func (t *term) Token() int64 { return t.e.seq }

// Done implements topo.Fence.Done: closed when the term's entry goes
// (Stop, ExpireSession, a lapsed session, the Conn's Close), when the
// leadership context is cancelled.
func (t *term) Done() <-chan struct{} { return t.p.c.s.done(t.e) }

// Check implements topo.Fence.Check: nil while the term lasts, LockLost
// once the store dropped the entry (ExpireSession, a lapsed session),
// Interrupted once it was given up (Stop), Closed after the Conn's Close.
// It counts and meets faults as OpCheck on the election name.
func (t *term) Check(ctx context.Context) error {
	c := t.p.c
	c.f.count(OpCheck)
	if err := backendkit.CheckContext(ctx, t.p.name); err != nil {
		return err
	}
	if err := c.enter(ctx, OpCheck, t.p.name); err != nil {
		return err
	}
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	switch {
	case t.e.removed && t.e.lost:
		return topo.NewError(topo.LockLost, t.p.name)
	case t.e.removed:
		return topo.NewError(topo.Interrupted, t.p.name)
	}
	return nil
}

// Term implements topo.LeaderParticipation.Term: the current term while
// this participant leads (the same Fence for the whole term), a NotLeader
// *topo.Error otherwise: before WaitForLeadership returned, after Stop,
// and once the term's entry was dropped (ExpireSession, a lapsed
// session) until a later WaitForLeadership wins a new term; Closed after
// Close. It does not contact the store, is not counted and meets no
// faults.
func (p *participation) Term() (topo.Fence, error) {
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	s := p.c.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p.term == nil || p.term.e.removed {
		return nil, topo.NewError(topo.NotLeader, p.name)
	}
	return p.term, nil
}

// owns reports whether f (or a Fence it wraps) was issued by a Conn of s.
func (s *store) owns(f topo.Fence) bool {
	if d, ok := backendkit.FenceAs[*lockDescriptor](f); ok {
		return d.c.s == s
	}
	if t, ok := backendkit.FenceAs[*term](f); ok {
		return t.p.c.s == s
	}
	return false
}

// held reports whether the claim behind f, which s owns, is still held in
// s: the lock was neither unlocked nor dropped, the term's entry is still
// there. Call with s.mu held.
func (s *store) held(f topo.Fence) bool {
	if d, ok := backendkit.FenceAs[*lockDescriptor](f); ok {
		return !d.unlocked && !d.e.removed
	}
	if t, ok := backendkit.FenceAs[*term](f); ok {
		return !t.e.removed
	}
	return false
}
