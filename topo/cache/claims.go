package cache

import (
	"context"
	"time"

	"github.com/topokit/topokit/topo"
)

// The Cache keeps no state about locks and elections: these calls go to
// the wrapped Conn as they are.

// Lock implements topo.Conn.Lock on the wrapped Conn.
func (c *Cache) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.conn.Lock(ctx, dirPath, contents)
}

// LockWithTTL implements topo.Conn.LockWithTTL on the wrapped Conn.
func (c *Cache) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	return c.conn.LockWithTTL(ctx, dirPath, contents, ttl)
}

// LockName implements topo.Conn.LockName on the wrapped Conn.
func (c *Cache) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.conn.LockName(ctx, dirPath, contents)
}

// TryLock implements topo.Conn.TryLock on the wrapped Conn.
func (c *Cache) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.conn.TryLock(ctx, dirPath, contents)
}

// NewLeaderParticipation implements topo.Conn.NewLeaderParticipation on the
// wrapped Conn.
func (c *Cache) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	return c.conn.NewLeaderParticipation(name, id)
}

// ResumeLeaderParticipation implements topo.Conn.ResumeLeaderParticipation
// on the wrapped Conn.
func (c *Cache) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	return c.conn.ResumeLeaderParticipation(ctx, name, id, info)
}
