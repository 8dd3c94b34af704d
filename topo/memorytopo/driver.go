package memorytopo

import (
	"context"
	"encoding/json"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// driver implements claims.Driver on c's store: each method is one step
// under the store's mu, as one request to a networked store. Counting and
// faults are the engine's hooks' (Conn.claimHooks).
//
// Tokens are monotone: an entry's token is the store revision of its
// creation, from a counter that only grows (nothing that drops entries
// touches it). The engine grants an entry only once it heads its queue,
// so every entry created before it has left, and later ones have greater
// revisions.
type driver struct{ c *Conn }

var (
	_ claims.Driver       = driver{}
	_ claims.GoneSignaler = driver{}
	_ claims.Roomer       = driver{}
	_ claims.TurnSignaler = driver{}
)

// dir is the full store path of q's queue: <dir>/locks for a lock,
// elections/<name> for an election.
func (d driver) dir(q claims.Queue) string {
	if q.Election {
		return joinRoot(d.c.root, electionsDir+"/"+q.Path)
	}
	return joinRoot(d.c.root, joinRoot(q.Path, locksDir))
}

// queue returns q's queue through the root index, nil when it has none
// and create is not set. Call with mu held, for writing to create.
func (d driver) queue(q claims.Queue, create bool) *queue {
	m := d.c.queues.locks
	if q.Election {
		m = d.c.queues.elections
	}
	if x := m[q.Path]; x != nil {
		return x
	}
	dir := d.dir(q)
	x := d.c.s.queues[dir]
	if create {
		if x == nil {
			x = &queue{dir: dir}
			d.c.s.queues[dir] = x
		}
		m[q.Path] = x
	}
	return x
}

// lockDir returns the node of the directory q locks, or nil: the one its
// queue x (nil: none yet) remembers while not pruned, else the tree's.
func (d driver) lockDir(x *queue, q claims.Queue) *node {
	if x != nil && x.lockDir != nil && !x.lockDir.pruned {
		return x.lockDir
	}
	n := d.c.node(q.Path)
	if x != nil {
		x.lockDir = n
	}
	return n
}

// entryOf is the engine's view of e: Key is its queue's directory, Ref e.
func entryOf(e *entry) claims.Entry {
	ent := claims.Entry{Token: e.seq, Key: e.q.dir, Contents: e.value, Ref: e}
	if p := e.pub; p != nil {
		ent.Value, ent.ValueRev = p.value, p.rev
	}
	return ent
}

// live returns the entry behind e while it is in the store on the live
// lease v, still this Conn's (see Resume), else nil. Call with mu held.
func (d driver) live(v *claims.Session, e claims.Entry) *entry {
	x, _ := e.Ref.(*entry)
	if l, _ := v.Ref().(*lease); x == nil || x.removed || x.lease != l || l.revoked || l.c != d.c {
		return nil
	}
	return x
}

// Create implements claims.Driver; the entry is granted if it heads its queue.
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	s := d.c.s
	s.lock()
	defer s.mu.Unlock()
	e, v, err := d.create(q, contents, &opts)
	if err != nil {
		return claims.Entry{}, nil, err
	}
	ent := entryOf(e)
	ent.Granted = e.sprev == nil // no entry can come ahead of it later
	return ent, v, nil
}

