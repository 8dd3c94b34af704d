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

// Entry creation. An entry left behind by a create whose outcome the
// caller never saw would block other lockers (or stand as a leader nobody
// is) until its session ends. createEntryWith prevents that in the ways a
// create's outcome can be lost:
//
//   - the caller's context ends while the create is in flight: the create
//     finishes in the background and its entry, if made, is deleted (on the
//     same session);
//   - the connection drops after the request was sent (ErrConnectionClosed):
//     the entry may or may not exist; entries under the parent owned by the
//     session and unknown to it are deleted once reconnected (unless another
//     create of the session under the same parent is in flight, which would
//     make them indistinguishable);
//   - the session ends: its entries end with it, on the server, and no
//     request issued on it is ever sent on another session (see zkSession).

// seqLen is the length of the sequence suffix ZooKeeper gives a sequential
// znode ("%010d").
const seqLen = 10

// isEntryName reports whether a child name is a sequential entry's (ten
// digits), as opposed to a nested election's or lock's directory.
func isEntryName(n string) bool {
	return len(n) == seqLen && strings.Trim(n, "0123456789") == ""
}

// entryNames returns the entry names among children, sorted.
func entryNames(children []string) []string {
	out := slices.DeleteFunc(slices.Clone(children), func(n string) bool { return !isEntryName(n) })
	slices.Sort(out)
	return out
}

// created is what an entry's create made: the entry's path, an election
// candidate's value znode, and the entry's Stat when its answer carried
// one (see createWithStat).
type created struct {
	node, extra string
	st          *zk.Stat
}

// createEntryWith runs create (which makes one entry under parentZp on
// session s and, optionally, a second ephemeral znode of the session in
// the same multi: extra, an election candidate's value znode, deleted
// with the entry when the create is abandoned) honouring ctx, and records
// the entry. lock says that the entry is a lock's (parentZp is a "locks"
// znode): an abandoned one is deleted as Unlock deletes it, removing the
// directories it leaves empty (see deleteLockEntry).
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
		s.pending[parentZp]--
		if s.pending[parentZp] == 0 {
			delete(s.pending, parentZp)
		}
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
		s.pending[parentZp]--
		if s.pending[parentZp] == 0 {
			delete(s.pending, parentZp)
		}
		s.mu.Unlock()
		return created{}, topo.NewError(topo.Closed, p)
	}
	select {
	case r := <-results:
		return r.created, r.err
	case <-ctx.Done():
		close(abandoned)
		// The result may have been ready already.
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

// dropEntry deletes an abandoned entry node of session s (a candidate's
// with its value znode) with a fresh context.
func (c *Conn) dropEntry(s *zkSession, node string, election bool) {
	if !election {
		c.deleteLockEntry(s, node)
		return
	}
	rec := s.entry(node)
	if rec == nil {
		return
	}
	ctx, cancel := freshContext()
	defer cancel()
	if c.deleteCandidate(ctx, s, node, rec.value) == nil {
		s.forget(node, 0)
	}
}

// deleteLockEntry deletes the entry of a lock that was never taken
// (abandoned) of session s, with a fresh context, and forgets it; then
// comes the clean-up Unlock does: the lock's directory, and then its
// parents, are removed while they hold nothing but an empty "locks" znode
// (see cleanupDirs). Without it, a directory whose last file was deleted
// while the abandoned entry was still there (a named lock's, or a
// semaphore contender's) stayed behind, empty. Nothing is sent once the
// session is over (the server deleted the entry with it).
func (c *Conn) deleteLockEntry(s *zkSession, node string) {
	s.forget(node, 0)
	if c.closed.Load() || s.isLost() {
		return
	}
	ctx, cancel := freshContext()
	defer cancel()
	_ = c.do(ctx, c.relPath(node), func() error { return s.zk.Delete(node, -1) })
	if !c.closed.Load() && !s.isLost() {
		c.cleanupDirs(ctx, []string{zkDir(zkDir(node))})
	}
}

// reapOrphans deletes the entries under parentZp that belong to session s
// but that it does not know (made by a create whose answer was lost).
func (c *Conn) reapOrphans(s *zkSession, parentZp string) {
	ctx, cancel := freshContext()
	defer cancel()
	p := c.relPath(parentZp)
	children, err := c.childrenOn(ctx, s, p, parentZp, false)
	if err != nil {
		return
	}
	// unknown: s does not know node, and no create of s there is in flight.
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

// reapOrphanValues deletes the value znodes of session s under the
// election directory parentZp whose candidate is not a live entry of s
// (a candidate create whose answer was lost made both; see leader.go).
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
	// No create under parentZp may start or be in flight from here to each
	// delete: the entries read are then all the session's live ones.
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

// answerOn runs read with onSession on session s (s nil: with c.read, on
// the Conn's current session) and returns its answer: read may finish
// after onSession gave up (ctx ended), so the answer passes through a
// channel, never through shared variables. A read that succeeded is
// retried when the barrier or sync before it failed afterwards (see
// firstThen): the later answer replaces the earlier one.
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

// readChildren reads zp's children with z, in the server's order (with
// watch, setting a children watch).
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

// childrenOn reads zp's children on session s (s nil: on the Conn's
// current session), in the server's order (see answerOn).
func (c *Conn) childrenOn(ctx context.Context, s *zkSession, p, zp string, watch bool) (childrenRes, error) {
	return answerOn(ctx, c, s, p, func(z *zk.Conn) (childrenRes, error) { return readChildren(z, zp, watch) })
}

// getRes is the answer to a data read.
type getRes struct {
	data []byte
	st   *zk.Stat
	ch   <-chan zk.Event // its watch, when it set one
}

// getOn reads zp's data and Stat on session s (s nil: on the Conn's
// current session; see answerOn), with watch setting a data watch.
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

// onSession runs a read on session s (never on another one), retrying
// while its connection is re-established; it returns errSessionOver once
// the session is over.
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
