package memorytopo

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Leader values. A candidate's published value (Campaign, Proclaim) is a
// field of its election entry, set and read under the store's write lock:
// it is created with the entry, goes with it, and is never a file (List,
// ListDir, Watch and Get do not see it; the entry itself still holds
// exactly the participant id, as the layout requires).

// resignGrace bounds Resign when its context has already ended.
const resignGrace = 3 * time.Second

// Proclaim implements topo.LeaderParticipation.Proclaim: under the store's
// write lock it replaces the value published on the entry of this
// participant's current term, if that entry is still in the store, and
// wakes the observers. NotLeader when this participant does not lead (it
// never led, resigned, stopped, or the store dropped its entry:
// ExpireSession, a lapsed session after Partition or PauseKeepAlive),
// InvalidArgument for an oversized value, Closed after Close. Faults and
// Partition apply as OpProclaim (a partitioned Conn's Proclaim blocks
// until Heal and then finds out whether its term survived).
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	c := p.c
	c.f.count(OpProclaim)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return err
	}
	if err := c.enter(ctx, OpProclaim, p.name); err != nil {
		return err
	}
	v := clone(value)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.term == nil || p.term.e.removed || p.leaderCtx == nil || p.leaderCtx.Err() != nil {
		return topo.NewError(topo.NotLeader, p.name)
	}
	p.term.e.el.published = v
	s.dirChanged(p.dir)
	return nil
}

// Resign implements topo.LeaderParticipation.Resign: it removes this
// participant's entry (cancelling its leadership context and ending a
// WaitForLeadership or Campaign that waits, with Interrupted) and returns
// nil once it is gone; nil too when there is no entry. The participant may
// Campaign again. With a ctx that has already ended, the call is attempted
// for a grace of 3 s. When the store cannot be reached in time (Partition,
// a hung server, latency) or a fault fails it, the entry stays until its
// session lapses, the leadership context is cancelled anyway, and Resign
// returns Timeout, Interrupted or the injected error. Closed after Close
// (the entry went with the session). Faults apply as OpResign.
func (p *participation) Resign(ctx context.Context) error {
	c := p.c
	c.f.count(OpResign)
	if ctx.Err() != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignGrace)
		defer cancel()
		ctx = gctx
	}
	s := c.s
	if err := c.enter(ctx, OpResign, p.name); err != nil {
		s.mu.Lock()
		if p.leaderCancel != nil {
			p.leaderCancel()
		}
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.gen++
	if p.entry != nil {
		s.removeEntry(p.entry, false)
		p.entry = nil
	}
	if p.leaderCancel != nil {
		p.leaderCancel()
	}
	return nil
}

// current returns the election's leader under the full directory dir, and
// a channel closed at the next change (of its entries or a Proclaim).
// Call with the store's mu held for writing.
func (s *store) current(dir string) (topo.Leader, <-chan struct{}) {
	var l topo.Leader
	if e := s.first(dir); e != nil {
		l = topo.Leader{ID: e.value, Value: clone(e.publishedValue()), Token: e.seq}
	}
	return l, s.dirChan(dir)
}

// Leader implements topo.LeaderParticipation.Leader: the id, published
// value and term token (the entry's revision, as Term gives the leader) of
// the oldest entry of the election, read at once under the store lock; a
// NoLeader *topo.Error when there is none. Closed after Close; faults and
// Partition apply as OpLeader.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	c := p.c
	c.f.count(OpLeader)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return topo.Leader{}, err
	}
	if err := c.enter(ctx, OpLeader, p.name); err != nil {
		return topo.Leader{}, err
	}
	s := c.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.first(p.dir)
	if e == nil {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.name)
	}
	return topo.Leader{ID: e.value, Value: clone(e.publishedValue()), Token: e.seq}, nil
}

// Observe implements topo.LeaderParticipation.Observe. The state current
// at the time of the call is read before Observe returns and is always
// sent first; after it, each state is read under the store lock when a
// change wakes the feeding goroutine, so the states sent are in store
// order (a leader that resigned or lost its entry is never sent after a
// later state), repeated states are not sent, and while the receiver is
// slow intermediate states are replaced by the latest (the last one sent
// is the current state). The channel closes when ctx ends or the Conn
// closes; memorytopo has no reconnections. Closed after Close; faults and
// Partition apply to the call as OpObserve, not to an established stream.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	c := p.c
	c.f.count(OpObserve)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := c.enter(ctx, OpObserve, p.name); err != nil {
		return nil, err
	}
	return p.observe(ctx), nil
}

