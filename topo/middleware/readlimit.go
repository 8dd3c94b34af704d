package middleware

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// DefaultReadConcurrency is ReadLimit's limit when it is given none: 32
// reads in flight per cell, as Vitess's topo_read_concurrency.
const DefaultReadConcurrency = 32

// ReadLimit returns a decorator that lets at most n reads (ListDir, Get,
// GetVersion, List: Op.IsRead) be in flight at once on each decorated
// connection, that is per cell when it decorates a Server. n <= 0 means
// DefaultReadConcurrency. A read waiting for a slot honours its context:
// it returns Timeout when the deadline passes and Interrupted when the
// context is cancelled, and then never reaches the store. Writes, locks,
// watches and elections are not limited.
func ReadLimit(n int) topo.Middleware {
	if n <= 0 {
		n = DefaultReadConcurrency
	}
	return Middleware(func(topo.ConnInfo) Hooks {
		slots := make(chan struct{}, n)
		return Hooks{Around: func(ctx context.Context, c Call, next func(context.Context) error) error {
			if !c.Op.IsRead() {
				return next(ctx)
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return backendkit.FromContext(ctx, c.Path)
			}
			defer func() { <-slots }()
			return next(ctx)
		}}
	})
}
