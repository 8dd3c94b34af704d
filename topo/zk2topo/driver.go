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

// driver implements claims.Driver on ZooKeeper (see the package doc): a
// queue is the children of a "locks" znode or an election directory in
// sequence order; an entry is an ephemeral-sequential child, its token
// its Czxid.
//
// Tokens are monotone: every committed write gets a zxid greater than all
// before it (across sessions, leader changes and restarts), and the engine
// grants an entry only once it heads its queue, so a later holder's entry
// was created after the earlier holder's, or (its parent re-created, the
// sequence restarted) after that entry's deletion.
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
	return strings.TrimSuffix(d.c.zkPath(q.Path), "/") + "/" + locksDir
}

// Create implements claims.Driver: the entry (a candidate with its value
// znode, in one multi) on the current session, creating parents when
// needed; then, in one round trip, its Stat and the queue's children
// (admit). A create failed by its session's end is retried on a new
// session (nothing of it outlives the ended one), three times at most.
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

// admit takes the new entry's token and watch behind Done from its create
// and the pipelined children read (pipeline.go) when there, else reads its
// Stat with a watch on its session; it reads the queue's children unless
// pl did. With exclusive, when another entry is ahead, it deletes the
// entry and returns readHolder's error.
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

// listing is a queue's children read right after the Conn created node
// in it, kept for the engine's first Ahead.
type listing struct {
	sess  *zkSession
	node  string
	names []string
}

// List implements claims.Driver as Describe (the engine never calls it
// here: it uses Ahead and Describe).
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	return d.Describe(ctx, q)
}

// Ahead implements claims.Aheader: the entries just ahead of e (at most
// max, oldest first) and whether e is in the queue, from one children read
// (or Create's, when stashValid), in one pass without sorting; none,
// without a read, when WaitGone's lookahead showed e heading the queue. A
// candidate heading its election is marked as possibly leading (markHead,
// for stepDown); one next in line, by WaitGone once the entry ahead went.
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

// stashValid reports whether l is valid for the queue under parent: l's
// session is the current one, the Conn resumed none, and l's entry is the
// session's sole entry there, so Ahead's caller is that entry's claim.
func (c *Conn) stashValid(l listing, parent string) bool {
	c.mu.Lock()
	cur, resumed := c.cur, len(c.resumed)
	c.mu.Unlock()
	return l.sess == cur && resumed == 0 && l.sess.soleEntry(parent, l.node)
}

// soleEntry reports whether node is the session's only entry under
// parent (node "": none), with no create in flight there.
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
// node, for WaitGone: node, and before, the entry ahead of that one (""
// for a candidate next in line).
type waiter struct{ node, before string }

// WaitGone implements claims.Driver: an exists watch on e on the current
// session, set again on the next session when it ends; only e's deletion
// ends the wait. Then the candidate Ahead found next is marked as
// possibly leading.
//
// The lookahead, in a lock's queue only (in an election the extra read
// delayed Stop's multi: BenchmarkContention in bench/vitess): with an
// entry (before) ahead of e, a watch on it too, and once it goes the
// queue is read while e is awaited. When that shows nothing ahead of the
// waiter but e, the waiter heads the queue once e goes (sequences only
// grow while the parent lives, as it does while the waiter's entry is in
// it), and the next Ahead says so without a read (Conn.headed): the read
// comes one handover early, off the release-to-grant path.
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

// Delete implements claims.Driver: on e's session only, while it lives
// and still knows e with its token (a later znode of the same name is
// never deleted), and not after Close (the server deletes the session's
// entries with it). A lock's emptied directory goes too (releaseLock); a
// candidate goes with its value znode in one multi. A session Resume
// adopted is then closed (endResumed).
func (d driver) Delete(ctx context.Context, q claims.Queue, cs *claims.Session, e claims.Entry) error {
	c := d.c
	c.headed.Delete(e.Key)
	s := cs.Ref().(*zkSession)
	if s.obs.resumeID != 0 { // set once, at newSessionAs: a session Resume adopted
		defer c.endResumed(s)
	}
	rec := s.entry(e.Key)
	if c.closed.Load() || s.isLost() || rec == nil || rec.token != e.Token {
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
// deleted behind its claim's back, when nothing else is left in it, as
// its release would have (an Unlock of s that saw node still queued read
// nothing: releaseLock). Wherever s forgets such an entry (lostEntry,
// admit, Delete); nothing is sent for an election, once s is over or
// after Close.
func (c *Conn) cleanupGone(ctx context.Context, s *zkSession, election bool, node string) {
	if election || c.closed.Load() || s.isLost() {
		return
	}
	c.cleanupDirs(ctx, cleanupAttempts, zkDir(zkDir(node)))
}

// errNotConnected is the cause of Check's Unavailable while the claim's
// session is not provably alive.
var errNotConnected = errors.New("zk2topo: the session of the lock or term is not connected")

// Held implements claims.Driver (Check): false once e's session ended;
// Unavailable while it is not provablyAlive; otherwise a sync and an
// exists, pipelined on that session, say whether e is there, the
// session's, with its token (a held entry heads its queue until it goes).
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

// MapError implements claims.Driver: ErrNotHeld is LockLost; the rest as
// convert, ctx's end as Timeout or Interrupted.
func (d driver) MapError(ctx context.Context, err error, path string) error {
	if errors.Is(err, claims.ErrNotHeld) {
		return backendkit.Wrap(topo.LockLost, path, err)
	}
	return backendkit.MapError(ctx, err, path, false, d.c.classify)
}

// sessionName is a session id as "0x" and hex digits, ZooKeeper's form.
func sessionName(id int64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("0x%x", id)
}

// readHolder reads the holder's entry zp on session s and yields TryLock's
// error: a *claims.BusyError naming the holder (contents and session), or
// a plain NodeExists when it could not be read within abandonWait.
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
