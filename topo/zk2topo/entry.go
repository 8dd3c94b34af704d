package zk2topo

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// Lock and election entries are ephemeral znodes: one left behind by a
// create whose outcome the caller never saw would block other lockers (or
// stand as a leader nobody is) until the session ends. createEntry prevents
// that in the two ways a create's outcome can be lost:
//
//   - the caller's context ends while the create is in flight: the create
//     finishes in the background and its entry, if made, is deleted;
//   - the connection drops after the request was sent (ErrConnectionClosed):
//     the entry may or may not exist; entries under the parent owned by this
//     session and unknown to the Conn are deleted once reconnected (unless
//     another create of this Conn under the same parent is in flight, which
//     would make them indistinguishable).
//
// The Conn records every entry it created (c.entries) until it deletes it or
// the session ends.

// createEntry runs create (which makes one entry under parentZp and returns
// its path) honouring ctx, and records the entry.
func (c *Conn) createEntry(ctx context.Context, p, parentZp string, create func() (string, error)) (string, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return "", topo.FromContext(ctx, p)
	case <-c.closing:
		return "", topo.NewError(topo.Closed, p)
	}
	c.mu.Lock()
	c.pending[parentZp]++
	c.mu.Unlock()
	type result struct {
		node string
		err  error
	}
	results := make(chan result) // unbuffered: a result is either taken or handled as abandoned
	abandoned := make(chan struct{})
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		node, err := create()
		<-c.sem
		c.mu.Lock()
		c.pending[parentZp]--
		if c.pending[parentZp] == 0 {
			delete(c.pending, parentZp)
		}
		if err == nil {
			c.entries[node] = true
		}
		c.mu.Unlock()
		if errors.Is(err, zk.ErrConnectionClosed) && !c.closed.Load() {
			c.reapOrphans(parentZp)
		}
		select {
		case results <- result{node, err}:
		case <-abandoned:
			if err == nil {
				c.deleteEntry(node)
			}
		}
	}()
	select {
	case r := <-results:
		return r.node, r.err
	case <-ctx.Done():
		close(abandoned)
		// The result may have been ready already.
		select {
		case r := <-results:
			if r.err == nil {
				c.deleteEntry(r.node)
			}
		default:
		}
		return "", topo.FromContext(ctx, p)
	}
}

// deleteEntry deletes an entry of this Conn with a fresh context and
// forgets it.
func (c *Conn) deleteEntry(node string) {
	c.forgetEntry(node)
	if c.closed.Load() {
		return
	}
	ctx, cancel := freshContext()
	defer cancel()
	_ = c.do(ctx, c.relPath(node), func() error { return c.zk.Delete(node, -1) })
}

// forgetEntry drops node from the Conn's record of its entries.
func (c *Conn) forgetEntry(node string) {
	c.mu.Lock()
	delete(c.entries, node)
	c.mu.Unlock()
}

// reapOrphans deletes the entries under parentZp that belong to this
// session but that the Conn does not know (made by a create whose answer
// was lost).
func (c *Conn) reapOrphans(parentZp string) {
	ctx, cancel := freshContext()
	defer cancel()
	p := c.relPath(parentZp)
	var children []string
	err := c.read(ctx, p, func() error {
		var err error
		children, _, err = c.zk.Children(parentZp)
		return err
	})
	if err != nil {
		return
	}
	for _, ch := range children {
		node := parentZp + "/" + ch
		c.mu.Lock()
		skip := c.entries[node] || c.pending[parentZp] > 0
		c.mu.Unlock()
		if skip {
			continue
		}
		var exists bool
		var st *zk.Stat
		err := c.read(ctx, p, func() error {
			var err error
			exists, st, err = c.zk.Exists(node)
			return err
		})
		if err != nil || !exists || st.EphemeralOwner != c.zk.SessionID() {
			continue
		}
		c.mu.Lock()
		skip = c.entries[node] || c.pending[parentZp] > 0
		c.mu.Unlock()
		if !skip {
			c.log.Info("zk2topo: deleting a lock or election entry whose create lost its answer", "znode", node)
			_ = c.do(ctx, p, func() error { return c.zk.Delete(node, -1) })
		}
	}
}
