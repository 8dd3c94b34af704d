package zk2topo

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Entry creation. An entry whose create's outcome the caller never saw
// would block others (or lead) until its session ends. So: when ctx ends
// during the create, its entry, if made, is deleted on the same session;
// when the connection drops after the send, the session's entries under
// the parent that it does not know are reaped once reconnected (unless
// another create there is in flight: its entry would look the same).

// seqLen is the length of a sequential znode's suffix ("%010d").
const seqLen = 10

// isEntryName reports whether a child name is an entry's (ten digits).
func isEntryName(n string) bool {
	return len(n) == seqLen && strings.Trim(n, "0123456789") == ""
}

// entryNames returns the entry names among children, sorted.
func entryNames(children []string) []string {
	out := slices.DeleteFunc(slices.Clone(children), func(n string) bool { return !isEntryName(n) })
	slices.Sort(out)
	return out
}

// created is what an entry's create made: its path, a candidate's value
// znode, and its Stat when the answer carried one (createWithStat).
type created struct {
	node, extra string
	st          *zk.Stat
}

// createEntryWith runs create (one entry under parentZp on session s, a
// candidate with its value znode in the same multi; lock: a lock's)
// and records the entry. When ctx ends first, it waits for the create's
// answer (at most abandonGrace) and deletes an entry it made (dropEntry)
// before it returns ctx's error: the entry is gone from the server then,
// unless the server did not answer within the grace (then it is deleted
// in the background when the answer comes) or the session ended (its
// entries went with it).
func (c *Conn) createEntryWith(ctx context.Context, s *zkSession, p, parentZp string, lock bool, create func() (created, error)) (created, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return created{}, backendkit.FromContext(ctx, p)
	case <-c.closing:
		return created{}, topo.NewError(topo.Closed, p)
	}
	s.mu.Lock()
	s.pending[parentZp]++
	s.creates[parentZp]++
	s.mu.Unlock()
	type result struct {
		created
		err error
	}
	results := make(chan result) // unbuffered: a result is either taken or handled as abandoned
	abandoned := make(chan struct{})
	started := c.goBG(func() {
		cr, err := create()
		node := cr.node
		<-c.sem
		s.mu.Lock()
		s.createEnded(parentZp)
		if err == nil && !s.isLost() {
			s.entries[node] = &entry{election: !lock, value: cr.extra}
		}
		s.mu.Unlock()
		if errors.Is(err, zk.ErrConnectionClosed) && !c.closed.Load() && !s.isLost() {
			c.reapOrphans(s, parentZp)
		}
		select {
		case results <- result{cr, err}:
		case <-abandoned:
			if err == nil {
				c.dropEntry(s, node, !lock)
			}
		}
	})
	if !started {
		<-c.sem
		s.mu.Lock()
		s.createEnded(parentZp)
		s.mu.Unlock()
		return created{}, topo.NewError(topo.Closed, p)
	}
	select {
	case r := <-results:
		return r.created, r.err
	case <-ctx.Done():
		// The create may have made its entry: wait for its answer, for
		// at most abandonGrace, and delete the entry before returning,
		// so that the next contender never waits on an entry nobody
		// owns. Past the grace (the server not answering), or once the
		// Conn closes, the entry is deleted when the answer comes.
		t := time.NewTimer(abandonGrace)
		defer t.Stop()
		select {
		case r := <-results:
			if r.err == nil {
				c.dropEntry(s, r.node, !lock)
			}
			return created{}, backendkit.FromContext(ctx, p)
		case <-t.C:
		case <-c.closing:
		}
		close(abandoned)
		select {
		case r := <-results:
			if r.err == nil {
				c.dropEntry(s, r.node, !lock)
			}
		default:
		}
		return created{}, backendkit.FromContext(ctx, p)
	}
}

// abandonGrace bounds how long a create whose caller's context ended
// waits for its answer, to delete the entry it made before it returns
// (createEntryWith).
const abandonGrace = 5 * time.Second

// createEnded records that a create under parentZp ended (s.mu held).
func (s *zkSession) createEnded(parentZp string) {
	if s.pending[parentZp]--; s.pending[parentZp] == 0 {
		delete(s.pending, parentZp)
	}
}

// dropEntry forgets and deletes an abandoned entry of session s (a
// candidate with its value znode) with a fresh context; a lock's as
// Unlock deletes it (releaseLock). Nothing is sent for a lock
// entry once s is over.
func (c *Conn) dropEntry(s *zkSession, node string, election bool) {
	ctx, cancel := freshContext()
	defer cancel()
	if election {
		if rec := s.entry(node); rec != nil && c.deleteCandidate(ctx, s, node, rec.value) == nil {
			s.forget(node, 0)
		}
		return
	}
	s.forget(node, 0)
	if !c.closed.Load() && !s.isLost() {
		_ = c.releaseLock(ctx, s, c.relPath(zkDir(zkDir(node))), node)
	}
}