// CreateLock implements claims.Roomer: Create for a lock, its entry set
// in the room allocated with it (lockEntry).
func (d driver) CreateLock(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (*claims.LockRoom, *claims.Session, error) {
	s := d.c.s
	s.lock()
	defer s.mu.Unlock()
	e, v, err := d.create(q, contents, &opts)
	if err != nil {
		return nil, nil, err
	}
	r := e.room
	e.room = nil
	granted := e.sprev == nil
	r.SetEntry(e.seq, e.q.dir, "", e.value, granted, e)
	if !granted {
		e.wake = make(chan struct{})
		r.SetTurn(e.wake)
	}
	return r, v, nil
}

// Turn implements claims.TurnSignaler: whether the lock entry ref, whose
// wake channel closed, was granted rather than removed (wakeTurn).
func (d driver) Turn(ref any) bool {
	x, _ := ref.(*entry)
	return x != nil && x.turn.Load() == turnGranted
}

// create is Create's step, with mu held for writing: the checks, then the
// entry, on c's session for Lock, TryLock and candidates, on a lease of
// its own for LockWithTTL (its ttl) and LockName (NamedLockTTL).
func (d driver) create(q claims.Queue, contents string, opts *claims.CreateOptions) (*entry, *claims.Session, error) {
	c, s := d.c, d.c.s
	if err := c.closedErr(q.Path); err != nil {
		return nil, nil, err
	}
	x := d.queue(q, false)
	if opts.RequireFiles {
		n := d.lockDir(x, q)
		if !filesBelow(n) {
			return nil, nil, backendkit.LockNeedsFiles(q.Path, n != nil && n.file.Load() != nil)
		}
	}
	if x == nil {
		x = d.queue(q, true)
	}
	if h := x.head; opts.Exclusive && h != nil {
		return nil, nil, &claims.BusyError{Head: entryOf(h)}
	}
	var l *lease
	switch {
	case opts.TTL > 0:
		l = s.newLease(c, opts.TTL)
	case !q.Election && !opts.RequireFiles:
		l = s.newLease(c, s.f.opts.NamedLockTTL)
	default:
		if c.session == nil || c.session.revoked {
			c.session = s.newLease(c, s.f.opts.SessionTTL)
		}
		l = c.session
	}
	e := s.addEntry(x, contents, l, q.Election)
	if q.Election && opts.Value != nil {
		e.pub = &publication{value: opts.Value}
	}
	return e, l.view, nil
}

// List implements claims.Driver.
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	s := d.c.s
	s.rlock()
	defer s.mu.RUnlock()
	var out []claims.Entry
	for e := d.queue(q, false).first(); e != nil; e = e.snext {
		out = append(out, entryOf(e))
	}
	return out, nil
}

