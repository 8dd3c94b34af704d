package templatetopo

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Elections. An election is a queue, like a lock: candidates are entries
// at elections/<name>/locks/<token>, on the session of their Conn, each
// holding the participant's id; the oldest leads, the others wait in
// order. A candidate's published value (Campaign, Proclaim) lives beside
// its entry, on the claim, and goes with it; ListDir does not show it. A
// term's token is its candidate's creation revision, monotone for the
// reason lock tokens are (see lock.go): a leader's entry heads the queue,
// so every earlier candidate has left it. A resumed candidacy keeps its
// entry, so its token.

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation. It
// returns the InvalidArgument or InvalidPath *topo.Error of
// backendkit.CheckElection, and Closed after Close. Nothing is written.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, n)
	}
	return c.newParticipation(n, id), nil
}

func (c *Conn) newParticipation(name, id string) *participation {
	return &participation{
		c:    c,
		name: name,
		key:  c.full(backendkit.ElectionsDirName + "/" + name),
		id:   id,
		stop: make(chan struct{}),
	}
}

// participation is one participant. Its current candidacy and term are
// guarded by store.mu.
type participation struct {
	c    *Conn
	name string // the canonical election name
	key  string // the queue: the store path of elections/<name>
	id   string

	// campaign serialises WaitForLeadership and Campaign calls.
	campaign sync.Mutex
	stop     chan struct{}
	stopOnce sync.Once

	cur     *claim          // the current candidacy (waiting or leading), or nil
	lctx    context.Context // cur's leadership context
	leading *claim          // cur, once WaitForLeadership or Campaign returned it
	term    *term           // leading's Fence, the same value for the whole term
}

// term is a leadership term as a topo.Fence (it cannot be unlocked: Stop
// and Resign end it).
type term struct{ *claim }

// WaitForLeadership implements topo.LeaderParticipation: it creates a
// candidate entry on the Conn's session (opening one if needed), or keeps
// the current one (a resumed candidacy, or one a concurrent call created),
// and waits until it heads the queue. The returned context is cancelled,
// with the cause, when the term ends: Stop, Resign, the session's end
// (ExpireSession, Cut, Close, Restart). It returns Interrupted after Stop
// (or when Resign withdrew the candidacy), Closed after the Conn's Close,
// LockLost when the session ended while waiting, and the same context
// again while leading.
func (p *participation) WaitForLeadership() (context.Context, error) {
	return p.lead(context.Background(), nil, false)
}

// Campaign implements topo.LeaderParticipation: WaitForLeadership bounded
// by ctx (the candidacy is withdrawn when ctx ends first, and Campaign
// returns Timeout or Interrupted), with value published beside the
// candidacy from its creation, so a leader is never seen without it.
// While leading it proclaims value and returns the same context.
// InvalidArgument for a value larger than topo.MaxValueSize.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return nil, err
	}
	return p.lead(ctx, slices.Clone(value), true)
}

// lead is WaitForLeadership (setValue false) and Campaign.
func (p *participation) lead(ctx context.Context, value []byte, setValue bool) (context.Context, error) {
	p.campaign.Lock()
	defer p.campaign.Unlock()
	c := p.c
	var cl *claim
	var lctx context.Context
	leading := false
	err := c.do(func(s *Store) error {
		if closedChan(p.stop) {
			return topo.NewError(topo.Interrupted, p.name)
		}
		if p.cur != nil && p.cur.state == claimHeld { // keep the candidacy we have
			if setValue {
				s.setValue(p.cur, value)
			}
			cl, lctx, leading = p.cur, p.lctx, p.leading == p.cur
			return nil
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		cl = s.enqueue(c, p.key, p.name, p.id, c.session(s))
		cl.cancel, cl.value = cancel, value
		p.cur, p.lctx, lctx = cl, ctx, ctx
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p.name)
	}
	if leading {
		return lctx, nil
	}
	if err := c.await(ctx, cl, p.stop); err != nil {
		return nil, err
	}
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.state != claimHeld { // the term ended as soon as it began
		return nil, cl.stateErr()
	}
	p.leading, p.term = cl, &term{cl}
	return lctx, nil
}

// Term implements topo.LeaderParticipation.Term: the current term while
// WaitForLeadership or Campaign has returned it and it has not ended,
// NotLeader otherwise. It answers from the participant's own view, which in
// this store is never behind the store's (endSession tells the holder
// first); IfHeld(term) asks the store.
func (p *participation) Term() (topo.Fence, error) {
	s := p.c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.leading == nil || p.leading.state != claimHeld {
		return nil, topo.NewError(topo.NotLeader, p.name)
	}
	return p.term, nil
}

// Proclaim implements topo.LeaderParticipation: in one request, guarded on
// the current term (the store checks that this participant's entry heads
// the queue), it replaces the published value; observers see it with the
// same Token. NotLeader when this participant does not lead (any more),
// InvalidArgument for an oversized value.
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return err
	}
	err := p.c.do(func(s *Store) error {
		if p.leading == nil || !s.holds(p.leading) {
			return topo.NewError(topo.NotLeader, p.name)
		}
		s.setValue(p.leading, slices.Clone(value))
		return nil
	})
	return p.c.mapErr(ctx, err, p.name)
}

