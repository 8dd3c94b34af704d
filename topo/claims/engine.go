package claims

import (
	"context"
	"sync"
	"time"

	"sync/atomic"

	"github.com/topokit/topokit/topo"
)

// Engine runs the claims of one Conn over its store's Driver: the Conn's
// Lock, TryLock, LockWithTTL, LockName, NewLeaderParticipation and
// ResumeLeaderParticipation forward to it. It is safe for concurrent use.
type Engine struct {
	d Driver
	// The driver's optional steps (nil: it has none), asserted once.
	aheader  Aheader
	acquirer Acquirer
	monitor  Monitor
	signaler GoneSignaler
	roomer   Roomer
	// turns is set when a lock's waiter parks on the channel its entry
	// was created with (TurnSignaler): the driver is a Roomer and a
	// signals driver, with no Monitor.
	turns TurnSignaler
	// signals is set when the engine waits through signaler: the driver
	// is a GoneSignaler without the Acquire step.
	signals bool
	// lazyLocks is set when a lock granted at Create may be unshared
	// (see sharedBit): the driver is a GoneSignaler without Monitor (nor
	// Acquire). Only a Roomer's locks read it (Engine.lock): another
	// driver's locks are all shared.
	lazyLocks bool

	defect    Defect
	hooks     Hooks
	closing   chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
}

// Claims is the part of topo.Conn that an Engine implements, and Inspect,
// which topo/inspect finds on a Conn. A backend's Conn embeds it, set to
// its Engine, and so has Lock, LockWithTTL, LockName, TryLock,
// NewLeaderParticipation, ResumeLeaderParticipation and Inspect without a
// line of its own.
type Claims interface {
	Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error)
	LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error)
	LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error)
	TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error)
	NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error)
	ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error)
	Inspect(ctx context.Context, q Queue) (QueueState, error)
}

var _ Claims = (*Engine)(nil)

// Options tune an Engine. The zero value is right for every backend.
type Options struct {
	// Defect makes the engine deliberately wrong in one way, for the
	// mutation kit (topo/test/mutation) only. Zero: no defect.
	Defect Defect
	// Hooks see each claim call before the driver does (memorytopo's
	// call counters and faults). Zero: none.
	Hooks Hooks
}

// New returns an Engine over d.
func New(d Driver, o Options) *Engine {
	e := &Engine{d: d, defect: o.Defect, hooks: o.Hooks, closing: make(chan struct{})}
	e.aheader, _ = d.(Aheader)
	e.acquirer, _ = d.(Acquirer)
	e.monitor, _ = d.(Monitor)
	e.signaler, _ = d.(GoneSignaler)
	e.roomer, _ = d.(Roomer)
	e.signals = e.signaler != nil && e.acquirer == nil
	e.lazyLocks = e.signals && e.monitor == nil
	if t, ok := d.(TurnSignaler); ok && e.lazyLocks && e.roomer != nil {
		e.turns = t
	}
	return e
}

// Close marks the engine closed, as its Conn's Close does: waiting Lock,
// WaitForLeadership and Campaign calls withdraw their entries and return
// Closed, Observe and WaitForNewLeader channels close, and later calls
// return Closed. It does not end sessions: the backend ends them (and
// declares them lost) after Close. Idempotent.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		close(e.closing)
	})
}

// closedErr returns the Closed *topo.Error for path once the engine is
// closed, nil before.
func (e *Engine) closedErr(path string) error {
	if e.closed.Load() {
		return topo.NewError(topo.Closed, path)
	}
	return nil
}
