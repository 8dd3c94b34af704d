package mutation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The check-order mutants break backendkit's order of argument checks
// (context, path, reserved names, value, version or ttl, and only then
// Closed) or its messages; the CheckOrder group catches them.

// Close closes the backend's Conn, and remembers it for
// closed-before-input.
func (c *conn) Close() {
	c.closed.Store(true)
	c.Conn.Close()
}

// early returns the error a check-order mutant gives before the backend
// sees the call: closed-before-input says Closed once the Conn is closed,
// before the context and the input are checked; input-before-context
// returns the error of the call's input checks (check, which may be nil)
// before its context is looked at.
func (c *conn) early(p string, check func() error) error {
	switch c.name {
	case "closed-before-input":
		if c.closed.Load() {
			return topo.NewError(topo.Closed, p)
		}
	case "input-before-context":
		if check != nil {
			return check()
		}
	}
	return nil
}

// ttlFirst is LockWithTTL's early check for ttl-before-lock-args: a
// non-positive ttl is refused before the directory and the value are
// checked (but after the context).
func (c *conn) ttlFirst(ctx context.Context, dir string, ttl time.Duration) error {
	if c.name != "ttl-before-lock-args" || ctx.Err() != nil || ttl > 0 {
		return nil
	}
	return backendkit.Wrap(topo.InvalidArgument, dir, fmt.Errorf("TTL must be positive, got %v", ttl))
}

// reworded is own-messages: an InvalidArgument *topo.Error (not a
// transaction's) comes back with the code and path only, without
// backendkit's wording of the check that failed (the value's size, the
// version, the ttl).
func (c *conn) reworded(err error) error {
	if c.name != "own-messages" || err == nil {
		return err
	}
	var te *topo.Error
	var txe *topo.TxnError
	if errors.As(err, &txe) || !errors.As(err, &te) || te.Code != topo.InvalidArgument {
		return err
	}
	return topo.NewError(te.Code, te.Path)
}
