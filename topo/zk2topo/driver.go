package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// driver implements claims.Driver on ZooKeeper (see the package doc,
// Locks and elections): a queue is the children of a "locks" znode or of
// an election directory, in sequence order; an entry is an
// ephemeral-sequential child made on the Conn's current session, its
// token its creation zxid (Stat.Czxid).
//
// Why tokens are monotone (the argument every driver makes for its
// store): zxids are ZooKeeper's global transaction ids, every committed
// write getting one greater than all before it, across sessions, leader
// changes (the epoch in the high 32 bits grows) and server restarts. The
// engine grants an entry only once it heads its queue, so every entry
// created before it in the same parent is gone; a later holder's entry
// was created after the earlier holder's (a later transaction), or, when
// the parent was removed and created again in between (its sequence
// restarts), after the earlier entry was deleted, which came after its
// creation. Either way the later holder's Czxid is greater.
//
// Requests about an entry run on the entry's own session only (a znode
// of its name may belong to someone else after it); reads of the queue
// (Ahead, WaitGone, Head) on the current one (see the package doc).
type driver struct{ c *Conn }

var (
	_ claims.Driver  = driver{}
	_ claims.Aheader = driver{}
)

// parent is the znode path of q's entries: <dir>/locks for a lock (/locks
// for the root's), elections/<name> for an election.
func (d driver) parent(q claims.Queue) string {
	if q.Election {
		return d.c.zkPath(electionsDir + "/" + q.Path)
	}
	if dirZp := d.c.zkPath(q.Path); dirZp != "/" {
		return dirZp + "/" + locksDir
	}
	return "/" + locksDir
}

// Create implements claims.Driver: the entry (an election's with its
// value znode, in one multi), on the Conn's current session, creating the
// parents when needed; then, in one round trip, its Stat (the token, and
// the watch behind Done) and the queue's children (for TryLock, and kept
// for the engine's first Ahead). An entry whose create fails because its
// session ended is entered again on a new session (nothing of it outlives
// the ended one), three times at most.
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	c := d.c
	if !q.Election && c.internal(q.Path) {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidPath, q.Path, errors.New("zk2topo: ZooKeeper's own znodes cannot be locked"))
	}
	parent := d.parent(q)
	for attempt := 0; ; attempt++ {
		s, err := c.live(ctx, q.Path)
		if err != nil {
			return claims.Entry{}, nil, err
		}
		var cr created
		var pl pipelined
		if q.Election {
			c.removeStepped(s, parent)
			cr.node, err = c.enterElection(ctx, s, q.Path, parent, contents, opts.Value)
		} else {
			alone := s.soleEntry(parent, "")
			cr, pl, err = c.enqueue(ctx, s, q.Path, parent, contents, opts.RequireFiles, opts.Exclusive || alone, alone)
		}
		if err != nil {
			if code := topo.CodeOf(err); s.isLost() && code != topo.Timeout && code != topo.Interrupted && attempt < 3 {
				continue
			}
			return claims.Entry{}, nil, err
		}
		e, err := d.admit(ctx, s, q, parent, cr, contents, opts.Exclusive, pl)
		return e, s.claims, err
	}
}

// admit takes the token of the new entry cr.node from its create's
// Stat and its watch behind Done from the children read pipelined behind
// its create (pl, see pipeline.go) when they are there, and otherwise
// reads the entry's Stat with a watch, on the entry's session; it reads
// the queue's children unless pl answered them, and records the token.
// With exclusive, when another entry is ahead, it deletes the entry and
// returns a *claims.BusyError naming the head (read while the entry is
// deleted), or a plain NodeExists when the head could not be read.
func (d driver) admit(ctx context.Context, s *zkSession, q claims.Queue, parent string, cr created, contents string, exclusive bool, pl pipelined) (claims.Entry, error) {
	c, node := d.c, cr.node
	defer pl.drain()
	name := node[len(parent)+1:]
	k, listed := pl.children(name)
	stat := make(chan statRes, 1)
	if listed && k.ch != nil && cr.st != nil {
		stat <- statRes{exists: true, st: cr.st, ch: k.ch}
	} else {
		go func() { stat <- c.statOn(ctx, s, q.Path, node, true) }() // beside the children read
	}
	kids := make(chan childrenRes, 1)
	if listed {
		kids <- k
	} else if !exclusive && !s.soleEntry(parent, node) {
		// Ahead could not use it (see soleEntry): not read.
		kids <- childrenRes{err: errNotRead}
	} else {
		go func() {
			r, err := c.childrenOn(ctx, s, q.Path, parent, false)
			kids <- childrenRes{names: entryNames(r.names), err: err}
		}()
	}
	r, k := <-stat, <-kids
	switch {
	case r.err == errSessionOver || s.isLost():
		return claims.Entry{}, claims.ErrNotHeld
	case r.err != nil:
		c.dropEntry(s, node, q.Election)
		return claims.Entry{}, r.err
	case !r.owned(s):
		s.forget(node, 0)
		c.cleanupGone(ctx, s, q.Election, node)
		return claims.Entry{}, claims.ErrNotHeld
	}
	e := claims.Entry{Token: r.st.Czxid, Key: node, Session: sessionName(s.zk.SessionID()), Contents: contents}
	s.setToken(node, e.Token)
	if exclusive {
		if k.err != nil {
			c.dropEntry(s, node, q.Election)
			return claims.Entry{}, k.err
		}
		if len(k.names) > 0 && k.names[0] != name {
			holder := c.readHolder(ctx, s, q.Path, parent+"/"+k.names[0])
			c.dropEntry(s, node, q.Election)
			return claims.Entry{}, <-holder
		}
	}
	c.watchEntry(s, q.Path, node, e.Token, r.ch)
	if k.err == nil && slices.Contains(k.names, name) {
		c.stash.Store(parent, listing{sess: s, node: node, names: k.names})
	}
	return e, nil
}

