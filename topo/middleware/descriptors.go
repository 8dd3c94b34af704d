package middleware

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
)

// lockDescriptor decorates a held lock: Check and Unlock pass through the
// Around hook, and OnLockReleased is called once, when the lock ends.
type lockDescriptor struct {
	c        *conn
	call     Call
	next     topo.LockDescriptor
	acquired time.Time

	once      sync.Once
	unlocking atomic.Int32 // Unlock calls under way: they report the end
}

// watchEnd reports the end of a lock that ends without Unlock: when its
// Done closes while no Unlock is under way, the store dropped it (LockLost)
// or its Conn was closed (Closed). It runs in a goroutine of its own per
// held lock, only when an OnLockReleased hook is set, so that gauges of
// held locks come down when a session or lease is lost even if the holder
// never calls Check or Unlock again.
func (l *lockDescriptor) watchEnd() {
	<-l.next.Done()
	if l.unlocking.Load() > 0 {
		return // an Unlock is under way: it reports the end with its result
	}
	l.ended(l.endErr())
}

// endErr is the error reported for a lock whose Done closed without a
// successful Unlock: Closed after its Conn's Close, LockLost otherwise.
func (l *lockDescriptor) endErr() error {
	code := topo.LockLost
	if l.c.closing.Load() {
		code = topo.Closed
	}
	return &topo.Error{Code: code, Path: l.call.Path, Err: errLockEnded}
}

var errLockEnded = errors.New("the lock ended without Unlock")

func (l *lockDescriptor) Check(ctx context.Context) error {
	err := l.c.around(ctx, OpCheck, l.call.Path, l.next.Check)
	if topo.IsErrType(err, topo.LockLost) {
		l.ended(err)
	}
	return err
}

// Token is the wrapped lock's fencing token.
func (l *lockDescriptor) Token() int64 { return l.next.Token() }

// Done is the wrapped lock's Done channel.
func (l *lockDescriptor) Done() <-chan struct{} { return l.next.Done() }

// Unwrap returns the wrapped lock, so that the backend finds its own
// descriptor in an IfHeld condition.
func (l *lockDescriptor) Unwrap() topo.Fence { return l.next }

func (l *lockDescriptor) Unlock(ctx context.Context) error {
	l.unlocking.Add(1)
	err := l.c.around(ctx, OpUnlock, l.call.Path, l.next.Unlock)
	if err == nil || topo.IsErrType(err, topo.LockLost) || topo.IsErrType(err, topo.Closed) {
		// Released by this call, or already dropped by the store or Close.
		l.ended(err)
		l.unlocking.Add(-1)
		return err
	}
	// A second Unlock (Interrupted), or one that did not release the
	// lock (its ctx ended first, the store could not be reached): the
	// lock may still be held, and its end is reported when its Done
	// closes. If it closed while Unlock calls were under way, watchEnd
	// left the report to them: the last one reports it.
	if l.unlocking.Add(-1) == 0 {
		select {
		case <-l.next.Done():
			l.ended(l.endErr())
		default:
		}
	}
	return err
}

func (l *lockDescriptor) ended(err error) {
	l.once.Do(func() {
		if l.c.h.OnLockReleased != nil {
			l.c.h.OnLockReleased(l.call, time.Since(l.acquired), err)
		}
	})
}

// participation decorates a LeaderParticipation.
type participation struct {
	c    *conn
	name string
	next topo.LeaderParticipation

	mu      sync.Mutex // orders the OnLeadership reports of this participation
	leading *term      // the last term reported, nil before the first
}

// term is one leadership context reported to OnLeadership.
type term struct {
	ctx   context.Context
	ended bool // its end was reported; guarded by participation.mu
}

func (p *participation) WaitForLeadership() (context.Context, error) {
	var lctx context.Context
	err := p.c.around(context.Background(), OpWaitForLeadership, p.name, func(context.Context) error {
		var ierr error
		lctx, ierr = p.next.WaitForLeadership()
		return ierr
	})
	if err != nil {
		return nil, err
	}
	if p.c.h.OnLeadership != nil {
		p.report(lctx)
	}
	return lctx, nil
}

