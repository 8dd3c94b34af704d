package memorytopo

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The Conn's claims: locks, descriptors, elections and leader values are
// the claims engine's (topo/claims, run over driver.go); this file only
// puts memorytopo's call counting and fault injection in front of each
// call, as for every other call of a Conn: the call is counted (its
// Operation, see Factory.CallCount), its arguments checked (backendkit's
// order), then it meets Closed, the partition and the faults (Conn.enter)
// with its canonical path, and only then reaches the engine. The engine
// checks the arguments again (the same checks, the same result).

// resignGrace bounds the wait of Resign for the store (latency, a hung
// store, a partition) when its context has already ended.
const resignGrace = 3 * time.Second

// Lock implements topo.Conn.Lock (claims.Engine.Lock): the entry is on
// c's session (Options.SessionTTL), the oldest entry under dirPath/locks
// holds the lock and waiters queue behind it in order. NoNode when no
// file lies below dirPath, InvalidArgument when dirPath is a file with
// none below it (backendkit.LockNeedsFiles), Timeout or Interrupted when
// ctx ends while waiting (the entry is removed), LockLost when the
// session is lost while waiting, InvalidPath for a malformed or reserved
// dirPath, Closed after Close. Faults apply as OpLock.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpLock)
	return c.lock(ctx, OpLock, dirPath, contents, func() (topo.LockDescriptor, error) {
		return c.eng.Lock(ctx, dirPath, contents)
	})
}

// LockWithTTL implements topo.Conn.LockWithTTL: Lock, with the entry on a
// lease of its own of ttl, which lapses ttl after renewal stops (see
// Conn.PauseKeepAlive and OpKeepAlive). InvalidArgument when ttl is not
// positive. Faults apply as OpLockWithTTL.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	c.f.count(OpLockWithTTL)
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
	if err != nil {
		return nil, err
	}
	if err := c.enter(ctx, OpLockWithTTL, p); err != nil {
		return nil, err
	}
	return c.descriptor(p)(c.eng.LockWithTTL(ctx, dirPath, contents, ttl))
}

// LockName implements topo.Conn.LockName: Lock without requiring dirPath
// to hold files, with the entry on a lease of its own of
// Options.NamedLockTTL. Faults apply as OpLockName.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpLockName)
	return c.lock(ctx, OpLockName, dirPath, contents, func() (topo.LockDescriptor, error) {
		return c.eng.LockName(ctx, dirPath, contents)
	})
}

// TryLock implements topo.Conn.TryLock: it takes the lock only if nobody
// holds or waits for it, atomically, and otherwise returns NodeExists at
// once (naming the holder, see topo.LockHeldError). NoNode and
// InvalidArgument as Lock. Faults apply as OpTryLock.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	c.f.count(OpTryLock)
	return c.lock(ctx, OpTryLock, dirPath, contents, func() (topo.LockDescriptor, error) {
		return c.eng.TryLock(ctx, dirPath, contents)
	})
}

// lock checks a lock call's arguments, meets the faults of op, then runs
// the engine's call.
func (c *Conn) lock(ctx context.Context, op Operation, dirPath, contents string, call func() (topo.LockDescriptor, error)) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckLock(dirPath, contents)
	if err != nil {
		return nil, err
	}
	if err := c.enter(ctx, op, p); err != nil {
		return nil, err
	}
	return c.descriptor(p)(call())
}

// descriptor returns a function wrapping the engine's descriptor of the
// lock of p.
func (c *Conn) descriptor(p string) func(topo.LockDescriptor, error) (topo.LockDescriptor, error) {
	return func(ld topo.LockDescriptor, err error) (topo.LockDescriptor, error) {
		if err != nil {
			return nil, err
		}
		return &lockDescriptor{LockDescriptor: ld, c: c, path: p}, nil
	}
}

// lockDescriptor is the engine's descriptor of a held lock, with its
// Check and Unlock counted and meeting faults. Token and Done are the
// engine's: the entry's revision, and a channel closed when the lock is
// released or its lease ends (before anyone else is granted).
type lockDescriptor struct {
	topo.LockDescriptor
	c    *Conn
	path string
	// unlocked is set by the first Unlock that reached the engine: a
	// second one returns Interrupted, also after the lock was lost.
	unlocked atomic.Bool
}

// Unwrap returns the engine's descriptor (claims.FenceGuard finds it).
func (d *lockDescriptor) Unwrap() topo.Fence { return d.LockDescriptor }

