package claims

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation: the
// InvalidArgument or InvalidPath *topo.Error of backendkit.CheckElection
// (InvalidArgument also for an id larger than topo.MaxValueSize), Closed
// after Close. Nothing is written.
func (e *Engine) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	e.count(CallNewLeaderParticipation)
	n, err := checkElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := e.closedErr(n); err != nil {
		return nil, err
	}
	if err := e.enter(context.Background(), CallNewLeaderParticipation, n); err != nil {
		return nil, err
	}
	return e.participation(n, id), nil
}

// checkElection is backendkit.CheckElection, then the id's size: it is
// stored as the candidate entry's value.
func checkElection(name, id string) (string, error) {
	n, err := backendkit.CheckElection(name, id)
	if err == nil && len(id) > topo.MaxValueSize {
		err = backendkit.CheckValue(n, []byte(id))
	}
	return n, err
}

func (e *Engine) participation(name, id string) *participation {
	return &participation{e: e, q: Queue{Path: name, Election: true}, id: id, stop: make(chan struct{})}
}

// Participate returns a participant in the election queue q, for a
// backend's own election entry points whose names and ids are not those
// of topo.Conn (etcd's native elections: q.Native, q.Path the raw prefix):
// the caller has checked q.Path and contents its own way. contents is
// what Driver.Create puts in each candidacy (and Leader.ID reports), and
// value, when not nil, the value WaitForLeadership publishes with it.
// Nothing is written.
func (e *Engine) Participate(q Queue, contents string, value []byte) topo.LeaderParticipation {
	q.Election = true
	return &participation{e: e, q: q, id: contents, defValue: value, stop: make(chan struct{})}
}

// participation is one participant of an election.
type participation struct {
	e  *Engine
	q  Queue
	id string
	// defValue is what WaitForLeadership publishes (Participate), nil for
	// none.
	defValue []byte

	stop     chan struct{}
	stopOnce sync.Once

	mu sync.Mutex
	// campaigning serialises WaitForLeadership and Campaign: set while
	// one runs (enterLead); a Campaign waits for it only until its ctx
	// ends. campaignFreed, made by the first call that waits (nil while
	// nobody does), is closed when it is cleared.
	campaigning   bool
	campaignFreed chan struct{}

	// creating, while WaitForLeadership or Campaign creates an entry, is
	// closed once that entry is registered as cur (and withdrawn, when
	// Stop or Resign came meanwhile) or its creation failed; createCancel
	// ends that creation. Stop and Resign wait for it: the entry of a
	// request in flight may already be in the store. createWithdrawn is
	// set by a Resign that came meanwhile: lead withdraws the entry
	// instead of registering it.
	creating        chan struct{}
	createCancel    context.CancelFunc
	createWithdrawn bool

	cur  *claim          // the current candidacy (waiting or leading), or nil
	lctx context.Context // cur's leadership context
	// leading is cur once WaitForLeadership or Campaign returned it: also
	// the term's Fence (Term), the same value for the whole term.
	leading *claim
}

// WaitForLeadership implements topo.LeaderParticipation: it keeps the
// current candidacy while it lives (a resumed one, or one a concurrent
// call created) or creates one on the Conn's session (first removing the
// entry of a term that ended lost, as Unlock of a lost lock does), and
// blocks until it heads the queue. The returned context is cancelled,
// with the cause, when the term ends: Stop, Resign, the session declared
// lost. It returns Interrupted after Stop (or when Resign withdrew the
// candidacy), Closed after the engine's Close, LockLost when the session
// was lost while waiting, and the same context again while leading.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.e.count(CallWaitForLeadership)
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	if p.e.hooks.Enter != nil {
		if err := p.enterStoppable(stopContext(p.stop), CallWaitForLeadership); err != nil {
			return nil, err
		}
	}
	return p.lead(context.Background(), nil, false)
}

// stopContext is a context that ends when its channel (a participant's
// stop) closes, without allocating.
type stopContext chan struct{}

func (c stopContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c stopContext) Done() <-chan struct{}       { return c }
func (c stopContext) Value(any) any               { return nil }
func (c stopContext) Err() error {
	if isClosed(c) {
		return context.Canceled
	}
	return nil
}

