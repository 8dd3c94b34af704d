package election

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// DefaultCloseGrace is how long Close keeps waiting for the store to remove
// the candidate's entry when the context passed to Close has already ended,
// and how long Await waits for it once Await's context has ended.
const DefaultCloseGrace = 5 * time.Second

// TopoFactory is the Factory over a topo.Conn: each Election it creates is a
// topo.LeaderParticipation in the election named by the resource ID, with
// the factory's instance ID as participant id. The store layout is the
// backend's (etcd, ZooKeeper, memorytopo: one ephemeral entry per candidate
// under elections/<resourceID>/; Consul: a session lock on
// elections/<resourceID>). A TopoFactory is safe for concurrent use; it does
// not own the Conn, which must outlive every Election created from it.
type TopoFactory struct {
	conn       topo.Conn
	instanceID string
	closeGrace time.Duration
}

// NewTopoFactory returns a Factory whose Elections campaign through conn as
// instanceID. The instance ID is what GetCurrentLeaderID (and
// TopoElection.Leader) report for this instance; it should be unique among
// the candidates. It returns an InvalidArgument *topo.Error when conn is nil
// or instanceID is empty.
func NewTopoFactory(conn topo.Conn, instanceID string) (*TopoFactory, error) {
	if conn == nil {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("election: nil topo.Conn")}
	}
	if instanceID == "" {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("election: empty instance id")}
	}
	return &TopoFactory{conn: conn, instanceID: instanceID, closeGrace: DefaultCloseGrace}, nil
}

// Conn returns the connection the factory's Elections campaign through.
func (f *TopoFactory) Conn() topo.Conn { return f.conn }

// InstanceID returns the participant id of the factory's Elections.
func (f *TopoFactory) InstanceID() string { return f.instanceID }

// NewElection implements Factory. resourceID names the election (a single
// path segment or a path, validated by the backend). It returns
// InvalidArgument for an empty resourceID, InvalidPath for a malformed one,
// Interrupted or Timeout when ctx has already ended, and Closed when the
// Conn is closed (on backends that check at this point). Nothing is written
// to the store.
func (f *TopoFactory) NewElection(ctx context.Context, resourceID string) (Election, error) {
	return f.NewTopoElection(ctx, resourceID)
}

// NewTopoElection is NewElection returning the concrete type, which adds
// Leader and WatchLeader.
func (f *TopoFactory) NewTopoElection(ctx context.Context, resourceID string) (*TopoElection, error) {
	if err := backendkit.CheckContext(ctx, resourceID); err != nil {
		return nil, err
	}
	if resourceID == "" {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("election: empty resource id")}
	}
	// A participation that never campaigns: it validates the name and id
	// now and serves Leader and WatchLeader.
	observer, err := f.conn.NewLeaderParticipation(resourceID, f.instanceID)
	if err != nil {
		return nil, err
	}
	return &TopoElection{
		conn:       f.conn,
		name:       resourceID,
		id:         f.instanceID,
		closeGrace: f.closeGrace,
		observer:   observer,
	}, nil
}

// TopoElection is the Election created by TopoFactory. Each candidacy
// (from the first Await after creation, Resign or a loss of mastership, up
// to the next Resign or loss) is one topo.LeaderParticipation. It is safe
// for concurrent use.
//
// The causes (context.Cause) of a mastership context are: a LockLost
// *topo.Error when the store took mastership away, an Interrupted
// *topo.Error after Resign or Close or when the instance was not master,
// and the parent context's cause when the parent ended.
type TopoElection struct {
	conn       topo.Conn
	name, id   string
	closeGrace time.Duration
	observer   topo.LeaderParticipation

	mu     sync.Mutex
	cur    *candidacy // nil when not campaigning
	closed bool
}

