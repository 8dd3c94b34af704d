package consultopo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation. The
// election is a lock on the key elections/<name> (under the root) whose
// value is the leader's id, taken with the Conn's long-lived session. It
// returns InvalidArgument for an empty name or id, InvalidPath for a name
// that is not a valid path, and Closed after Close. Nothing is written
// until WaitForLeadership.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, topo.NewError(topo.Closed, n)
	}
	p := backendkit.JoinPath(electionsDir, n)
	stopCtx, stop := context.WithCancelCause(c.ctx)
	return &participation{c: c, path: p, key: c.key(p), id: id, stopCtx: stopCtx, stop: stop}, nil
}

// participation is one participant of an election. Its methods are safe
// for concurrent use.
type participation struct {
	c    *Conn
	path string // elections/<name>, for errors
	key  string
	id   string

	// stopCtx ends on Stop or when the Conn closes.
	stopCtx context.Context
	stop    context.CancelCauseFunc

	mu   sync.Mutex // serialises WaitForLeadership and Stop
	term *term      // the current or last leadership term
	// cur is term for Term, which must not wait for mu (held by a
	// WaitForLeadership while it waits).
	cur atomic.Pointer[term]
}

// term is one period of leadership. It is the backend's topo.Fence for
// terms (see fence.go).
type term struct {
	c       *Conn
	path    string // elections/<name>, for errors
	key     string
	ctx     context.Context
	cancel  context.CancelFunc
	held    held
	monitor chan struct{} // closed when the monitor goroutine returned
	// released is set when Stop ends the term (Check then says
	// Interrupted rather than LockLost).
	released atomic.Bool
}

// WaitForLeadership implements topo.LeaderParticipation.WaitForLeadership:
// it acquires elections/<name> with the participant id as value, waiting
// with blocking queries while another participant leads, and retrying
// through store outages and session losses (with a new session). The
// returned context is cancelled when the key is lost (session destroyed or
// expired, key deleted or taken over), at the latest when the session's
// safety margin runs out (one TTL after the last acknowledged renewal was
// sent, before Consul can invalidate it), on Stop, or on Close; calling it
// again while leading returns the same context. It returns Interrupted
// after Stop, Closed after Close, PermissionDenied at once when the ACL
// token may not create sessions or write the key, and NodeExists with a
// *ForeignKeyError when elections/<name> holds a value another tool wrote.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopCtx.Err() != nil {
		if p.c.isClosed() && !p.stopped() {
			return nil, topo.NewError(topo.Closed, p.path)
		}
		return nil, backendkit.Wrap(topo.Interrupted, p.path, errors.New("the participation was stopped"))
	}
	if p.term != nil {
		if p.term.ctx.Err() == nil {
			return p.term.ctx, nil
		}
		p.endTerm()
	}
	spec := lockSpec{path: p.path, key: p.key, value: []byte(p.id), ttl: p.c.opts.SessionTTL}
	retry := 50 * time.Millisecond
	for {
		h, err := p.c.lock(p.stopCtx, spec)
		if err == nil {
			p.startTerm(h)
			return p.term.ctx, nil
		}
		switch {
		case p.stopCtx.Err() != nil && p.c.isClosed() && !p.stopped():
			return nil, topo.NewError(topo.Closed, p.path)
		case p.stopCtx.Err() != nil:
			return nil, backendkit.Wrap(topo.Interrupted, p.path, errors.New("the participation was stopped"))
		case topo.IsErrType(err, topo.Unavailable) || topo.IsErrType(err, topo.ResourceExhausted) || topo.IsErrType(err, topo.LockLost):
			if !sleepCtx(p.stopCtx, retry) {
				continue
			}
			retry = min(2*retry, watchRetryMax)
		default:
			return nil, err
		}
	}
}

// stopped reports whether Stop was called (as opposed to the Conn closing).
func (p *participation) stopped() bool {
	return errors.Is(context.Cause(p.stopCtx), errStopped)
}

var errStopped = errors.New("participation stopped")

