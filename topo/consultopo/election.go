package consultopo

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation. The
// election is a lock on the key elections/<name> (under the root) whose
// value is the leader's id, taken with the Conn's long-lived session; the
// leader's published value (Campaign, Proclaim) is the key
// elections/<name>/locks/<session id> beside it (see valueKeyFor). It
// returns InvalidArgument for an empty name or id, InvalidPath for a name
// that is not a valid path, and Closed after Close. Nothing is written
// until WaitForLeadership or Campaign.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, topo.NewError(topo.Closed, n)
	}
	return c.newParticipation(n, id), nil
}

// newParticipation returns a participation in the checked election name.
func (c *Conn) newParticipation(name, id string) *participation {
	p := backendkit.JoinPath(electionsDir, name)
	stopCtx, stop := context.WithCancelCause(c.ctx)
	key := c.key(p)
	return &participation{c: c, name: name, path: p, key: key, valuePrefix: key + "/" + valuesDir + "/", id: id,
		stopCtx: stopCtx, stop: stop, sem: make(chan struct{}, 1)}
}

// participation is one participant of an election. Its methods are safe
// for concurrent use.
type participation struct {
	c           *Conn
	name        string // the election's name, as checked
	path        string // elections/<name>, for errors
	key         string
	valuePrefix string // the value keys' prefix: <key>/locks/
	id          string

	// stopCtx ends on Stop or when the Conn closes.
	stopCtx context.Context
	stop    context.CancelCauseFunc

	// sem is a one-slot lock serialising WaitForLeadership, Campaign,
	// Resign and Stop; unlike a mutex, a Campaign waits for it only as
	// long as its ctx allows.
	sem chan struct{}
	// amu guards attempt, which cancels the WaitForLeadership or Campaign
	// in progress (for Resign).
	amu     sync.Mutex
	attempt context.CancelCauseFunc

	term *term // the current or last leadership term; guarded by sem
	// cur is term for Term, Proclaim and ResumeInfo, which must not wait
	// for sem (held by a WaitForLeadership while it waits).
	cur atomic.Pointer[term]
}

// valueKeyFor returns the key of the value published by the candidate on
// session sessionID.
func (p *participation) valueKeyFor(sessionID string) string { return p.valuePrefix + sessionID }

// lock takes p.sem, or fails with ctx's error when ctx ends first.
func (p *participation) lock(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return backendkit.FromContext(ctx, p.path)
	}
}

func (p *participation) unlock() { <-p.sem }

// Term states (term.state): who releases the Conn's local claim on the key.
const (
	termActive int32 = iota
	termEnding       // endTerm owns the claim
	termLost         // the monitor released the claim
)

// term is one period of leadership. It is the backend's topo.Fence for
// terms (see fence.go).
type term struct {
	c        *Conn
	path     string // elections/<name>, for errors
	key      string
	valueKey string // the key of the leader's published value
	ctx      context.Context
	cancel   context.CancelFunc
	held     held
	monitor  chan struct{} // closed when the monitor goroutine returned
	// released is set when Stop ends the term (Check then says
	// Interrupted rather than LockLost).
	released atomic.Bool
	// state says whether the term is active, being ended by endTerm (which
	// then owns the local claim on the key), or lost (the monitor released
	// the claim: another participation of the Conn may already hold the
	// key, with the same session, so nothing of this term is deleted).
	state atomic.Int32
}

// WaitForLeadership implements topo.LeaderParticipation.WaitForLeadership:
// it acquires elections/<name> with the participant id as value, waiting
// in the election's queue (elections/<name>/locks/queue/, see queue.go:
// candidates of every topokit Conn lead in the order they queued) and, at
// its head, with blocking queries while another participant leads, and
// retrying
// through store outages and session losses (with a new session). The same
// transaction deletes the value key of the session (the leader publishes
// no value: Leader reports a nil Value). The returned context is
// cancelled when the key is lost (session destroyed or expired, key
// deleted or taken over), at the latest when the session's safety margin
// runs out (one TTL after the last acknowledged renewal was sent, before
// Consul can invalidate it), on Stop, Resign, or Close; a loss of the
// session cancels it before anything (Check, Proclaim) reports the session
// lost. Calling it again while leading returns the same context. It
// returns Interrupted after Stop (or when a Resign withdrew it while
// waiting), Closed after Close, PermissionDenied at once when the ACL
// token may not create sessions or write the key, and NodeExists with a
// *ForeignKeyError when elections/<name> holds a value another tool wrote.
func (p *participation) WaitForLeadership() (context.Context, error) {
	return p.campaign(context.Background(), nil, false)
}

