package middleware

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/topokit/topokit/topo"
)

// ReadOnly is a runtime switch that refuses writes, transactions, lock
// acquisitions and joining elections (Op.Mutates) on every connection
// decorated with its Middleware, while reads, watches, observing an
// election (NewLeaderParticipation, then GetCurrentLeaderID, Leader,
// Observe) and releases (Unlock, Check, Stop, Resign) keep working.
// Everything built on the Conn follows: semaphore acquisitions and
// election.Election's Await are refused as the lock or participation
// calls they make. One switch can decorate
// every cell of a Server, including cells opened after it was set, so the
// whole topology turns read-only at once. The zero value is writable. It is
// safe for concurrent use.
type ReadOnly struct {
	on atomic.Bool
}

// Set turns read-only mode on (true) or off (false). Calls already past the
// switch are not affected.
func (r *ReadOnly) Set(readOnly bool) { r.on.Store(readOnly) }

// Enabled reports whether read-only mode is on.
func (r *ReadOnly) Enabled() bool { return r.on.Load() }

var errReadOnly = errors.New("the topology is in read-only mode")

// Middleware returns the decorator that consults the switch on every call:
// while it is on, an operation for which Op.Mutates is true returns a
// topo.ReadOnly *Error naming the path, and nothing reaches the store.
func (r *ReadOnly) Middleware() topo.Middleware {
	return Middleware(func(topo.ConnInfo) Hooks {
		return Hooks{Around: func(ctx context.Context, c Call, next func(context.Context) error) error {
			if c.Op.Mutates() && r.on.Load() {
				return &topo.Error{Code: topo.ReadOnly, Path: c.Path, Err: errReadOnly}
			}
			return next(ctx)
		}}
	})
}