// WaitGone implements claims.Driver on the entry's gone channel (goneOf).
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	s := d.c.s
	x, _ := e.Ref.(*entry)
	s.rlock()
	gone := goneOf(x)
	s.mu.RUnlock()
	select {
	case <-gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GoneAhead implements claims.GoneSignaler: in one read, whatever the
// queue's length, how many entries are ahead of e (up to 2) and the gone
// channel of the one just ahead.
func (d driver) GoneAhead(q claims.Queue, e claims.Entry) (<-chan struct{}, int, bool) {
	s := d.c.s
	x, _ := e.Ref.(*entry)
	s.rlock()
	defer s.mu.RUnlock()
	if x == nil || x.removed {
		return nil, 0, false
	}
	p := x.sprev
	switch {
	case p == nil:
		return nil, 0, true
	case p.sprev == nil:
		return goneOf(p), 1, true
	}
	return goneOf(p), 2, true
}

// goneOf returns x's gone channel (see entry.gone), a closed one when x
// is nil or gone. Call with mu held, for reading at least.
func goneOf(x *entry) <-chan struct{} {
	if x == nil || x.removed {
		return closedChan
	}
	if gone, _ := x.gone.Load().(chan struct{}); gone != nil {
		return gone
	}
	gone := make(chan struct{})
	if !x.gone.CompareAndSwap(nil, gone) { // another waiter made it first
		gone = x.gone.Load().(chan struct{})
	}
	return gone
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Delete implements claims.Driver by identity (the entry itself, on its
// live lease), never "the entry at this path". On a lease this Conn
// adopted it revokes the lease even when the entry is gone already (given
// up at a partition's notice, healed since).
func (d driver) Delete(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) error {
	s := d.c.s
	s.lock()
	defer s.mu.Unlock()
	x := d.live(v, e)
	if x != nil {
		s.removeEntry(x)
	}
	if l, _ := v.Ref().(*lease); l != nil && l.adopted && l.c == d.c {
		// Only resumed participations have claims on an adopted lease:
		// the Conn's own go on its session.
		s.revokeLease(l)
	}
	if x == nil {
		return claims.ErrNotHeld
	}
	return nil
}

// Held implements claims.Driver: the entry is live and heads its queue.
func (d driver) Held(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) (bool, error) {
	s := d.c.s
	s.rlock()
	defer s.mu.RUnlock()
	x := d.live(v, e)
	return x != nil && x.sprev == nil, nil
}

// Head implements claims.Driver.
func (d driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	s := d.c.s
	var changed <-chan struct{}
	var x *queue
	if watch {
		s.lock()
		defer s.mu.Unlock()
		x = d.queue(q, true)
		changed = x.watch()
	} else {
		s.rlock()
		defer s.mu.RUnlock()
		x = d.queue(q, false)
	}
	if h := x.first(); h != nil {
		return entryOf(h), true, changed, nil
	}
	return claims.Entry{}, false, changed, nil
}

// SetValue implements claims.Driver, guarded on the entry being live
// (the engine proclaims only for a granted claim, the head while live).
func (d driver) SetValue(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry, value []byte) error {
	s := d.c.s
	s.lock()
	defer s.mu.Unlock()
	x := d.live(v, e)
	if x == nil {
		return claims.ErrNotHeld
	}
	rev := int64(1)
	if x.pub != nil {
		rev = x.pub.rev + 1
	}
	x.pub = &publication{value: value, rev: rev}
	x.q.changedNow()
	return nil
}

type resumeInfo struct {
	Backend  string `json:"backend"`
	Store    uint64 `json:"store"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Entry    string `json:"entry"` // full store path of the candidate entry
	Rev      int64  `json:"rev"`   // the entry's revision (its term token)
}

// ResumeInfo implements claims.Driver: resumeInfo in JSON.
func (d driver) ResumeInfo(q claims.Queue, v *claims.Session, e claims.Entry) ([]byte, error) {
	return json.Marshal(resumeInfo{Backend: Name, Store: d.c.s.id, Election: q.Path, ID: e.Contents, Entry: e.Key + "/" + seqName(e.Token), Rev: e.Token})
}

// Resume implements claims.Driver for a Conn of the same store and root
// (else InvalidArgument) by adopting the entry's lease (adoptLease),
// which this Conn's Close and ExpireSession also end. The original Conn
// loses every claim on the lease (LockLost; its entries stay until the
// lease ends) and puts its next claims on a new lease.
func (d driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, err)
	}
	c, s := d.c, d.c.s
	if ri.Backend != Name || ri.Store != s.id || ri.Election != q.Path || ri.ID != id ||
		ri.Rev <= 0 || ri.Entry != d.dir(q)+"/"+seqName(ri.Rev) {
		return claims.Entry{}, nil, topo.NewError(topo.InvalidArgument, q.Path)
	}
	s.lock()
	defer s.mu.Unlock()
	if err := c.closedErr(q.Path); err != nil {
		return claims.Entry{}, nil, err
	}
	x := d.queue(q, false).first()
	for x != nil && x.seq != ri.Rev {
		x = x.snext
	}
	if x == nil || x.lease.revoked {
		return claims.Entry{}, nil, claims.ErrNotHeld
	}
	if x.value != id {
		return claims.Entry{}, nil, topo.NewError(topo.InvalidArgument, q.Path)
	}
	x.noticed = false // held again: renewal through c keeps it
	s.adoptLease(x.lease, c)
	x.lease.view.LoseEntry(x.q.dir, x.seq)
	return entryOf(x), x.lease.view, nil
}

// MapError implements claims.Driver; the driver's own errors are *topo.Errors.
func (d driver) MapError(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, d.c.closed.Load(), func(error) topo.ErrorCode { return topo.Unavailable })
}

// guard returns the engine's claim behind f (through Unwrap) when a Conn
// of s issued it; mine reports whether any memorytopo Conn did.
func (s *store) guard(f topo.Fence) (g claims.Guard, ours, mine bool) {
	g, ok := claims.FenceGuard(f)
	if !ok {
		return g, false, false
	}
	d, mine := g.Driver().(driver)
	return g, mine && d.c.s == s, mine
}

// held reports whether the claim behind f, which s issued, is still held
// (IfHeld): neither released nor lost, its entry live. Call with s.mu
// held: every end of a claim in the store holds it for writing.
func (s *store) held(f topo.Fence) bool {
	g, ours, _ := s.guard(f)
	return ours && g.Live() && g.Driver().(driver).live(g.Session(), g.Entry()) != nil
}