// enterStoppable runs Hooks.Enter for a wait that Stop ends: Interrupted
// once stopped.
func (p *participation) enterStoppable(ctx context.Context, c Call) error {
	if isClosed(p.stop) {
		return topo.NewError(topo.Interrupted, p.q.Path)
	}
	if err := p.e.hooks.Enter(ctx, c, p.q.Path); err != nil {
		if isClosed(p.stop) {
			return topo.NewError(topo.Interrupted, p.q.Path)
		}
		return err
	}
	return nil
}

// Campaign implements topo.LeaderParticipation: WaitForLeadership bounded
// by ctx (the candidacy is withdrawn when ctx ends first: Timeout or
// Interrupted), with value published with the candidacy from its creation.
// When ctx ends while the request creating the entry is in flight, that
// request is not cancelled at once (its entry may already be in the
// store): Campaign waits for its answer, for at most removeGrace, and
// withdraws the entry before it returns.
// While already a candidate it publishes value (guarded on the entry) and
// keeps the candidacy. InvalidArgument for an oversized value.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	p.e.count(CallCampaign)
	if err := backendkit.CheckContext(ctx, p.q.Path); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p.q.Path, value); err != nil {
		return nil, err
	}
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	if p.e.hooks.Enter != nil {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stopContext(p.stop), cancel)()
		if err := p.enterStoppable(cctx, CallCampaign); err != nil {
			if !isClosed(p.stop) && ctx.Err() != nil {
				return nil, backendkit.FromContext(ctx, p.q.Path)
			}
			return nil, err
		}
	}
	return p.lead(ctx, slices.Clone(value), true)
}

// lead is WaitForLeadership (setValue false) and Campaign: keep the live
// candidacy (publishing value) or create one, then wait for it to lead.
func (p *participation) lead(ctx context.Context, value []byte, setValue bool) (context.Context, error) {
	if err := p.enterLead(ctx); err != nil {
		return nil, err
	}
	defer p.leaveLead()
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	if isClosed(p.stop) {
		return nil, topo.NewError(topo.Interrupted, p.q.Path)
	}
	p.mu.Lock()
	cl, lctx, leading := p.cur, p.lctx, p.leading != nil && p.leading == p.cur
	p.mu.Unlock()
	if cl != nil && cl.err() == nil && setValue {
		switch err := p.e.d.SetValue(ctx, p.q, cl.sess, cl.current(), value); {
		case errors.Is(err, ErrNotHeld) && leading:
			// The store took the term away before its leader saw it: it
			// ends lost here, and a new candidacy publishes value (never
			// the ended term's context returned as if value were
			// published).
			cl.end(stateLost)
		case err != nil && !errors.Is(err, ErrNotHeld): // a waiting entry publishes at its grant
			return nil, p.e.d.MapError(ctx, err, p.q.Path)
		}
	}
	if cl != nil && cl.err() == nil { // keep the candidacy we have
		if leading {
			return lctx, nil
		}
	} else {
		if cl != nil && (leading || cl.current().Granted) {
			// The term ended (lost) without Resign or Stop: its entry may
			// still be in the store (Consul: a key another tool wrote
			// keeps the session on it), where the new candidacy would
			// wait behind it. Remove it first, as Unlock of a lost lock
			// does; Delete goes by the entry's identity.
			p.withdraw(cl)
		}
		c, cancel := context.WithCancelCause(context.Background())
		opts := CreateOptions{Value: p.defValue}
		if setValue {
			opts.Value = value
			if opts.Value == nil {
				opts.Value = []byte{}
			}
		}
		// Neither Stop, Resign nor the end of Campaign's ctx cancels the
		// Create at once: each waits for its answer (creating, or the
		// grace below), then the entry is withdrawn; only when the store
		// has not answered within removeGrace is the Create ended (a
		// store that stops answering must not hold the call forever). A
		// Create cancelled in flight may leave its entry for a while,
		// which none of them must return before.
		var cctx context.Context
		var ccancel context.CancelFunc
		if ctx.Done() == nil { // WaitForLeadership
			cctx, ccancel = context.WithCancel(ctx)
		} else {
			cctx, ccancel = context.WithCancel(context.WithoutCancel(ctx))
			// (A grace timer left running after the answer only cancels
			// an ended context.)
			stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(removeGrace, ccancel) })
			defer stopGrace()
		}
		created := make(chan struct{})
		p.mu.Lock()
		if isClosed(p.stop) { // Stop ran before: it will not wait for us
			p.mu.Unlock()
			ccancel()
			cancel(nil)
			return nil, topo.NewError(topo.Interrupted, p.q.Path)
		}
		p.creating, p.createCancel = created, ccancel
		p.mu.Unlock()
		var err error
		cl, err = p.e.create(cctx, p.q, p.id, opts, cancel)
		stopped := cctx.Err() != nil && ctx.Err() == nil
		ccancel()
		if err != nil {
			p.created(created)
			cancel(err)
			if isClosed(p.stop) && (stopped || ctx.Done() == nil) {
				if cerr := p.e.closedErr(p.q.Path); cerr != nil {
					return nil, cerr
				}
				return nil, topo.NewError(topo.Interrupted, p.q.Path)
			}
			if cctx.Err() != nil && ctx.Err() != nil { // ended after ctx's grace
				return nil, backendkit.FromContext(ctx, p.q.Path)
			}
			return nil, err
		}
		lctx = c
		if p.e.monitor != nil {
			lctx = &termContext{Context: c, cl: cl}
		}
		p.mu.Lock()
		withdrawn := p.createWithdrawn
		if !withdrawn {
			p.cur, p.lctx, p.leading = cl, lctx, nil
		}
		p.mu.Unlock()
		if withdrawn { // Resign ran meanwhile: withdraw before it returns
			p.withdraw(cl)
			p.created(created)
			return nil, topo.NewError(topo.Interrupted, p.q.Path)
		}
		if isClosed(p.stop) { // Stop ran meanwhile: withdraw before it returns
			p.resign()
			p.created(created)
			return nil, topo.NewError(topo.Interrupted, p.q.Path)
		}
		p.created(created)
	}
	if err := p.e.await(ctx, cl, p.stop, nil); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := cl.err(); err != nil || p.cur != cl { // ended as soon as it began
		if err == nil {
			err = topo.NewError(topo.Interrupted, p.q.Path)
		}
		return nil, err
	}
	p.leading = cl
	return lctx, nil
}

