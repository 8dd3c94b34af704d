package consultopo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// claim reserves a lock or election key within one Conn. Consul lets a
// session re-acquire a key it holds, and one session carries all of a
// Conn's default-TTL locks and elections, so exclusion between lockers of
// one Conn is local: a locker first claims the key, and waits while another
// locker of the same Conn holds the claim.
type claim struct {
	key  string
	done chan struct{}
	once sync.Once
	sess atomic.Pointer[session] // the session holding the lock, once taken
}

// claimKey claims key for the caller. With try it fails with NodeExists
// when the key is claimed; otherwise it waits until the claim is released
// (or its holder's session is lost), or ctx ends.
func (c *Conn) claimKey(ctx context.Context, path, key string, try bool) (*claim, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, topo.NewError(topo.Closed, path)
		}
		cur, held := c.claims[key]
		if !held {
			cl := &claim{key: key, done: make(chan struct{})}
			c.claims[key] = cl
			c.mu.Unlock()
			return cl, nil
		}
		c.mu.Unlock()
		if try {
			return nil, backendkit.Wrap(topo.NodeExists, path, errors.New("the lock is held through this connection"))
		}
		var lost <-chan struct{}
		if s := cur.sess.Load(); s != nil {
			lost = s.ctx.Done()
		}
		select {
		case <-cur.done:
		case <-lost:
			c.releaseClaim(cur)
		case <-ctx.Done():
			return nil, c.ctxError(ctx, path)
		}
	}
}

// releaseClaim releases cl; it is idempotent.
func (c *Conn) releaseClaim(cl *claim) {
	cl.once.Do(func() {
		c.mu.Lock()
		if c.claims[cl.key] == cl {
			delete(c.claims, cl.key)
		}
		c.mu.Unlock()
		close(cl.done)
	})
}

// ctxError is the error for a wait under ctx (a caller's context merged
// with the Conn's) that ended: Closed when the Conn closed, else Timeout or
// Interrupted.
func (c *Conn) ctxError(ctx context.Context, path string) error {
	if c.ctx.Err() != nil {
		return topo.NewError(topo.Closed, path)
	}
	if err := backendkit.FromContext(ctx, path); err != nil {
		return err
	}
	return topo.NewError(topo.Interrupted, path)
}
