package memorytopo

import (
	"context"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// electionsDir is the root directory of leader elections (the same layout
// as etcd2topo and zk2topo).
const electionsDir = "elections"

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation. name
// is a path below elections/; each candidate is an ephemeral entry under
// elections/<name>/ attached to c's session, holding id, and the oldest
// entry leads. It returns InvalidArgument for an empty name or id,
// InvalidPath for a malformed name, and Closed after Close. Only error
// faults apply to it (see OpNewLeaderParticipation).
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	c.f.count(OpNewLeaderParticipation)
	p, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p, []byte(id)); err != nil {
		return nil, err
	}
	if err := c.closedErr(p); err != nil {
		return nil, err
	}
	if fs := c.f.faultState.Load(); fs != nil {
		// Error faults only: nothing happens in the store yet.
		stripped := &faultState{err: fs.err, rules: fs.rules}
		if err := c.f.injectState(context.Background(), stripped, OpNewLeaderParticipation, p, c.done); err != nil {
			return nil, err
		}
	}
	return newParticipation(c, p, []byte(id)), nil
}

// participation is one candidate of a memorytopo election.
type participation struct {
	c          *Conn
	name       string // canonical election name
	dir        string // full path of the election directory
	id         []byte
	stopCtx    context.Context // cancelled by Stop
	stopCancel context.CancelFunc
	stopOnce   sync.Once

	// waitSem (capacity 1) serialises WaitForLeadership, Campaign and the
	// end of Stop; a Campaign waits for it only until its ctx ends.
	waitSem chan struct{}

	// Guarded by the store's mu.
	entry        *entry
	leaderCtx    context.Context
	leaderCancel context.CancelFunc
	term         *term  // the current or last term; its entry is removed once it ended
	gen          uint64 // incremented by Resign: a wait begun before it returns Interrupted
}

func newParticipation(c *Conn, name string, id []byte) *participation {
	stopCtx, stopCancel := context.WithCancel(context.Background())
	return &participation{
		c:          c,
		name:       name,
		dir:        c.full(joinFull(electionsDir, name)),
		id:         id,
		stopCtx:    stopCtx,
		stopCancel: stopCancel,
		waitSem:    make(chan struct{}, 1),
	}
}

// WaitForLeadership implements topo.LeaderParticipation.WaitForLeadership:
// it adds this participant's entry (again, under a new session, if the
// previous one was lost) and blocks until it is the oldest. The returned
// context is cancelled when the entry goes: Stop, Resign, ExpireSession, a
// lapsed session (also after Conn.Partition), or the Conn's Close. It
// returns Interrupted after Stop (also when Stop ends the wait) and when
// Resign ends the wait, and Closed after Close. Latency and a hung server
// delay it until Stop. The entry publishes no value (Leader.Value nil)
// unless an earlier Campaign or Proclaim of the same entry set one.
func (p *participation) WaitForLeadership() (context.Context, error) {
	c := p.c
	c.f.count(OpWaitForLeadership)
	if err := c.closedErr(p.name); err != nil {
		return nil, err
	}
	if p.stopCtx.Err() != nil {
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	return p.campaign(p.stopCtx, OpWaitForLeadership, nil, false)
}

// Campaign implements topo.LeaderParticipation.Campaign: as
// WaitForLeadership, bounded by ctx, with value stored on the candidate
// entry when the entry is created (or, for an entry already waiting,
// replaced) under the store's write lock, so that the leader is never seen
// without it. While leading it proclaims value and returns the same
// context. When ctx ends before this participant leads, the entry is
// removed and Campaign returns Timeout or Interrupted. Interrupted after
// Stop and when a Resign ends the wait, Closed after Close,
// InvalidArgument for an oversized value. Faults apply as OpCampaign.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	c := p.c
	c.f.count(OpCampaign)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return nil, err
	}
	if err := c.closedErr(p.name); err != nil {
		return nil, err
	}
	if p.stopCtx.Err() != nil {
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.stopCtx, cancel)
	defer stop()
	lctx, err := p.campaign(cctx, OpCampaign, clone(value), true)
	if err != nil && p.stopCtx.Err() == nil {
		if cerr := backendkit.FromContext(ctx, p.name); cerr != nil {
			return nil, cerr
		}
	}
	return lctx, err
}