// candidacy is one LeaderParticipation and the goroutine waiting on it.
type candidacy struct {
	lp topo.LeaderParticipation

	done chan struct{} // closed once WaitForLeadership returned
	err  error         // WaitForLeadership's error, set before done closes

	// ctx is live from the moment WaitForLeadership succeeded until
	// leadership is lost or the candidacy is stopped.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// lctx is WaitForLeadership's context and lost ends c for its end
	// (both set before done closes); master ends c itself when lctx is
	// done before lost's callback has run.
	lctx context.Context
	lost func()

	// subs cancels the contexts WithMastership returned, synchronously
	// when the candidacy ends.
	subMu    sync.Mutex
	subs     map[int]context.CancelCauseFunc // nil once ended
	nextSub  int
	endCause error // set when subs becomes nil

	stopOnce sync.Once
	stopped  chan struct{} // closed once lp.Stop returned
	resigned bool          // set by stop; guarded by TopoElection.mu

	waiters int // Await calls waiting on done; guarded by TopoElection.mu
}

func (e *TopoElection) newCandidacy() (*candidacy, error) {
	lp, err := e.conn.NewLeaderParticipation(e.name, e.id)
	if err != nil {
		return nil, err
	}
	c := &candidacy{
		lp:      lp,
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		subs:    map[int]context.CancelCauseFunc{},
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	go func() {
		lctx, err := lp.WaitForLeadership()
		if err != nil {
			c.err = err
			c.end(err)
			close(c.done)
			return
		}
		name := e.name
		c.lctx, c.lost = lctx, func() {
			c.end(&topo.Error{Code: topo.LockLost, Path: name, Err: context.Cause(lctx)})
		}
		context.AfterFunc(lctx, c.lost)
		close(c.done)
	}()
	return c, nil
}

// end cancels c.ctx and every mastership context derived from it with
// cause; the first cause wins.
func (c *candidacy) end(cause error) {
	c.subMu.Lock()
	subs := c.subs
	if subs != nil {
		c.subs, c.endCause = nil, cause
		c.cancel(cause)
	}
	c.subMu.Unlock()
	for _, cancel := range subs {
		cancel(cause)
	}
}

// subscribe registers cancel to be called when c ends, and returns a
// function that unregisters it. When c has already ended it calls cancel
// at once.
func (c *candidacy) subscribe(cancel context.CancelCauseFunc) (unsubscribe func()) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs == nil {
		cancel(c.endCause)
		return func() {}
	}
	id := c.nextSub
	c.nextSub++
	c.subs[id] = cancel
	return func() {
		c.subMu.Lock()
		defer c.subMu.Unlock()
		if c.subs != nil {
			delete(c.subs, id)
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// master reports whether c won and still leads.
func (c *candidacy) master() bool {
	if !isClosed(c.done) || c.err != nil {
		return false
	}
	if c.lctx.Err() != nil {
		c.lost() // the term ended; its callback may not have run yet
	}
	return c.ctx.Err() == nil
}

// stop cancels c's mastership context with cause, then withdraws from the
// store in the background; the returned channel closes when that is done.
// Callers hold e.mu or own c exclusively.
func (c *candidacy) stop(cause error) <-chan struct{} {
	c.stopOnce.Do(func() {
		c.resigned = true
		c.end(cause)
		go func() {
			c.lp.Stop()
			close(c.stopped)
		}()
	})
	return c.stopped
}

func (e *TopoElection) interrupted(msg string) error {
	return &topo.Error{Code: topo.Interrupted, Path: e.name, Err: errors.New(msg)}
}

// Await implements Election. It returns nil once this instance leads (at
// once if it already does); Interrupted or Timeout (for ctx) when ctx ends
// first, withdrawing the candidacy unless another Await is still waiting on
// it (it returns once the entry is gone from the store, or after
// DefaultCloseGrace when the store does not answer); Interrupted when a
// concurrent Resign or Close withdrew the candidacy; Closed after Close;
// and the backend's error when campaigning fails (for example Closed when
// the Conn is closed, Unavailable when the store cannot be reached). When mastership is lost right after being won, Await
// campaigns again instead of returning. Safe for concurrent use.
func (e *TopoElection) Await(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, e.name); err != nil {
		return err
	}
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return topo.NewError(topo.Closed, e.name)
		}
		c := e.cur
		if c != nil && c.master() {
			e.mu.Unlock()
			return nil
		}
		var old *candidacy
		if c != nil && isClosed(c.done) {
			// The last candidacy failed or lost its mastership: retire it.
			old, c, e.cur = c, nil, nil
			old.stop(old.lostCause())
		}
		if c == nil {
			var err error
			if c, err = e.newCandidacy(); err != nil {
				e.mu.Unlock()
				return err
			}
			e.cur = c
		}
		c.waiters++
		e.mu.Unlock()

		if old != nil {
			// Our previous entry must be gone before the new one can win.
			select {
			case <-old.stopped:
			case <-ctx.Done():
			}
		}
		select {
		case <-c.done:
		case <-ctx.Done():
		}

		e.mu.Lock()
		c.waiters--
		if !isClosed(c.done) {
			// ctx ended first.
			var stopped <-chan struct{}
			if c.waiters == 0 && e.cur == c {
				e.cur = nil
				stopped = c.stop(e.interrupted("campaign abandoned"))
			}
			e.mu.Unlock()
			if stopped != nil {
				// Withdraw before returning, as Resign does: an entry
				// left queued could lead (for observers) after Await
				// said it did not.
				e.waitStopped(ctx, stopped)
			}
			return backendkit.FromContext(ctx, e.name)
		}
		switch {
		case c.err != nil:
			if e.cur == c {
				e.cur = nil
				c.stop(c.err)
			}
			e.mu.Unlock()
			return c.err
		case c.master():
			e.mu.Unlock()
			return nil
		case c.resigned:
			e.mu.Unlock()
			return e.interrupted("resigned while awaiting mastership")
		}
		// Won and lost at once: campaign again.
		e.mu.Unlock()
		if err := backendkit.CheckContext(ctx, e.name); err != nil {
			return err
		}
	}
}