// campaign is WaitForLeadership (publish false) and Campaign (publish
// true, with value), bounded by ctx.
func (p *participation) campaign(ctx context.Context, value []byte, publish bool) (context.Context, error) {
	if err := p.lock(ctx); err != nil {
		return nil, err
	}
	defer p.unlock()
	if err := p.stoppedError(); err != nil {
		return nil, err
	}
	if t := p.term; t != nil {
		if t.ctx.Err() == nil {
			if !publish {
				return t.ctx, nil
			}
			err := p.proclaim(ctx, t, value)
			if err == nil {
				return t.ctx, nil
			}
			if !topo.IsErrType(err, topo.NotLeader) {
				return nil, err
			}
		}
		rctx, rcancel := context.WithTimeout(p.c.ctx, requestTimeout)
		_ = p.endTerm(rctx)
		rcancel()
	}
	actx, cancel := context.WithCancelCause(p.stopCtx)
	defer cancel(nil)
	stopCtx := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	defer stopCtx()
	p.amu.Lock()
	p.attempt = cancel
	p.amu.Unlock()
	defer func() {
		p.amu.Lock()
		p.attempt = nil
		p.amu.Unlock()
	}()
	spec := lockSpec{path: p.path, key: p.key, value: []byte(p.id), ttl: p.c.opts.SessionTTL,
		detach: ctx.Done() != nil, valueKey: p.valueKeyFor, publish: publish, published: value,
		queue: queuePrefixFor(p.key, true)}
	retry := 50 * time.Millisecond
	for {
		h, err := p.c.lock(actx, spec)
		if err == nil {
			p.startTerm(h)
			return p.term.ctx, nil
		}
		switch {
		case p.stopCtx.Err() != nil:
			return nil, p.stoppedError()
		case ctx.Err() != nil:
			return nil, backendkit.FromContext(ctx, p.path)
		case errors.Is(context.Cause(actx), errResigned):
			return nil, backendkit.Wrap(topo.Interrupted, p.path, errResigned)
		case topo.IsErrType(err, topo.Unavailable) || topo.IsErrType(err, topo.ResourceExhausted) || topo.IsErrType(err, topo.LockLost):
			if !sleepCtx(actx, retry) {
				continue
			}
			retry = min(2*retry, watchRetryMax)
		default:
			return nil, err
		}
	}
}

// stoppedError returns Closed after Close, Interrupted after Stop, nil
// while the participation may campaign.
func (p *participation) stoppedError() error {
	if p.stopCtx.Err() == nil {
		return nil
	}
	if p.c.isClosed() && !p.stopped() {
		return topo.NewError(topo.Closed, p.path)
	}
	return backendkit.Wrap(topo.Interrupted, p.path, errors.New("the participation was stopped"))
}

var errResigned = errors.New("the candidacy was withdrawn by Resign")

// stopped reports whether Stop was called (as opposed to the Conn closing).
func (p *participation) stopped() bool {
	return errors.Is(context.Cause(p.stopCtx), errStopped)
}

var errStopped = errors.New("participation stopped")