// Check implements topo.Fence.Check: nil while held, LockLost once the
// store dropped the lock (ExpireSession, a lapsed lease, also after
// Partition), Interrupted after Unlock, Closed after the Conn's Close.
// Faults apply as OpCheck on the locked directory.
func (d *lockDescriptor) Check(ctx context.Context) error {
	d.c.f.count(OpCheck)
	if err := backendkit.CheckContext(ctx, d.path); err != nil {
		return err
	}
	if err := d.c.enter(ctx, OpCheck, d.path); err != nil {
		return err
	}
	return d.LockDescriptor.Check(ctx)
}

// Unlock implements topo.LockDescriptor.Unlock: it removes the entry,
// letting the next waiter in. Interrupted for a second Unlock (also when
// the first returned LockLost), LockLost once the store dropped the lock, Closed after the Conn's Close (which
// released it). Faults apply as OpUnlock.
func (d *lockDescriptor) Unlock(ctx context.Context) error {
	d.c.f.countAt(OpUnlock, uint64(d.Token()))
	if err := backendkit.CheckContext(ctx, d.path); err != nil {
		return err
	}
	if err := d.c.enter(ctx, OpUnlock, d.path); err != nil {
		return err
	}
	if d.unlocked.Swap(true) {
		return topo.NewError(topo.Interrupted, d.path)
	}
	return d.LockDescriptor.Unlock(ctx)
}

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation
// (claims.Engine): name is a path below elections/; each candidate is an
// entry under elections/<name>/ on c's session holding id, and the oldest
// leads. InvalidArgument for an empty name or id, InvalidPath for a
// malformed name, Closed after Close. Only error faults apply to it
// (OpNewLeaderParticipation): nothing happens in the store yet.
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
		stripped := &faultState{err: fs.err, rules: fs.rules}
		if err := c.f.injectState(context.Background(), stripped, OpNewLeaderParticipation, p, c.done); err != nil {
			return nil, err
		}
	}
	lp, err := c.eng.NewLeaderParticipation(name, id)
	return c.participation(p, lp, err)
}

// ResumeLeaderParticipation implements topo.Conn.ResumeLeaderParticipation
// (claims.Engine, driver.Resume): a Conn of the same store and root takes
// the candidacy back by adopting the lease of the Conn that created it,
// with its other entries; it keeps its place and, if it led, its term
// (same Token). The original participant's term ends (LockLost). Errors:
// those of NewLeaderParticipation, InvalidArgument for malformed or
// foreign info, LockLost when the entry is gone, Closed after Close.
// Faults apply as OpResumeLeaderParticipation.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	c.f.count(OpResumeLeaderParticipation)
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p, []byte(id)); err != nil {
		return nil, err
	}
	// On a closed Conn the engine's own checks decide: malformed or
	// foreign info is InvalidArgument even then.
	if err := c.enter(ctx, OpResumeLeaderParticipation, p); err != nil && !topo.IsErrType(err, topo.Closed) {
		return nil, err
	}
	lp, err := c.eng.ResumeLeaderParticipation(ctx, name, id, info)
	return c.participation(p, lp, err)
}

func (c *Conn) participation(name string, lp topo.LeaderParticipation, err error) (topo.LeaderParticipation, error) {
	if err != nil {
		return nil, err
	}
	stopCtx, stop := context.WithCancel(context.Background())
	return &participation{LeaderParticipation: lp, c: c, name: name, stopCtx: stopCtx, stop: stop}, nil
}

// participation is the engine's participant, with its calls counted and
// meeting faults. Term and ResumeInfo are the engine's (they do not
// contact the store, are not counted and meet no faults).
type participation struct {
	topo.LeaderParticipation
	c    *Conn
	name string
	// stopCtx is cancelled by Stop: it ends the wait for the store
	// (latency, a hung store) of WaitForLeadership and Campaign.
	stopCtx context.Context
	stop    context.CancelFunc
}

// WaitForLeadership implements topo.LeaderParticipation.WaitForLeadership
// (claims): it blocks until this participant's entry is the oldest. The
// returned context is cancelled when the term ends: Stop, Resign,
// ExpireSession, a lapsed session, a partition's notice, the Conn's Close.
// Interrupted after Stop, Closed after Close. Faults apply as
// OpWaitForLeadership; latency and a hung store end early with Stop.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.c.f.count(OpWaitForLeadership)
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	if err := p.enterStoppable(p.stopCtx, OpWaitForLeadership); err != nil {
		return nil, err
	}
	return p.LeaderParticipation.WaitForLeadership()
}