// enterLead waits until no other WaitForLeadership or Campaign of p runs
// and marks this one running (leaveLead ends it), without a channel while
// none waits. It returns ctx's error (Timeout, Interrupted), Interrupted
// once stopped and Closed once the engine is closed, when one of those
// comes first.
func (p *participation) enterLead(ctx context.Context) error {
	for {
		p.mu.Lock()
		if !p.campaigning {
			p.campaigning = true
			p.mu.Unlock()
			return nil
		}
		if p.campaignFreed == nil {
			p.campaignFreed = make(chan struct{})
		}
		freed := p.campaignFreed
		p.mu.Unlock()
		// Closed wins over Interrupted when both hold (Stop after
		// Close), as the checks after enterLead order them; select alone
		// would pick at random.
		select {
		case <-freed:
		case <-ctx.Done():
			return backendkit.FromContext(ctx, p.q.Path)
		case <-p.stop:
			if err := p.e.closedErr(p.q.Path); err != nil {
				return err
			}
			return topo.NewError(topo.Interrupted, p.q.Path)
		case <-p.e.closing:
			return topo.NewError(topo.Closed, p.q.Path)
		}
	}
}

// leaveLead ends what enterLead began and wakes the calls waiting for it.
func (p *participation) leaveLead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.campaigning = false
	if p.campaignFreed != nil {
		close(p.campaignFreed)
		p.campaignFreed = nil
	}
}

// Term implements topo.LeaderParticipation.Term: the current term while
// WaitForLeadership or Campaign has returned it and it has not ended (in
// the participant's own view, which a lost session ends at once),
// NotLeader otherwise; Closed once the engine is closed.
func (p *participation) Term() (topo.Fence, error) {
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	p.mu.Lock()
	cl := p.leading
	p.mu.Unlock()
	if cl == nil {
		return nil, topo.NewError(topo.NotLeader, p.q.Path)
	}
	cl.look()
	if cl.err() != nil {
		return nil, topo.NewError(topo.NotLeader, p.q.Path)
	}
	return cl, nil
}

