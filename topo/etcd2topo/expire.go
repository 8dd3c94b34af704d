package etcd2topo

import (
	"context"
	"errors"
	"maps"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/topokit/topokit/topo/backendkit"
)

// RevokeLeases revokes in etcd every lease this Conn's claims live on, as
// if each had expired, and returns once the Conn has observed the loss:
// from then on every lock descriptor taken through the Conn reports
// LockLost (its Done is closed), every leadership context is cancelled and
// every semaphore slot is gone, exactly as after a real expiry. The Conn
// itself stays usable: later claims are granted new leases.
//
// It exists for tests of code built on topokit that must survive a lost
// lease against a real etcd (memorytopo's Conn.ExpireSession is the same
// for memory; the shared suite's ExpireSession hook calls it for etcd). A lease that etcd already
// dropped counts as revoked. It returns Timeout or Interrupted when ctx
// ends first (the leases revoked so far stay revoked), Closed after
// Close, and Unavailable when etcd cannot be reached. Safe for concurrent
// use.
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
		// The Conn would learn it at its next renewal; learn it now, as
		// that renewal would, rather than a third of the TTL later (hours
		// for LockName's lease).
		l.markLost()
	}
	return nil
}