// waitStopped waits for a candidacy's withdrawal that Await began once its
// ctx had ended: for up to closeGrace, as Close does.
func (e *TopoElection) waitStopped(ctx context.Context, stopped <-chan struct{}) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.closeGrace)
	defer cancel()
	select {
	case <-stopped:
	case <-wctx.Done():
	}
}

func (c *candidacy) lostCause() error {
	if c.err != nil {
		return c.err
	}
	return context.Cause(c.ctx)
}

// WithMastership implements Election. The returned context is derived from
// ctx and is cancelled when ctx ends, when mastership is lost (cause: a
// LockLost *topo.Error) or given up (cause: Interrupted). When this
// instance is not master it is already cancelled with an Interrupted cause
// and the error is nil; after Close it is cancelled and the error is
// Closed. Safe for concurrent use.
func (e *TopoElection) WithMastership(ctx context.Context) (context.Context, error) {
	mctx, cancel := context.WithCancelCause(ctx)
	e.mu.Lock()
	closed, c := e.closed, e.cur
	e.mu.Unlock()
	if closed {
		err := topo.NewError(topo.Closed, e.name)
		cancel(err)
		return mctx, err
	}
	if c == nil || !c.master() {
		cancel(e.interrupted("not master"))
		return mctx, nil
	}
	unsubscribe := c.subscribe(cancel)
	context.AfterFunc(mctx, unsubscribe)
	c.master() // a term that ended since the check above cancels mctx now
	return mctx, nil
}

// Resign implements Election: it cancels the mastership contexts at once,
// then removes this instance's entry from the store, and returns when the
// entry is gone. A pending Await returns Interrupted. When ctx ends first,
// Resign returns Interrupted or Timeout while the removal goes on in the
// background. It returns nil when there is nothing to resign, and Closed
// after Close. Safe for concurrent use.
func (e *TopoElection) Resign(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return topo.NewError(topo.Closed, e.name)
	}
	c := e.cur
	e.cur = nil
	var stopped <-chan struct{}
	if c != nil {
		stopped = c.stop(e.interrupted("resigned"))
	}
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return backendkit.FromContext(ctx, e.name)
	}
}