// Proclaim implements topo.LeaderParticipation: one request guarded in the
// store on the current term (Driver.SetValue) replaces the published
// value. NotLeader when this participant does not lead (any more),
// InvalidArgument for an oversized value, Closed once the engine is closed
// (after the argument checks).
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	p.e.count(CallProclaim)
	if err := backendkit.CheckContext(ctx, p.q.Path); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.q.Path, value); err != nil {
		return err
	}
	if err := p.e.enter(ctx, CallProclaim, p.q.Path); err != nil {
		return err
	}
	if err := p.e.closedErr(p.q.Path); err != nil {
		return err
	}
	p.mu.Lock()
	cl := p.leading
	p.mu.Unlock()
	if cl != nil {
		cl.look()
	}
	if cl == nil || cl.err() != nil {
		return topo.NewError(topo.NotLeader, p.q.Path)
	}
	err := p.e.d.SetValue(ctx, p.q, cl.sess, cl.current(), slices.Clone(value))
	if errors.Is(err, ErrNotHeld) {
		return backendkit.Wrap(topo.NotLeader, p.q.Path, err)
	}
	return p.e.d.MapError(ctx, err, p.q.Path)
}

// Resign implements topo.LeaderParticipation: the current candidacy ends
// (the leadership context is cancelled) and then its entry is removed, so
// the next candidate leads only after this one's context was cancelled; a
// waiting WaitForLeadership or Campaign returns Interrupted. The removal
// runs within a grace of a few seconds even when ctx has ended. It returns
// nil when there is nothing to resign, also when the entry already went
// with its session. A candidacy whose entry is being created (its request
// in flight) is withdrawn too: Resign waits for that request's answer, as
// Stop does, and removes the entry before it returns. It returns Closed
// once the engine is closed (the Conn's Close withdrew the candidacy).
func (p *participation) Resign(ctx context.Context) error {
	p.e.count(CallResign)
	var err error
	if p.e.hooks.Enter != nil {
		if ctx.Err() != nil {
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignGrace)
			defer cancel()
			ctx = gctx
		}
		err = p.e.hooks.Enter(ctx, CallResign, p.q.Path)
	}
	p.waitCreated(true)
	p.resign()
	if err != nil {
		return err
	}
	return p.e.closedErr(p.q.Path)
}

// resign is Resign's work, without its result.
func (p *participation) resign() {
	p.mu.Lock()
	cl := p.cur
	p.cur, p.leading, p.lctx = nil, nil, nil
	p.mu.Unlock()
	if cl != nil {
		p.withdraw(cl)
	}
}

// withdraw ends cl and removes its entry (Engine.withdraw).
func (p *participation) withdraw(cl *claim) { p.e.withdraw(cl) }

// Stop implements topo.LeaderParticipation.Stop: Resign, after which
// WaitForLeadership and Campaign return Interrupted. An entry being
// created meanwhile is withdrawn before Stop returns: Stop waits for its
// Create's answer, for at most removeGrace (then it ends the Create: the
// store is not answering). Idempotent.
func (p *participation) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.waitCreated(false)
	p.resign()
}

// waitCreated waits for the creation of an entry in flight (lead), if
// any, to end, for at most removeGrace (then it ends the creation: the
// store is not answering). withdraw (Resign) has lead withdraw the entry
// instead of registering it; Stop needs not: lead sees p.stop.
func (p *participation) waitCreated(withdraw bool) {
	p.mu.Lock()
	created, cancel := p.creating, p.createCancel
	if created != nil && withdraw {
		p.createWithdrawn = true
	}
	p.mu.Unlock()
	if created == nil {
		return
	}
	t := time.NewTimer(removeGrace)
	select {
	case <-created:
	case <-t.C:
		cancel()
	}
	t.Stop()
}

// created ends a creation begun in lead: Stop and Resign no longer wait
// for it.
func (p *participation) created(ch chan struct{}) {
	p.mu.Lock()
	if p.creating == ch {
		p.creating, p.createCancel, p.createWithdrawn = nil, nil, false
	}
	p.mu.Unlock()
	close(ch)
}