// report calls OnLeadership(true) for a new leadership context, and
// OnLeadership(false) once it ends. A repeated WaitForLeadership or
// Campaign that returns the same context is not a new term. The reports
// of one participation are made one at a time, in order: a term's end is
// reported before the next term's start, also when the next began before
// the goroutine that waits for the end saw it (a Campaign right after
// Resign).
func (p *participation) report(lctx context.Context) {
	call := p.c.call(OpWaitForLeadership, p.name)
	p.mu.Lock()
	prev := p.leading
	if prev != nil && prev.ctx == lctx {
		p.mu.Unlock()
		return
	}
	if prev != nil && !prev.ended {
		prev.ended = true
		p.c.h.OnLeadership(call, false)
	}
	t := &term{ctx: lctx}
	p.leading = t
	p.c.h.OnLeadership(call, true)
	p.mu.Unlock()
	go func() {
		<-lctx.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if !t.ended {
			t.ended = true
			p.c.h.OnLeadership(call, false)
		}
	}()
}

// Term returns the wrapped participant's term as it is: the backend's own
// Fence.
func (p *participation) Term() (topo.Fence, error) { return p.next.Term() }

func (p *participation) Stop() {
	_ = p.c.around(context.Background(), OpStop, p.name, func(context.Context) error {
		p.next.Stop()
		return nil
	})
}

func (p *participation) GetCurrentLeaderID(ctx context.Context) (id string, err error) {
	err = p.c.around(ctx, OpGetCurrentLeaderID, p.name, func(ctx context.Context) error {
		var ierr error
		id, ierr = p.next.GetCurrentLeaderID(ctx)
		return ierr
	})
	return id, err
}

func (p *participation) WaitForNewLeader(ctx context.Context) (ch <-chan string, err error) {
	err = p.c.around(ctx, OpWaitForNewLeader, p.name, func(ctx context.Context) error {
		var ierr error
		ch, ierr = p.next.WaitForNewLeader(ctx)
		return ierr
	})
	return ch, err
}

// Campaign passes through the Around hook and reports leadership like
// WaitForLeadership.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	var lctx context.Context
	err := p.c.around(ctx, OpCampaign, p.name, func(ctx context.Context) error {
		var ierr error
		lctx, ierr = p.next.Campaign(ctx, value)
		return ierr
	})
	if err != nil {
		return nil, err
	}
	if p.c.h.OnLeadership != nil {
		p.report(lctx)
	}
	return lctx, nil
}

// Proclaim passes through the Around hook.
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	return p.c.around(ctx, OpProclaim, p.name, func(ctx context.Context) error {
		return p.next.Proclaim(ctx, value)
	})
}

// Resign passes through the Around hook. A read-only switch never refuses
// it (OpResign does not mutate, like Stop).
func (p *participation) Resign(ctx context.Context) error {
	return p.c.around(ctx, OpResign, p.name, p.next.Resign)
}

// Leader passes through the Around hook.
func (p *participation) Leader(ctx context.Context) (l topo.Leader, err error) {
	err = p.c.around(ctx, OpLeader, p.name, func(ctx context.Context) error {
		var ierr error
		l, ierr = p.next.Leader(ctx)
		return ierr
	})
	return l, err
}

// Observe passes through the Around hook.
func (p *participation) Observe(ctx context.Context) (ch <-chan topo.Leader, err error) {
	err = p.c.around(ctx, OpObserve, p.name, func(ctx context.Context) error {
		var ierr error
		ch, ierr = p.next.Observe(ctx)
		return ierr
	})
	return ch, err
}

// ResumeInfo is the wrapped participant's.
func (p *participation) ResumeInfo() ([]byte, error) { return p.next.ResumeInfo() }
