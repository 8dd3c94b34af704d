package zk2topo

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// entry is what a session knows of one of its entries (zkSession.entries,
// by znode): recorded when its create returns, forgotten when it is
// deleted (see watchEntry) and with the session.
type entry struct {
	token int64  // Czxid, 0 until read
	value string // a candidate's value znode, "" for none
	// election marks a candidate; head, one possibly leading (markHead);
	// stepped, one stepDown gave up, removed before the Conn re-enters.
	election, head, stepped bool
	releasing               chan struct{} // while its claim's delete is in flight (see known)
	deleteSent              bool          // see releaseLock
}

// releasing marks node as being deleted by its claim until the returned
// function is called (see known).
func (s *zkSession) releasing(node string) func() {
	ch := make(chan struct{})
	s.mu.Lock()
	if e := s.entries[node]; e != nil {
		e.releasing = ch
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if e := s.entries[node]; e != nil && e.releasing == ch {
			e.releasing = nil
		}
		s.mu.Unlock()
		close(ch)
	}
}

// deleteSent records that node's delete was sent, and reports whether s
// has another entry under parent whose delete was not (see releaseLock).
func (s *zkSession) deleteSent(parent, node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[node]; e != nil {
		e.deleteSent = true
	}
	for n, e := range s.entries {
		if n != node && !e.deleteSent && zkDir(n) == parent {
			return true
		}
	}
	return false
}

// known reports whether s still knows node with token, once no delete of
// it by its claim is in flight.
func (c *Conn) known(s *zkSession, node string, token int64) bool {
	for {
		rec := s.entry(node)
		if rec == nil || rec.token != token {
			return false
		}
		if rec.releasing == nil {
			return true
		}
		select {
		case <-rec.releasing:
		case <-s.lost:
			return false
		case <-c.closing:
			return false
		}
	}
}

// entry returns a copy of the session's record of node, or nil.
func (s *zkSession) entry(node string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[node]; e != nil {
		cp := *e
		return &cp
	}
	return nil
}

// setToken records node's token.
func (s *zkSession) setToken(node string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[node]; e != nil {
		e.token = token
	}
}

// forgetGone drops node (seen deleted or not s's) when recorded with
// token, and reports whether s is to clean up after it (cleanupGone): a
// lock entry deleted behind its claim's back (whose claim may never call
// Delete), not one its claim is releasing.
func (s *zkSession) forgetGone(node string, token int64) (cleanup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[node]
	if e == nil || e.token != token {
		return false
	}
	delete(s.entries, node)
	return !e.election && e.releasing == nil
}

// forget drops node unless recorded with another token (0: any).
func (s *zkSession) forget(node string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[node]; e != nil && (token == 0 || e.token == token) {
		delete(s.entries, node)
	}
}

// markHead marks the candidate node, of any of c's sessions, as
// possibly leading (see stepDown).
func (c *Conn) markHead(node string) {
	c.mu.Lock()
	ss := append([]*zkSession{c.cur}, c.resumed...)
	c.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		if e := s.entries[node]; e != nil && e.election {
			e.head = true
		}
		s.mu.Unlock()
	}
}

// owned reports whether the exists answer shows the entry owned by s.
func (r statRes) owned(s *zkSession) bool {
	return r.err == nil && r.exists && r.st.EphemeralOwner == s.zk.SessionID() && r.st.Czxid > 0
}

// watchEntry follows s's entry node through the watch ch (an exists
// watch, or the children watch of pipeline.go), re-armed as an exists
// watch after other events, until it is deleted or not s's: then
// lostEntry. The session's end is lose's business.
func (c *Conn) watchEntry(s *zkSession, p, node string, token int64, ch <-chan zk.Event) {
	c.goBG(func() { // not started once Close waits: the session ends with it
		for {
			select {
			case ev := <-ch:
				switch ev.Type {
				case zk.EventNotWatching: // the session is over
					return
				case zk.EventNodeDeleted:
					c.lostEntry(s, node, token)
					return
				}
			case <-s.lost:
				return
			case <-c.closing:
				return
			}
			if !c.known(s, node, token) {
				return
			}
			r := c.statOn(context.Background(), s, p, node, true)
			if r.err == errSessionOver {
				return
			}
			if !r.owned(s) || r.st.Czxid != token {
				c.lostEntry(s, node, token)
				return
			}
			ch = r.ch
		}
	})
}

// lostEntry ends s's entry node, seen deleted or not s's: s forgets it,
// its claim ends as lost, a lock's emptied directory goes (forgetGone).
func (c *Conn) lostEntry(s *zkSession, node string, token int64) {
	cleanup := s.forgetGone(node, token)
	s.claims.LoseEntry(node, token)
	if cleanup {
		ctx, cancel := freshContext()
		defer cancel()
		c.cleanupGone(ctx, s, false, node)
	}
}