// listing is the children of a queue read right after the Conn created
// an entry in it, kept for the engine's first Ahead of that entry (see
// driver.Ahead).
type listing struct {
	sess  *zkSession
	node  string
	names []string
}

// List implements claims.Driver: Describe's answer (each entry with its
// token, session and contents). The engine reads the queue through Ahead
// and Describe on ZooKeeper, never through List.
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	return d.Describe(ctx, q)
}

// Ahead implements claims.Aheader: the entries just ahead of e (at most
// max, oldest first) from one children read of its queue (or the read
// Create made, when it surely shows e: see stashValid), found in one pass
// over the names without sorting them, and whether e is in it; none, without a read, when WaitGone's lookahead showed that e
// heads the queue (see WaitGone). A candidate that heads its election is
// marked as possibly leading (entry.head), so that a dropped connection
// ends its term (stepDown); one with exactly one entry ahead is marked
// so by WaitGone once that entry went, since the engine then grants it
// without another read.
func (d driver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, max int) ([]claims.Entry, bool, error) {
	c := d.c
	parent := d.parent(q)
	if _, ok := c.headed.LoadAndDelete(e.Key); ok {
		if q.Election {
			c.markHead(e.Key)
		}
		return nil, true, nil
	}
	var names []string
	if v, ok := c.stash.LoadAndDelete(parent); ok && c.stashValid(v.(listing), parent) {
		names = v.(listing).names
	} else {
		r, err := c.childrenOn(ctx, nil, q.Path, parent, false)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, false, err
		}
		names = r.names
	}
	own, ok := strings.CutPrefix(e.Key, parent+"/")
	if !ok {
		return nil, false, nil
	}
	in := false
	ahead := make([]string, 0, max+1) // ascending
	for _, n := range names {
		switch {
		case n == own:
			in = true
		case n < own && (len(ahead) < max || max > 0 && n > ahead[0]) && isEntryName(n):
			i, _ := slices.BinarySearch(ahead, n)
			ahead = slices.Insert(ahead, i, n)
			if len(ahead) > max {
				ahead = ahead[1:]
			}
		}
	}
	switch n := len(ahead); {
	case !in:
	case n == 0 && q.Election:
		c.markHead(e.Key)
	case n == 1 && q.Election:
		c.nextUp.Store(parent+"/"+ahead[0], waiter{node: e.Key})
	case n >= 2 && !q.Election:
		c.nextUp.Store(parent+"/"+ahead[n-1], waiter{node: e.Key, before: parent + "/" + ahead[n-2]})
	}
	out := make([]claims.Entry, len(ahead))
	for i, n := range ahead {
		out[i] = claims.Entry{Key: parent + "/" + n}
	}
	return out, in, nil
}

// stashValid reports whether l is still valid for the queue under
// parent: l's session is the Conn's current one and l's entry is its
// only entry there, with no create in flight there (soleEntry). Then
// every caller of Ahead with a live entry in the queue is l's entry's
// claim (the only live entries of the Conn's earlier sessions are the
// resumed ones, which it then does not have), and l shows it.
func (c *Conn) stashValid(l listing, parent string) bool {
	c.mu.Lock()
	cur, resumed := c.cur, len(c.resumed)
	c.mu.Unlock()
	return l.sess == cur && resumed == 0 && l.sess.soleEntry(parent, l.node)
}

