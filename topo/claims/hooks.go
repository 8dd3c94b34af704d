package claims

import (
	"context"
	"time"

	"github.com/topokit/topokit/topo/backendkit"
)

// Call names one claim call of a Conn, a LockDescriptor or a
// LeaderParticipation, for Hooks.
type Call int

// The calls Hooks see. A leadership term's Fence (Term) and ResumeInfo
// make no call of their own; Stop is not seen either.
const (
	CallLock Call = iota + 1
	CallLockWithTTL
	CallLockName
	CallTryLock
	CallCheck  // LockDescriptor.Check
	CallUnlock // LockDescriptor.Unlock
	CallNewLeaderParticipation
	CallResumeLeaderParticipation
	CallWaitForLeadership
	CallCampaign
	CallProclaim
	CallResign
	CallLeader
	CallGetCurrentLeaderID
	CallObserve
	CallWaitForNewLeader
)

// Hooks let a backend see each claim call before it reaches the driver:
// memorytopo counts the calls and injects its test faults there. The zero
// value has none; other backends need none.
type Hooks struct {
	// Count, when set, runs first in every call, before any check, so that
	// a call refused for its arguments or a closed engine is seen too.
	Count func(c Call)
	// Enter, when set, runs once the call's arguments are checked, before
	// it reaches the driver, with the path errors name (the lock's
	// directory, the election's name). An error ends the call with that
	// error (Resign still ends the term, then returns it). ctx is the
	// call's own, with these exceptions: NewLeaderParticipation has
	// context.Background(); WaitForLeadership has a context that Stop
	// cancels, and Campaign its ctx also cancelled by Stop (an error of a
	// stopped participant becomes Interrupted); Resign with an ended ctx
	// has a fresh one of a few seconds (resignGrace).
	Enter func(ctx context.Context, c Call, path string) error
}

// count runs Hooks.Count for c, if set.
func (e *Engine) count(c Call) {
	if e.hooks.Count != nil {
		e.hooks.Count(c)
	}
}

// enter runs Hooks.Enter for c on path, if set.
func (e *Engine) enter(ctx context.Context, c Call, path string) error {
	if e.hooks.Enter == nil {
		return nil
	}
	return e.hooks.Enter(ctx, c, path)
}

// prologue is the start of a call c on path that takes only a context:
// Hooks.Count, the context's check, then Hooks.Enter.
func (e *Engine) prologue(ctx context.Context, c Call, path string) error {
	e.count(c)
	if err := backendkit.CheckContext(ctx, path); err != nil {
		return err
	}
	return e.enter(ctx, c, path)
}

// resignGrace bounds Resign's Hooks.Enter when the caller's context has
// already ended.
const resignGrace = 3 * time.Second