// Resign implements topo.LeaderParticipation: it ends the current term or
// candidacy (the leadership context is cancelled) and removes the entry,
// in one request, so the next candidate leads only after this one's
// context was cancelled; a waiting WaitForLeadership or Campaign returns
// Interrupted. The participant may campaign again. The removal is one
// in-process request, so ctx does not bound it (a cancelled ctx works). It
// returns nil when there is nothing to resign, also on a cut or closed
// Conn, whose session, and the entry with it, has ended.
func (p *participation) Resign(ctx context.Context) error {
	_ = p.c.do(func(s *Store) error {
		p.withdraw(s)
		return nil
	})
	return nil
}

// withdraw ends and removes the current candidacy. Called with store.mu
// held.
func (p *participation) withdraw(s *Store) {
	if p.cur == nil {
		return
	}
	p.cur.end(claimReleased)
	s.remove(p.cur)
	p.cur, p.leading, p.term, p.lctx = nil, nil, nil, nil
}

// Stop implements topo.LeaderParticipation.Stop: Resign, after which
// WaitForLeadership and Campaign return Interrupted. Idempotent.
func (p *participation) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	_ = p.c.do(func(s *Store) error {
		p.withdraw(s)
		return nil
	})
}

// Leader implements topo.LeaderParticipation: the id, value and token of
// the candidate heading the queue, read in one request; NoLeader when the
// queue is empty.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return topo.Leader{}, err
	}
	var l topo.Leader
	err := p.c.do(func(s *Store) error {
		l = s.leader(p.key)
		return nil
	})
	if err != nil {
		return topo.Leader{}, p.c.mapErr(ctx, err, p.name)
	}
	if l.ID == "" {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.name)
	}
	return l, nil
}

// GetCurrentLeaderID implements topo.LeaderParticipation: the id of the
// candidate heading the queue, "" when there is none.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return "", err
	}
	var l topo.Leader
	err := p.c.do(func(s *Store) error {
		l = s.leader(p.key)
		return nil
	})
	if err != nil {
		return "", p.c.mapErr(ctx, err, p.name)
	}
	return l.ID, nil
}

// leaderState is what Observe compares: the head's token and the revision
// of its value.
type leaderState struct{ token, valueRev int64 }

// Observe implements topo.LeaderParticipation: the leader current at the
// time of the call first (read before it returns; Leader{} when nobody
// leads), then, after every change of the store, the leader again if its
// term or value changed. Each event is read in one request, so the last
// one sent is the current state and an ended term is never sent as
// current. While the Conn is cut nothing is sent; after Heal the state is
// read again. The channel closes when ctx ends or the Conn is closed.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	c := p.c
	var cur topo.Leader
	var st leaderState
	read := func(s *Store) {
		cur, st = s.leader(p.key), leaderState{}
		if h := s.head(p.key); h != nil {
			st = leaderState{h.token, h.valueRev}
		}
	}
	var changed <-chan struct{}
	err := c.do(func(s *Store) error {
		read(s)
		changed = s.changed
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p.name)
	}
	ch := make(chan topo.Leader, 1)
	go func() {
		defer close(ch)
		last := leaderState{token: -1}
		for {
			if st != last {
				last = st
				select {
				case ch <- cur:
				case <-ctx.Done():
					return
				case <-c.closing:
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-c.closing:
				return
			}
			var ok bool
			if changed, ok = c.observe(ctx, read); !ok {
				return
			}
		}
	}()
	return ch, nil
}