// reapOrphans deletes the entries under parentZp that are session s's but
// unknown to it (a create whose answer was lost).
func (c *Conn) reapOrphans(s *zkSession, parentZp string) {
	ctx, cancel := freshContext()
	defer cancel()
	p := c.relPath(parentZp)
	children, err := c.childrenOn(ctx, s, p, parentZp, false)
	if err != nil {
		return
	}
	unknown := func(node string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.entries[node] == nil && s.pending[parentZp] == 0
	}
	for _, ch := range children.names {
		node := parentZp + "/" + ch
		if !unknown(node) {
			continue
		}
		if r := c.statOn(ctx, s, p, node, false); r.err != nil || !r.exists || r.st.EphemeralOwner != s.zk.SessionID() || !unknown(node) {
			continue
		}
		c.log.Info("zk2topo: deleting a lock or election entry whose create lost its answer", "znode", node)
		_ = c.do(ctx, p, func() error { return s.zk.Delete(node, -1) })
	}
	c.reapOrphanValues(ctx, s, parentZp)
}

// reapOrphanValues deletes session s's value znodes under the election
// directory parentZp whose candidate is not a live entry of s.
func (c *Conn) reapOrphanValues(ctx context.Context, s *zkSession, parentZp string) {
	p := c.relPath(parentZp)
	vdir := parentZp + "/" + valuesDir
	vals, err := c.childrenOn(ctx, s, p, vdir, false)
	if err != nil {
		return
	}
	prefix := valuePrefix(s.zk.SessionID())
	live := map[int64]bool{} // the Czxids of the session's entries under parentZp
	s.mu.Lock()
	// No create there may start or be in flight until each delete: the
	// entries read are then all of s's live ones.
	started, inFlight := s.creates[parentZp], s.pending[parentZp]
	var nodes []string
	for n := range s.entries {
		if zkDir(n) == parentZp {
			nodes = append(nodes, n)
		}
	}
	s.mu.Unlock()
	if inFlight > 0 {
		return
	}
	for _, n := range nodes {
		r := c.statOn(ctx, s, p, n, false)
		if r.err != nil {
			return
		}
		if r.exists {
			live[r.st.Czxid] = true
		}
	}
	for _, v := range vals.names {
		if !strings.HasPrefix(v, prefix) {
			continue
		}
		vp := vdir + "/" + v
		r := c.statOn(ctx, s, p, vp, false)
		if r.err != nil {
			return
		}
		s.mu.Lock()
		busy := s.pending[parentZp] > 0 || s.creates[parentZp] != started
		s.mu.Unlock()
		if r.exists && !busy && !live[r.st.Czxid] && r.st.EphemeralOwner == s.zk.SessionID() {
			_ = c.do(ctx, p, func() error { return s.zk.Delete(vp, r.st.Version) })
		}
	}
}

// answerOn runs read with onSession on session s (nil: with c.read, on
// the current session) and returns its answer, passed through a channel
// (read may finish after ctx ended; a retry's answer replaces the last).
func answerOn[T any](ctx context.Context, c *Conn, s *zkSession, p string, read func(z *zk.Conn) (T, error)) (T, error) {
	last := make(chan T, 1)
	fn := func(z *zk.Conn) error {
		v, err := read(z)
		if err == nil {
			select {
			case <-last:
			default:
			}
			last <- v
		}
		return err
	}
	var err error
	if s == nil {
		err = c.read(ctx, p, fn)
	} else {
		err = c.onSession(ctx, s, p, fn)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return <-last, nil
}

// readChildren reads zp's children, unsorted, with watch a children watch.
func readChildren(z *zk.Conn, zp string, watch bool) (childrenRes, error) {
	var r childrenRes
	var err error
	if watch {
		r.names, r.st, r.ch, err = z.ChildrenW(zp)
	} else {
		r.names, r.st, err = z.Children(zp)
	}
	return r, err
}

// childrenOn is readChildren on session s (see answerOn).
func (c *Conn) childrenOn(ctx context.Context, s *zkSession, p, zp string, watch bool) (childrenRes, error) {
	return answerOn(ctx, c, s, p, func(z *zk.Conn) (childrenRes, error) { return readChildren(z, zp, watch) })
}

// getRes is the answer to a data read.
type getRes struct {
	data []byte
	st   *zk.Stat
	ch   <-chan zk.Event // its watch, when it set one
}

// getOn reads zp's data and Stat on session s (see answerOn), with watch
// a data watch.
func (c *Conn) getOn(ctx context.Context, s *zkSession, p, zp string, watch bool) (getRes, error) {
	return answerOn(ctx, c, s, p, func(z *zk.Conn) (r getRes, err error) {
		if watch {
			r.data, r.st, r.ch, err = z.GetW(zp)
		} else {
			r.data, r.st, err = z.Get(zp)
		}
		return r, err
	})
}

// onSession runs a read on session s only, retrying while it reconnects;
// errSessionOver once it is over.
func (c *Conn) onSession(ctx context.Context, s *zkSession, p string, fn func(z *zk.Conn) error) error {
	for {
		if s.isLost() {
			return errSessionOver
		}
		err := c.do(ctx, p, func() error { return fn(s.zk) })
		if err == nil || !retriable(err) || c.closed.Load() {
			return err
		}
		if s.isLost() {
			return errSessionOver
		}
		select {
		case <-s.lost:
			return errSessionOver
		case <-ctx.Done():
			return backendkit.FromContext(ctx, p)
		case <-c.closing:
			return topo.NewError(topo.Closed, p)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
