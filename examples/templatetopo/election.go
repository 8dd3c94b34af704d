package templatetopo

import (
	"context"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Elections. An election is a queue, like a lock: candidates are entries
// at elections/<name>/locks/<token>, on the session of their Conn; the
// oldest leads, the others wait in order. A term's token is its
// candidate's creation revision, monotone for the reason lock tokens are
// (see lock.go): a leader's entry heads the queue, so every earlier
// candidate has left it.

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
	return &participation{
		c:    c,
		name: n,
		key:  c.full(backendkit.ElectionsDirName + "/" + n),
		id:   id,
		stop: make(chan struct{}),
	}, nil
}

// participation is one participant. Its current campaign and term are
// guarded by store.mu.
type participation struct {
	c    *Conn
	name string // the canonical election name
	key  string // the queue: the store path of elections/<name>
	id   string

	// campaign serialises WaitForLeadership calls.
	campaign sync.Mutex
	stop     chan struct{}
	stopOnce sync.Once

	cur     *claim          // the current candidate entry (waiting or leading), or nil
	leading *claim          // cur, once WaitForLeadership returned it
	lctx    context.Context // leading's leadership context
	term    *term           // leading's Fence, the same value for the whole term
}

// term is a leadership term as a topo.Fence (it cannot be unlocked: Stop
// ends it).
type term struct{ *claim }

// WaitForLeadership implements topo.LeaderParticipation: it creates a
// candidate entry on the Conn's session (opening one if needed) and waits
// until the entry heads the queue. The returned context is cancelled, with
// the cause, when the term ends: Stop, the session's end (ExpireSession,
// Cut, Close, Restart). It returns Interrupted after Stop, Closed after the
// Conn's Close, LockLost when the session ended while waiting, and the
// same context again while leading.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.campaign.Lock()
	defer p.campaign.Unlock()
	c, s := p.c, p.c.store
	s.mu.Lock()
	if p.leading != nil && p.leading.state == claimHeld {
		ctx := p.lctx
		s.mu.Unlock()
		return ctx, nil
	}
	s.mu.Unlock()

	var cl *claim
	var lctx context.Context
	err := c.do(func(s *Store) error {
		if closedChan(p.stop) {
			return topo.NewError(topo.Interrupted, p.name)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		cl = s.enqueue(c, p.key, p.name, p.id, c.session(s))
		cl.cancel = cancel
		p.cur, lctx = cl, ctx
		return nil
	})
	if err != nil {
		return nil, c.mapErr(context.Background(), err, p.name)
	}
	if err := c.await(context.Background(), cl, p.stop); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.state != claimHeld { // the term ended as soon as it began
		return nil, cl.stateErr()
	}
	p.leading, p.lctx, p.term = cl, lctx, &term{cl}
	return lctx, nil
}

// Term implements topo.LeaderParticipation.Term: the current term while
// WaitForLeadership has returned it and it has not ended, NotLeader
// otherwise. It answers from the participant's own view, which in this
// store is never behind the store's (endSession tells the holder first);
// IfHeld(term) asks the store.
func (p *participation) Term() (topo.Fence, error) {
	s := p.c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.leading == nil || p.leading.state != claimHeld {
		return nil, topo.NewError(topo.NotLeader, p.name)
	}
	return p.term, nil
}

// Stop implements topo.LeaderParticipation.Stop: it ends the current term
// or campaign (the leadership context is cancelled) and removes the entry,
// in one request, so the next candidate leads only after this one's context
// was cancelled. A waiting WaitForLeadership returns Interrupted.
// Idempotent.
func (p *participation) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	// Refused on a closed or cut Conn: the session, and the entry with it,
	// has ended already.
	_ = p.c.do(func(s *Store) error {
		if p.cur != nil {
			p.cur.end(claimReleased)
			s.remove(p.cur)
		}
		return nil
	})
}

// GetCurrentLeaderID implements topo.LeaderParticipation: the id of the
// candidate heading the queue, "" when there is none.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return "", err
	}
	var id string
	err := p.c.do(func(s *Store) error {
		if h := s.head(p.key); h != nil {
			id = h.contents
		}
		return nil
	})
	if err != nil {
		return "", p.c.mapErr(ctx, err, p.name)
	}
	return id, nil
}

// WaitForNewLeader implements topo.LeaderParticipation: the leader current
// at the time of the call first (read before it returns), then the leader
// of each new term (a new head of the queue; a moment without a leader is
// not sent). The channel closes when ctx ends or the Conn is closed.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	c := p.c
	var cur *claim
	var changed <-chan struct{}
	err := c.do(func(s *Store) error {
		cur, changed = s.head(p.key), s.changed
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p.name)
	}
	ch := make(chan string, 1)
	go func() {
		defer close(ch)
		var last int64 // the token of the last term sent
		for {
			if cur != nil && cur.token != last {
				last = cur.token
				select {
				case ch <- cur.contents:
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
			if changed, ok = c.observe(ctx, func(s *Store) { cur = s.head(p.key) }); !ok {
				return
			}
		}
	}()
	return ch, nil
}