// observe starts the feeding goroutine of Observe (and WaitForNewLeader).
func (p *participation) observe(ctx context.Context) <-chan topo.Leader {
	c, s := p.c, p.c.s
	read := func() (topo.Leader, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.current(p.dir)
	}
	cur, changed := read()
	out := make(chan topo.Leader, 1)
	out <- cur // the state at the time of the call, never coalesced
	go func() {
		defer close(out)
		sent := cur
		for {
			if sameLeader(cur, sent) {
				select {
				case <-changed:
					cur, changed = read()
				case <-ctx.Done():
					return
				case <-c.done:
					return
				}
				continue
			}
			// Refresh once before sending, so that a state already
			// replaced is not sent; then the send races further changes
			// (a steady stream of them cannot starve the receiver).
			select {
			case <-changed:
				cur, changed = read()
				if sameLeader(cur, sent) {
					continue
				}
			default:
			}
			select {
			case out <- cur:
				sent = cur
			case <-changed:
				cur, changed = read()
			case <-ctx.Done():
				return
			case <-c.done:
				return
			}
		}
	}()
	return out
}

func sameLeader(a, b topo.Leader) bool {
	return a.ID == b.ID && a.Token == b.Token && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
}

// resumeInfo is what ResumeInfo encodes (JSON).
type resumeInfo struct {
	Backend  string `json:"backend"`
	Store    uint64 `json:"store"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Entry    string `json:"entry"` // full store path of the candidate entry
	Rev      int64  `json:"rev"`   // the entry's revision (its term token)
}

// ResumeInfo implements topo.LeaderParticipation.ResumeInfo: JSON naming
// the backend, the in-process store, the election, the id, the entry's
// store path and revision. A NoNode *topo.Error when this participant has
// no entry in the store; Closed after Close. It does not contact the store, is not counted and
// meets no faults.
func (p *participation) ResumeInfo() ([]byte, error) {
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	s := p.c.s
	s.mu.RLock()
	e := p.entry
	ok := e != nil && !e.removed
	var full string
	if ok {
		full = e.n.fullPath()
	}
	s.mu.RUnlock()
	if !ok {
		return nil, topo.NewError(topo.NoNode, p.name)
	}
	return json.Marshal(resumeInfo{Backend: Name, Store: s.id, Election: p.name, ID: string(p.id), Entry: full, Rev: e.seq})
}

// ResumeLeaderParticipation implements
// topo.Conn.ResumeLeaderParticipation. A "restarted process" is another
// Conn on the same in-process store (the same Factory and serverAddress,
// and the same root): it adopts the session (lease) of the Conn that
// created the entry, which from then on is renewed through c (it ends
// with c's Close or ExpireSession, and no longer with the original
// Conn's; the original Conn gets a new session for its later calls), and
// its other locks and entries with it, as a resumed etcd lease would keep
// them. The returned participation owns the entry: it keeps its place,
// and if it led, WaitForLeadership and Campaign return at once with the
// same term (same Token). The original participation should be abandoned
// (typically its Conn is partitioned or its process gone); it still sees
// the entry and its Stop or Resign would remove it. Errors: those of
// NewLeaderParticipation, InvalidArgument for malformed info or info of
// another backend, store, root, election or id, LockLost when the entry
// is gone (its session ended, or it was resigned), Closed after Close.
// Faults and Partition apply as OpResumeLeaderParticipation.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	c.f.count(OpResumeLeaderParticipation)
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(n, []byte(id)); err != nil {
		return nil, err
	}
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, n, err)
	}
	p := newParticipation(c, n, []byte(id))
	if ri.Backend != Name || ri.Store != c.s.id || ri.Election != n || ri.ID != id ||
		ri.Rev <= 0 || ri.Entry != joinFull(p.dir, seqName(ri.Rev)) {
		return nil, topo.NewError(topo.InvalidArgument, n)
	}
	if err := c.enter(ctx, OpResumeLeaderParticipation, n); err != nil {
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.closedErr(n); err != nil {
		return nil, err
	}
	nd := s.lookup(ri.Entry)
	if nd == nil || nd.entry == nil || nd.entry.seq != ri.Rev || nd.entry.removed || nd.entry.lease.revoked {
		return nil, topo.NewError(topo.LockLost, n)
	}
	e := nd.entry
	if e.value != string(p.id) {
		return nil, topo.NewError(topo.InvalidArgument, n)
	}
	s.adoptLease(e.lease, c)
	p.entry = e
	if s.predecessor(e) == nil {
		p.lead(e)
	}
	return p, nil
}

// adoptLease makes c renew l from now on, in place of the Conn that held
// it. Call with mu held for writing.
func (s *store) adoptLease(l *lease, c *Conn) {
	old := l.c
	if old == c {
		return
	}
	delete(old.leases, l)
	if old.session == l {
		old.session = nil
	}
	l.c = c
	c.leases[l] = struct{}{}
	s.refreshLease(l)
}
