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
	stopCtx, stopCancel := context.WithCancel(context.Background())
	return &participation{
		c:          c,
		name:       p,
		dir:        c.full(joinFull(electionsDir, p)),
		id:         []byte(id),
		stopCtx:    stopCtx,
		stopCancel: stopCancel,
	}, nil
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

	waitMu sync.Mutex // serialises WaitForLeadership and the end of Stop

	// Guarded by the store's mu.
	entry     *entry
	leaderCtx context.Context
	term      *term // the current or last term; its entry is removed once it ended
}

// WaitForLeadership implements topo.LeaderParticipation.WaitForLeadership:
// it adds this participant's entry (again, under a new session, if the
// previous one was lost) and blocks until it is the oldest. The returned
// context is cancelled when the entry goes: Stop, ExpireSession, a lapsed
// session (also after Conn.Partition), or the Conn's Close. It returns
// Interrupted after Stop (also when Stop ends the wait) and Closed after
// Close. Latency and a hung server delay it until Stop.
func (p *participation) WaitForLeadership() (context.Context, error) {
	c := p.c
	c.f.count(OpWaitForLeadership)
	if err := c.closedErr(p.name); err != nil {
		return nil, err
	}
	if p.stopCtx.Err() != nil {
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if err := c.enter(p.stopCtx, OpWaitForLeadership, p.name); err != nil {
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	if p.leaderCtx != nil && p.leaderCtx.Err() == nil {
		ctx := p.leaderCtx
		s.mu.Unlock()
		return ctx, nil
	}
	for {
		if err := c.closedErr(p.name); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if p.stopCtx.Err() != nil {
			if p.entry != nil {
				s.removeEntry(p.entry, false)
			}
			s.mu.Unlock()
			return nil, topo.NewError(topo.Interrupted, p.name)
		}
		if p.entry == nil || p.entry.removed {
			p.entry = s.addEntry(p.dir, p.id, s.sessionLease(c))
		}
		e := p.entry
		pred := s.predecessor(e)
		if pred == nil {
			ctx, cancel := context.WithCancel(context.Background())
			e.onRemove = cancel
			p.leaderCtx = ctx
			p.term = &term{p: p, e: e}
			s.mu.Unlock()
			return ctx, nil
		}
		s.mu.Unlock()
		select {
		case <-pred.released:
		case <-e.released:
		case <-p.stopCtx.Done():
		case <-c.done:
		}
		s.mu.Lock()
	}
}

// Stop implements topo.LeaderParticipation.Stop: it removes this
// participant's entry (cancelling its leadership context) and makes every
// later WaitForLeadership return Interrupted. Idempotent; it returns once
// the entry is gone.
func (p *participation) Stop() {
	p.stopOnce.Do(p.stopCancel)
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
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
		return string(e.value), nil
	}
	return "", nil
}

// WaitForNewLeader implements topo.LeaderParticipation.WaitForNewLeader:
// the channel receives the id of the leader current at the time of the
// call (if any), then every
// different leader id as leadership changes (a gap without leader is not
// reported), and closes when ctx ends or the Conn closes. One goroutine
// feeds it and exits when it closes; the caller should drain it or cancel
// ctx. Closed after Close.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	c := p.c
	c.f.count(OpWaitForNewLeader)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := c.enter(ctx, OpWaitForNewLeader, p.name); err != nil {
		return nil, err
	}
	out := make(chan string, 1)
	s := c.s
	// The leader current at the time of the call is read here, not by the
	// goroutine (which may run later, after a handover).
	current := func() (string, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		leader := ""
		if e := s.first(p.dir); e != nil {
			leader = string(e.value)
		}
		return leader, s.dirChan(p.dir)
	}
	leader, changed := current()
	go func() {
		defer close(out)
		last := ""
		for first := true; ; first = false {
			if !first {
				leader, changed = current()
			}
			if leader != "" && leader != last {
				select {
				case out <- leader:
					last = leader
				case <-ctx.Done():
					return
				case <-c.done:
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-c.done:
				return
			}
		}
	}()
	return out, nil
}