// startTerm records leadership and starts watching the key with consistent
// blocking queries. The term's context is cancelled within the session's
// markLost, before the session reads as lost (it is a child of the
// session's claims context; the local deadline needs no request either),
// and as soon as a query shows the key gone or held by another session or
// acquire, on an ACL refusal, or on Stop/Resign/Close; and when it shows
// the key written since the acquire (its ModifyIndex no longer the term's
// token).
func (p *participation) startTerm(h held) {
	ctx, cancel := context.WithCancel(h.sess.claims)
	t := &term{c: p.c, path: p.path, key: p.key, valueKey: p.valueKeyFor(h.sess.id), ctx: ctx, cancel: cancel, held: h, monitor: make(chan struct{})}
	stopStop := context.AfterFunc(p.stopCtx, func() {
		// Stop ends a term that was still active: released, not lost
		// (Stop marks it too, but this runs first when it wins the race).
		if ctx.Err() == nil && p.stopped() {
			t.released.Store(true)
		}
		cancel()
	})
	p.term = t
	p.cur.Store(t)
	p.c.spawn(func() {
		defer close(t.monitor)
		defer func() {
			// Stop (or Close) cancelled the term: Stop's endTerm deletes the
			// keys and releases the claim. Otherwise the term was lost (or
			// Proclaim or Check found it lost): release the claim so that
			// another participation of the Conn may campaign.
			if p.stopCtx.Err() == nil && t.state.CompareAndSwap(termActive, termLost) {
				p.c.releaseClaim(h.cl)
			}
		}()
		defer cancel()
		defer stopStop()
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

// endTerm ends the current term: it cancels the term's context first (so
// that this process stops acting as leader before anyone else can lead),
// then, unless the monitor found the term lost already, deletes the key and
// the value key in one transaction checking the term's token (see
// releaseElection), and releases the local claim; an adopted session
// (ResumeLeaderParticipation) is destroyed. Within ctx; it returns the
// store's error when the delete did not happen.
func (p *participation) endTerm(ctx context.Context) error {
	t := p.term
	if t == nil {
		return nil
	}
	p.term = nil
	p.cur.CompareAndSwap(t, nil)
	own := t.state.CompareAndSwap(termActive, termEnding)
	t.cancel()
	<-t.monitor
	var err error
	if own && !t.held.sess.lost() {
		cond := &api.KVTxnOp{Verb: api.KVCheckIndex, Key: t.key, Index: t.held.token}
		err = p.c.releaseElection(ctx, cond, t.key, t.valueKey, t.held.sess)
	}
	if own {
		p.c.releaseClaim(t.held.cl)
	}
	if t.held.sess.own {
		p.c.destroySession(t.held.sess)
	}
	return err
}

// Stop implements topo.LeaderParticipation.Stop: it interrupts a pending
// WaitForLeadership or Campaign, cancels the leadership context, and
// deletes the election key and the value key if this participant's term
// still holds them (so another participant can lead at once, without
// lock-delay). It is idempotent and returns once the keys are deleted or
// the store could not be reached within a few seconds.
func (p *participation) Stop() {
	// The cause tells WaitForLeadership that Stop, not Close, ended it.
	p.stop(errStopped)
	p.sem <- struct{}{}
	defer p.unlock()
	if t := p.term; t != nil && t.ctx.Err() == nil {
		t.released.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := p.endTerm(ctx); err != nil {
		slog.Debug("consultopo: deleting an election key on Stop", "key", p.key, "err", err)
	}
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
// as a view of Observe: the channel receives the leader's id current when
// the call returns (read consistently before it returns; if any), then the
// id of every new leadership term (a new token), never "" and never twice
// for one term. It closes when ctx ends, the Conn closes, or on an ACL
// refusal (which is permanent); other store errors are retried. It returns
// Timeout/Interrupted when ctx already ended and Closed after Close.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	wctx, cancel, first, index, err := p.startObserve(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan string, 1)
	var last topo.Leader
	if first.ID != "" {
		ch <- first.ID
		last = first
	}
	go func() {
		defer close(ch)
		defer cancel()
		p.observeLoop(wctx, first, index, func(l topo.Leader) bool {
			if l.ID == "" || (l.ID == last.ID && l.Token == last.Token) {
				return true
			}
			last = l
			select {
			case ch <- l.ID:
				return true
			case <-wctx.Done():
				return false
			}
		})
	}()
	return ch, nil
}