// soleEntry reports whether node is the session's only entry under
// parent (node "": whether it has none there), with no create in flight
// there.
func (s *zkSession) soleEntry(parent, node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[parent] > 0 || (node != "" && s.entries[node] == nil) {
		return false
	}
	for n := range s.entries {
		if n != node && zkDir(n) == parent {
			return false
		}
	}
	return true
}

// errNotRead stands for the children read Create skips.
var errNotRead = errors.New("zk2topo: not read")

// waiter is what Ahead leaves, by the key of the entry just ahead of
// node, for the WaitGone on that entry: node, and before, the entry
// ahead of that one ("" when none: node is next in line, a candidate).
type waiter struct{ node, before string }

// WaitGone implements claims.Driver: an exists watch on e, on the
// current session; only e's deletion ends the wait (a watch that ended
// with its session, which may not be the waiter's: a resumed candidacy,
// is set again on the next). Once e is gone, the candidate that Ahead
// found next after it is marked as possibly leading.
//
// The lookahead, in a lock's queue: when Ahead found another entry
// (before) ahead of e, an exists watch is also set on that one, and once
// it goes the queue is read while e is still awaited. When that read shows nothing ahead of
// the waiter but e, the waiter heads the queue once e is gone (no entry
// comes ahead of it later: sequence numbers only grow while their
// parent lives, which it does while the waiter's entry is in it), and
// the engine's next Ahead says so without a read (Conn.headed). In a
// queue of waiters the read so comes one handover early, off the path
// from a release to the next grant: a release wakes the next waiter,
// granted at once, and the one after it, which reads the queue. (Not in
// an election's: there the read, one more request, delayed the next
// Stop's multi behind it on the server and handovers came slower:
// BenchmarkContention in bench/vitess.)
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	c := d.c
	v, _ := c.nextUp.LoadAndDelete(e.Key)
	w, _ := v.(waiter)
	var kids chan childrenRes // the lookahead's read, once sent
	var read *childrenRes     // its answer
	look := func() {
		out := make(chan childrenRes, 1)
		kids = out
		go func() {
			r, err := c.childrenOn(ctx, nil, q.Path, zkDir(e.Key), false)
			out <- childrenRes{names: r.names, err: err}
		}()
	}
	var before <-chan zk.Event
	if w.before != "" {
		if r := c.statOn(ctx, nil, q.Path, w.before, true); r.err == nil && !r.exists {
			look()
		} else if r.err == nil {
			before = r.ch
		}
	}
	for gone := false; !gone; {
		r := c.statOn(ctx, nil, q.Path, e.Key, true)
		if r.err != nil {
			return r.err
		}
		ch := r.ch
		for gone = !r.exists; !gone && ch != nil; {
			select {
			case ev := <-ch:
				gone, ch = ev.Type == zk.EventNodeDeleted, nil
			case <-before:
				before = nil
				look()
			case k := <-kids:
				read, kids = &k, nil
			case <-ctx.Done():
				return ctx.Err()
			case <-c.closing:
				return topo.NewError(topo.Closed, q.Path)
			}
		}
	}
	if kids != nil {
		select {
		case k := <-kids:
			read = &k
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closing:
			return topo.NewError(topo.Closed, q.Path)
		}
	}
	if read != nil && read.err == nil && onlyAhead(read.names, w.node, e.Key) {
		c.headed.Store(w.node, struct{}{})
	}
	if w.node != "" && w.before == "" {
		c.markHead(w.node)
	}
	return nil
}

// onlyAhead reports whether the children names (of the parent of node
// and pred) show node, with no entry ahead of it but pred.
func onlyAhead(names []string, node, pred string) bool {
	dir := zkDir(node)
	own, p := node[len(dir)+1:], pred[len(dir)+1:]
	in := false
	for _, n := range names {
		switch {
		case n == own:
			in = true
		case n < own && n != p && isEntryName(n):
			return false
		}
	}
	return in
}

// Delete implements claims.Driver: on e's session only, while that
// session lives and still knows e with its token (the watch behind Done
// forgets an entry deleted behind its back, so a znode of the same name
// made later by anyone is never deleted), and not after Close. A lock's
// directory is then removed when nothing else is left in it (see
// releaseLock); a candidate goes with its value znode, in one multi. On a
// session adopted by Resume (the resumed candidacy's: Stop, Resign), the
// session is then closed (endResumed), with whatever else the earlier
// process had on it.
func (d driver) Delete(ctx context.Context, q claims.Queue, cs *claims.Session, e claims.Entry) error {
	c := d.c
	c.headed.Delete(e.Key)
	s := cs.Ref().(*zkSession)
	if s.obs.resumeID != 0 { // set once, at newSessionAs: a session Resume adopted
		defer c.endResumed(s)
	}
	rec := s.entry(e.Key)
	if c.closed.Load() || s.isLost() || rec == nil || rec.token != e.Token {
		// Nothing is sent: Close ends the session, and the server deletes
		// its entries with it.
		if rec == nil {
			c.cleanupGone(ctx, s, q.Election, e.Key)
		}
		return claims.ErrNotHeld
	}
	var err error
	if q.Election {
		err = c.deleteCandidate(ctx, s, e.Key, rec.value)
	} else {
		defer s.releasing(e.Key)() // after forget: see watchEntry
		err = c.releaseLock(ctx, s, q.Path, e.Key)
	}
	switch {
	case err == nil:
		s.forget(e.Key, e.Token)
		return nil
	case s.isLost():
		return claims.ErrNotHeld
	case errors.Is(err, zk.ErrNoNode):
		s.forget(e.Key, e.Token)
		c.cleanupGone(ctx, s, q.Election, e.Key)
		return claims.ErrNotHeld
	}
	return err
}

