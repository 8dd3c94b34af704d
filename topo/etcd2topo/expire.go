package etcd2topo

import (
	"context"
	"errors"
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/topokit/topokit/topo/backendkit"
)

// RevokeLeases revokes every lease of this Conn's claims, as if each had
// expired, and returns once the Conn has seen the loss: every lock
// reports LockLost (Done closed), every leadership context is cancelled,
// every semaphore slot gone. The Conn stays usable, with new leases.
// For tests surviving a lost lease against real etcd (memorytopo's
// ExpireSession; the shared suite's ExpireSession hook). A lease already
// gone counts as revoked. It returns Timeout or Interrupted when ctx ends
// first (leases revoked so far stay so), Closed after Close, Unavailable
// when etcd is unreachable. Safe for concurrent use.
func (c *Conn) RevokeLeases(ctx context.Context) error {
	if err := backendkit.Ready(ctx, "", c.isClosed); err != nil {
		return err
	}
	c.mu.Lock()
	leases := slices.Collect(maps.Keys(c.leases))
	c.mu.Unlock()
	for _, l := range leases {
		if _, err := c.cli.Revoke(ctx, l.id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return c.convertError(ctx, err, "")
		}
		// Now, not at the next renewal (hours away for LockName's).
		l.markLost()
	}
	return nil
}