// startTerm records leadership and starts watching the key with consistent
// blocking queries. The term's context is cancelled the moment the session
// ends (including its local deadline: no request needed), and as soon as a
// query shows the key gone or held by another session or acquire, on an
// ACL refusal, or on Stop/Close; and when it shows the key written since
// the acquire (its ModifyIndex no longer the term's token).
func (p *participation) startTerm(h held) {
	ctx, cancel := context.WithCancel(context.Background())
	stopLost := context.AfterFunc(h.sess.ctx, cancel)
	stopStop := context.AfterFunc(p.stopCtx, cancel)
	t := &term{c: p.c, path: p.path, key: p.key, ctx: ctx, cancel: cancel, held: h, monitor: make(chan struct{})}
	p.term = t
	p.cur.Store(t)
	p.c.spawn(func() {
		defer close(t.monitor)
		defer cancel()
		defer stopLost()
		defer stopStop()
		defer p.c.releaseClaim(h.cl)
		var index uint64
		retry := 50 * time.Millisecond
		for {
			pair, meta, err := p.c.kv.Get(p.key, p.c.consistentBlocking(ctx, index))
			switch {
			case ctx.Err() != nil, !h.sess.alive(), isPermanent(err):
				return
			case err != nil:
				if !sleepCtx(ctx, retry) {
					return
				}
				retry = min(2*retry, watchRetryMax)
				continue
			case !h.holds(pair):
				return
			}
			retry = 50 * time.Millisecond
			index = nextIndex(index, meta.LastIndex)
		}
	})
}

// endTerm ends the current term: it deletes the key if this participant
// still holds it, cancels the term's context and waits for its monitor.
func (p *participation) endTerm() {
	t := p.term
	if t == nil {
		return
	}
	p.term = nil
	p.cur.CompareAndSwap(t, nil)
	if !t.held.sess.lost() {
		p.c.deleteIfHeld(p.key, t.held.sess)
	}
	t.cancel()
	<-t.monitor
	p.c.releaseClaim(t.held.cl)
}

// Stop implements topo.LeaderParticipation.Stop: it interrupts a pending
// WaitForLeadership, deletes the election key if this participant holds it
// (so another participant can lead at once, without lock-delay), and
// cancels the leadership context. It is idempotent and returns once the key
// is deleted or the store could not be reached within a few seconds.
func (p *participation) Stop() {
	// The cause tells WaitForLeadership that Stop, not Close, ended it.
	p.stop(errStopped)
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.term; t != nil && t.ctx.Err() == nil {
		t.released.Store(true)
	}
	p.endTerm()
}

// GetCurrentLeaderID implements topo.LeaderParticipation.GetCurrentLeaderID:
// the value of elections/<name> while a session holds it, "" with a nil
// error when nobody leads. Errors as for Conn.Get, except NoNode.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := p.c.begin(ctx, p.path); err != nil {
		return "", err
	}
	pair, _, err := p.c.kv.Get(p.key, p.c.queryOptions(ctx))
	if err != nil {
		return "", p.c.convertError(ctx, err, p.path)
	}
	if pair == nil || pair.Session == "" {
		return "", nil
	}
	return string(pair.Value), nil
}

// WaitForNewLeader implements topo.LeaderParticipation.WaitForNewLeader
// with blocking queries on elections/<name>: the channel receives the
// leader's id current when the call returns (read before it returns; if
// any), then the id of every new leadership term. It closes when ctx ends,
// the Conn closes, or on an ACL refusal (which is permanent); other store
// errors are retried. It returns Timeout/Interrupted when ctx already ended
// and Closed after Close.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	if err := p.c.begin(ctx, p.path); err != nil {
		return nil, err
	}
	wctx, cancel := p.c.callCtx(ctx)
	// The leader current at the time of the call is read before returning
	// (a consistent read), so that it is the first id sent however late
	// the channel is read.
	pair, meta, err := p.c.kv.Get(p.key, p.c.consistentOptions(wctx))
	if err != nil {
		cancel()
		return nil, p.c.convertError(ctx, err, p.path)
	}
	ch := make(chan string, 1)
	index := nextIndex(0, meta.LastIndex)
	var lastSession, lastID string
	if pair != nil && pair.Session != "" {
		lastSession, lastID = pair.Session, string(pair.Value)
		ch <- lastID
	}
	go func() {
		defer close(ch)
		defer cancel()
		retry := 50 * time.Millisecond
		for {
			pair, meta, err := p.c.kv.Get(p.key, p.c.blockingOptions(wctx, index))
			if wctx.Err() != nil || isPermanent(err) {
				return
			}
			if err != nil {
				if !sleepCtx(wctx, retry) {
					return
				}
				retry = min(2*retry, watchRetryMax)
				continue
			}
			retry = 50 * time.Millisecond
			index = nextIndex(index, meta.LastIndex)
			if pair == nil || pair.Session == "" {
				continue
			}
			if id := string(pair.Value); pair.Session != lastSession || id != lastID {
				lastSession, lastID = pair.Session, id
				select {
				case ch <- id:
				case <-wctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}