// cleanupGone removes the directory of node, a lock entry of session s
// deleted behind its claim's back, when nothing else is left in it (see
// cleanupDirs), as its release would have: an Unlock of the session that
// saw node still queued read nothing after its delete (see releaseLock),
// counting on node's end to. It runs where the session forgets such an
// entry: when the watch behind Done sees it go (lostEntry, whether or
// not its claim ever calls Delete), when admit finds it gone, and in a
// Delete that finds it gone (again, harmlessly, when the watch saw it
// first: a read of a directory already removed). Nothing is sent for an
// election (election is true), or once the session is over or the Conn
// closed.
func (c *Conn) cleanupGone(ctx context.Context, s *zkSession, election bool, node string) {
	if election || c.closed.Load() || s.isLost() {
		return
	}
	c.cleanupDirs(ctx, []string{zkDir(zkDir(node))})
}

// errNotConnected is the cause of Check's Unavailable while the claim's
// session is not provably alive.
var errNotConnected = errors.New("zk2topo: the session of the lock or term is not connected")

// Held implements claims.Driver (Check): false once e's session ended;
// Unavailable while it is not provably alive (connected, and within the
// safe window: session timeout minus Options.SafetyMargin); otherwise a
// consistent read on that session (a sync, then an exists, pipelined)
// says whether e is there, owned by the session, with its token. A held
// entry heads its queue until it goes, so that is enough.
func (d driver) Held(ctx context.Context, q claims.Queue, cs *claims.Session, e claims.Entry) (bool, error) {
	c := d.c
	s := cs.Ref().(*zkSession)
	if s.isLost() {
		return false, nil
	}
	if !s.provablyAlive() {
		return false, backendkit.Wrap(topo.Unavailable, q.Path, errNotConnected)
	}
	var exists bool
	var st *zk.Stat
	err := c.do(ctx, q.Path, func() error {
		return s.syncThen(func() error {
			var err error
			exists, st, err = s.zk.Exists(e.Key)
			return err
		})
	})
	switch {
	case s.isLost():
		return false, nil
	case err != nil:
		return false, err
	case !exists || st.EphemeralOwner != s.zk.SessionID() || st.Czxid != e.Token:
		return false, nil
	case !s.provablyAlive():
		return false, backendkit.Wrap(topo.Unavailable, q.Path, errNotConnected)
	}
	return true, nil
}

// MapError implements claims.Driver: ErrNotHeld (an entry gone with its
// session before it was admitted) is LockLost; the rest as convert does,
// with ctx's end as Timeout or Interrupted.
func (d driver) MapError(ctx context.Context, err error, path string) error {
	if errors.Is(err, claims.ErrNotHeld) {
		return backendkit.Wrap(topo.LockLost, path, err)
	}
	return backendkit.MapError(ctx, err, path, false, d.c.classify)
}

// sessionName is a session id as topo.LockHeldError reports it: "0x" and
// hex digits, ZooKeeper's own form.
func sessionName(id int64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("0x%x", id)
}

// readHolder reads the lock entry zp (the holder, the lowest entry) on
// session s, and yields TryLock's error: a *claims.BusyError naming the
// holder by its entry's data (the contents it locked with) and its
// session, or a plain NodeExists when the entry could not be read within
// a second (the holder left meanwhile, the session or ctx ended).
func (c *Conn) readHolder(ctx context.Context, s *zkSession, dp, zp string) <-chan error {
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, abandonWait)
		defer cancel()
		r, err := c.getOn(ctx, s, dp, zp, false)
		if err != nil {
			out <- topo.NewError(topo.NodeExists, dp)
			return
		}
		out <- &claims.BusyError{Head: claims.Entry{Key: zp, Token: r.st.Czxid, Contents: string(r.data), Session: sessionName(r.st.EphemeralOwner)}}
	}()
	return out
}