// Campaign implements topo.LeaderParticipation.Campaign (claims):
// WaitForLeadership bounded by ctx, with value published from the
// entry's creation. Faults apply as OpCampaign; latency and a hung store
// end early with ctx or Stop.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	p.c.f.count(OpCampaign)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return nil, err
	}
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.stopCtx, cancel)()
	if err := p.enterStoppable(cctx, OpCampaign); err != nil {
		if p.stopCtx.Err() == nil && ctx.Err() != nil {
			return nil, backendkit.FromContext(ctx, p.name)
		}
		return nil, err
	}
	return p.LeaderParticipation.Campaign(ctx, value)
}

// enterStoppable is Conn.enter for a wait that Stop ends: Interrupted
// once stopped.
func (p *participation) enterStoppable(ctx context.Context, op Operation) error {
	if p.stopCtx.Err() != nil {
		return topo.NewError(topo.Interrupted, p.name)
	}
	if err := p.c.enter(ctx, op, p.name); err != nil {
		if p.stopCtx.Err() != nil {
			return topo.NewError(topo.Interrupted, p.name)
		}
		return err
	}
	return nil
}

// Stop implements topo.LeaderParticipation.Stop (claims): it removes this
// participant's entry and makes later WaitForLeadership and Campaign
// return Interrupted. Not counted; meets no faults. Idempotent.
func (p *participation) Stop() {
	p.stop()
	p.LeaderParticipation.Stop()
}

// Resign implements topo.LeaderParticipation.Resign (claims): the
// leadership context is cancelled, then the entry removed. With a ctx
// that has already ended, the store is waited for during a grace of 3 s.
// When the store cannot be reached in time (Partition, a hung store,
// latency) or a fault fails the call, Resign returns Timeout, Interrupted
// or the injected error, and the term ends all the same (the engine
// removes the entry). Closed after Close. Faults apply as OpResign.
func (p *participation) Resign(ctx context.Context) error {
	p.c.f.count(OpResign)
	if ctx.Err() != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignGrace)
		defer cancel()
		ctx = gctx
	}
	err := p.c.enter(ctx, OpResign, p.name)
	rerr := p.LeaderParticipation.Resign(ctx)
	if err != nil {
		return err
	}
	return rerr
}

// GetCurrentLeaderID implements topo.LeaderParticipation (claims): the id
// of the oldest entry, "" when there is none. Closed after Close; faults
// apply as OpGetCurrentLeaderID.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	p.c.f.count(OpGetCurrentLeaderID)
	if err := p.check(ctx, OpGetCurrentLeaderID); err != nil {
		return "", err
	}
	return p.LeaderParticipation.GetCurrentLeaderID(ctx)
}

// Leader implements topo.LeaderParticipation.Leader (claims): the id,
// published value and term token of the oldest entry, read at once;
// NoLeader when there is none. Closed after Close; faults and Partition
// apply as OpLeader.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	p.c.f.count(OpLeader)
	if err := p.check(ctx, OpLeader); err != nil {
		return topo.Leader{}, err
	}
	return p.LeaderParticipation.Leader(ctx)
}

// Observe implements topo.LeaderParticipation.Observe (claims): the
// leader at the time of the call first, then each change of term or
// value, the last one sent being the current state; it closes when ctx
// ends or the Conn closes. Faults and Partition apply to the call as
// OpObserve, not to the established stream.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	p.c.f.count(OpObserve)
	if err := p.check(ctx, OpObserve); err != nil {
		return nil, err
	}
	return p.LeaderParticipation.Observe(ctx)
}

// WaitForNewLeader implements topo.LeaderParticipation.WaitForNewLeader
// (claims, a view of Observe): the id of the leader at the time of the
// call, then of every new term, a re-elected id included. Faults apply
// to the call as OpWaitForNewLeader.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	p.c.f.count(OpWaitForNewLeader)
	if err := p.check(ctx, OpWaitForNewLeader); err != nil {
		return nil, err
	}
	return p.LeaderParticipation.WaitForNewLeader(ctx)
}

// Proclaim implements topo.LeaderParticipation.Proclaim (claims): guarded
// on the current term in the store. NotLeader when this participant does
// not lead, InvalidArgument for an oversized value, Closed after Close.
// Faults and Partition apply as OpProclaim.
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	p.c.f.count(OpProclaim)
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return err
	}
	if err := p.c.enter(ctx, OpProclaim, p.name); err != nil {
		return err
	}
	return p.LeaderParticipation.Proclaim(ctx, value)
}

// check is the prologue of a read: the context, then Conn.enter.
func (p *participation) check(ctx context.Context, op Operation) error {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	return p.c.enter(ctx, op, p.name)
}