// WaitForNewLeader implements topo.LeaderParticipation as a view of
// Observe: the ids of its events, without "" (nobody leads) and without
// repeats of the id sent last. The first id is the leader current at the
// time of the call.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	leaders, err := p.Observe(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan string, 1)
	go func() {
		defer close(ch)
		last := ""
		for l := range leaders {
			if l.ID == "" || l.ID == last {
				continue
			}
			last = l.ID
			select {
			case ch <- l.ID:
			case <-ctx.Done():
				for range leaders { // Observe closes soon: ctx ended
				}
				return
			case <-p.c.closing:
				for range leaders { // Observe closes soon: the Conn closed
				}
				return
			}
		}
	}()
	return ch, nil
}

// resumeInfo is what ResumeInfo returns, as JSON: enough for
// ResumeLeaderParticipation to find the store, the session and the entry.
type resumeInfo struct {
	Backend  string `json:"backend"`
	Store    string `json:"store"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Session  int64  `json:"session"`
	Token    int64  `json:"token"`
}

// ResumeInfo implements topo.LeaderParticipation: the current candidacy's
// store, session and entry token, as JSON. NoNode when there is no
// candidacy.
func (p *participation) ResumeInfo() ([]byte, error) {
	s := p.c.store
	s.mu.Lock()
	cl := p.cur
	ok := cl != nil && cl.state == claimHeld
	s.mu.Unlock()
	if !ok {
		return nil, topo.NewError(topo.NoNode, p.name)
	}
	return json.Marshal(resumeInfo{Backend: FactoryName, Store: s.id, Election: p.name, ID: p.id, Session: cl.sess.id, Token: cl.token})
}

// ResumeLeaderParticipation implements topo.Conn: it takes back the
// candidacy described by info (from ResumeInfo, on the same Store) for
// name and id. In one request, c adopts the candidacy's session (the Conn
// that held it no longer owns it: c's Close, Cut and ExpireSession now end
// it) and a new claim replaces the old one in its place in the queue, with
// the same token and value (the old participation's claim is lost). If it
// led, WaitForLeadership and Campaign return at once with the same Token.
// It returns LockLost when the session or the entry is gone,
// InvalidArgument for malformed info or info for another backend, store,
// election or id, and the errors of NewLeaderParticipation.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, n, err)
	}
	if ri.Backend != FactoryName || ri.Store != c.store.id || ri.Election != n || ri.ID != id {
		return nil, backendkit.Wrap(topo.InvalidArgument, n,
			errors.New("resume info of another backend, store, election or participant id"))
	}
	p := c.newParticipation(n, id)
	err = c.do(func(s *Store) error {
		ss := s.sessions[ri.Session]
		if ss == nil {
			return errSessionEnded
		}
		old := s.find(p.key, ri.Token)
		if old == nil || old.sess != ss {
			return errSessionEnded
		}
		c.adopt(ss)
		ctx, cancel := context.WithCancelCause(context.Background())
		cl := s.replace(old, c, cancel)
		p.cur, p.lctx = cl, ctx
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, n)
	}
	return p, nil
}

// leader returns the head of key's queue as a topo.Leader (the zero Leader
// when the queue is empty).
func (s *Store) leader(key string) topo.Leader {
	h := s.head(key)
	if h == nil {
		return topo.Leader{}
	}
	return topo.Leader{ID: h.contents, Value: slices.Clone(h.value), Token: h.token}
}

// setValue publishes value for cl.
func (s *Store) setValue(cl *claim, value []byte) {
	cl.value, cl.valueRev = value, s.next()
	s.notify()
}