// Close implements Election: it resigns like Resign and marks the Election
// closed, so that later calls that campaign or act as master (Await,
// WithMastership, Resign, Term, Proclaim) return Closed; the observer calls
// (Leader, LeaderInfo, WatchLeader, Observe) keep answering, since they
// hold nothing in the store. The removal of the entry from
// the store runs even when ctx has already ended; Close waits for it until
// ctx ends, or, when ctx had already ended on entry, for up to
// DefaultCloseGrace, and then returns Interrupted or Timeout. It returns
// nil on success and when already closed. It does not close the Conn. Safe
// for concurrent use.
func (e *TopoElection) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	c := e.cur
	e.cur = nil
	var stopped <-chan struct{}
	if c != nil {
		stopped = c.stop(e.interrupted("election closed"))
	}
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	wctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), e.closeGrace)
		defer cancel()
	}
	select {
	case <-stopped:
		return nil
	case <-wctx.Done():
		return backendkit.FromContext(wctx, e.name)
	}
}

// Term implements Election. It returns the backend's term Fence (see
// topo.LeaderParticipation.Term) while this instance is master, a
// NotLeader *topo.Error when it is not (campaigning, resigned, or
// mastership lost), and Closed after Close. Safe for concurrent use.
func (e *TopoElection) Term() (topo.Fence, error) {
	e.mu.Lock()
	closed, c := e.closed, e.cur
	e.mu.Unlock()
	if closed {
		return nil, topo.NewError(topo.Closed, e.name)
	}
	if c == nil || !c.master() {
		return nil, topo.NewError(topo.NotLeader, e.name)
	}
	f, err := c.lp.Term()
	if err != nil {
		return nil, err
	}
	// The term may have ended between master() and Term(); a fence of an
	// ended term fails its own Check and IfHeld, so returning it is safe,
	// but say NotLeader when the loss is already known.
	if !c.master() {
		return nil, topo.NewError(topo.NotLeader, e.name)
	}
	return f, nil
}

// ResourceID returns the name of the election.
func (e *TopoElection) ResourceID() string { return e.name }

// InstanceID returns this instance's participant id.
func (e *TopoElection) InstanceID() string { return e.id }

// Leader returns the instance ID of the current master, or "" with a nil
// error when nobody is master. It works whether or not this instance
// campaigns. Errors are the backend's (Closed after the Conn is closed,
// Unavailable, Interrupted or Timeout for ctx). Safe for concurrent use.
func (e *TopoElection) Leader(ctx context.Context) (string, error) {
	return e.observer.GetCurrentLeaderID(ctx)
}

// WatchLeader returns a channel that receives the current master's instance
// ID (if any) and then each new master's ID as mastership changes hands;
// rapid changes may be coalesced. The channel closes when ctx ends or the
// Conn is closed, and must be drained until then. Safe for concurrent use.
func (e *TopoElection) WatchLeader(ctx context.Context) (<-chan string, error) {
	return e.observer.WaitForNewLeader(ctx)
}

// Proclaim publishes value as this master's leader value (see
// topo.LeaderParticipation.Proclaim): observers (Observe, LeaderInfo) see
// it with the same term. It returns a NotLeader *topo.Error when this
// instance is not master, Closed after Close, and the backend's errors.
// Safe for concurrent use.
func (e *TopoElection) Proclaim(ctx context.Context, value []byte) error {
	e.mu.Lock()
	closed, c := e.closed, e.cur
	e.mu.Unlock()
	if closed {
		return topo.NewError(topo.Closed, e.name)
	}
	if c == nil || !c.master() {
		return topo.NewError(topo.NotLeader, e.name)
	}
	return c.lp.Proclaim(ctx, value)
}

// LeaderInfo returns the current master's instance ID, its published value
// and its term's fencing token, or a NoLeader *topo.Error when nobody is
// master. Safe for concurrent use.
func (e *TopoElection) LeaderInfo(ctx context.Context) (topo.Leader, error) {
	return e.observer.Leader(ctx)
}

// Observe returns a channel of the election's masters, with their values
// and tokens (see topo.LeaderParticipation.Observe): the current one first
// (ID "" when nobody is master), then every change. It closes when ctx
// ends or the Conn is closed, and must be drained until then. Safe for
// concurrent use.
func (e *TopoElection) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	return e.observer.Observe(ctx)
}