// campaign is WaitForLeadership and Campaign: ctx ends the wait (it ends
// with Stop too); with withValue, value (owned by the callee) is
// published.
func (p *participation) campaign(ctx context.Context, op Operation, value []byte, withValue bool) (context.Context, error) {
	c := p.c
	interrupted := func() error {
		if p.stopCtx.Err() != nil {
			return topo.NewError(topo.Interrupted, p.name)
		}
		return interruptedOrTimeout(ctx, p.name)
	}
	select {
	case p.waitSem <- struct{}{}:
	case <-ctx.Done():
		return nil, interrupted()
	case <-c.done:
		return nil, topo.NewError(topo.Closed, p.name)
	}
	defer func() { <-p.waitSem }()
	if err := c.enter(ctx, op, p.name); err != nil {
		if p.stopCtx.Err() != nil {
			return nil, topo.NewError(topo.Interrupted, p.name)
		}
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	gen := p.gen
	if p.leaderCtx != nil && p.leaderCtx.Err() == nil {
		if withValue {
			p.entry.el.published = value
			s.dirChanged(p.dir)
		}
		ctx := p.leaderCtx
		s.mu.Unlock()
		return ctx, nil
	}
	for {
		if err := c.closedErr(p.name); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if p.gen != gen {
			s.mu.Unlock()
			return nil, topo.NewError(topo.Interrupted, p.name)
		}
		if ctx.Err() != nil {
			// Withdraw: Stop, or the Campaign's ctx ended.
			if p.entry != nil {
				s.removeEntry(p.entry, false)
			}
			s.mu.Unlock()
			return nil, interrupted()
		}
		if p.entry == nil || p.entry.removed {
			p.entry = s.addEntry(p.dir, string(p.id), s.sessionLease(c))
			p.entry.el = &candidacy{}
			if withValue {
				p.entry.el.published = value
			}
		} else if withValue {
			p.entry.el.published = value // not leading: nobody observes it yet
		}
		e := p.entry
		pred := s.predecessor(e)
		if pred == nil {
			p.lead(e)
			ctx := p.leaderCtx
			s.mu.Unlock()
			return ctx, nil
		}
		predDone, own := s.done(pred), s.done(e)
		s.mu.Unlock()
		select {
		case <-predDone:
		case <-own:
		case <-ctx.Done():
		case <-c.done:
		}
		s.mu.Lock()
	}
}

// lead starts a term of p on its entry e, the oldest of the election,
// with a new leadership context cancelled when e goes. Call with the
// store's mu held for writing.
func (p *participation) lead(e *entry) {
	ctx, cancel := context.WithCancel(context.Background())
	if e.el == nil {
		e.el = &candidacy{}
	}
	prev := e.el.onRemove
	e.el.onRemove = func() {
		if prev != nil {
			prev()
		}
		cancel()
	}
	prevLapse := e.el.onLapse
	e.el.onLapse = func() {
		if prevLapse != nil {
			prevLapse()
		}
		cancel()
	}
	p.leaderCtx, p.leaderCancel = ctx, cancel
	p.term = &term{p: p, e: e}
}

// Stop implements topo.LeaderParticipation.Stop: it removes this
// participant's entry (cancelling its leadership context) and makes every
// later WaitForLeadership and Campaign return Interrupted. Idempotent; it
// returns once the entry is gone.
func (p *participation) Stop() {
	p.stopOnce.Do(p.stopCancel)
	p.waitSem <- struct{}{}
	defer func() { <-p.waitSem }()
	s := p.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.entry != nil {
		s.removeEntry(p.entry, false)
	}
}

// GetCurrentLeaderID implements topo.LeaderParticipation.GetCurrentLeaderID:
// the id held by the oldest entry of the election, or "" with a nil error
// when there is none. Closed after Close.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	c := p.c
	c.f.count(OpGetCurrentLeaderID)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return "", err
	}
	if err := c.enter(ctx, OpGetCurrentLeaderID, p.name); err != nil {
		return "", err
	}
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	if e := c.s.first(p.dir); e != nil {
		return e.value, nil
	}
	return "", nil
}

// WaitForNewLeader implements topo.LeaderParticipation.WaitForNewLeader,
// as a view of Observe: the channel receives the id of the leader current
// at the time of the call (if any), then the leader id of every new term,
// a re-elected id included (a gap without leader is not reported, rapid changes
// may be coalesced, the last id sent is the current leader's while one
// leads), and closes when ctx ends or the Conn closes. Goroutines feed it
// and exit when it closes; the caller should drain it or cancel ctx.
// Closed after Close; faults apply as OpWaitForNewLeader.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	c := p.c
	c.f.count(OpWaitForNewLeader)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := c.enter(ctx, OpWaitForNewLeader, p.name); err != nil {
		return nil, err
	}
	leaders := p.observe(ctx)
	out := make(chan string, 1)
	go func() {
		defer close(out)
		var last int64 // the token of the term sent last
		for l := range leaders {
			if l.ID == "" || l.Token == last {
				continue
			}
			select {
			case out <- l.ID:
				last = l.Token
			case <-ctx.Done():
				return
			case <-c.done:
				return
			}
		}
	}()
	return out, nil
}
