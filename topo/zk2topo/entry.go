package zk2topo

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// entry is what a session knows of one of its lock or election entries
// (zkSession.entries, by znode path): recorded when its create returns,
// its token once its Stat was read, forgotten when it is deleted (by its
// claim, or behind its back: see watchEntry) and with the session.
type entry struct {
	// token is the entry's Czxid, 0 until read.
	token int64
	// value is an election entry's value znode, "" for none (see
	// leader.go).
	value string
	// election marks a candidate; head, a candidate that an Ahead showed
	// heading its election or next in line (so possibly leading: see
	// stepDown); stepped, a leading candidate given up when its
	// connection dropped, removed once the session is connected again.
	election, head, stepped bool
	// releasing, while its claim's delete is in flight, closes once that
	// delete was answered (see watchEntry); deleteSent, once that delete
	// was sent (see releaseLock).
	releasing  chan struct{}
	deleteSent bool
}

// releasing marks node as being deleted by its claim until the function
// it returns is called: a watch woken by that delete then waits for its
// outcome instead of reading the entry (see known).
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

// deleteSent records that the delete of node, an entry of session s
// under parent, was sent, and reports whether s has another entry there
// whose delete was not (see releaseLock).
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

// known reports whether session s still knows node with token, once no
// delete of it by its claim is in flight.
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

// entry returns the session's record of node, nil when it has none.
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

// forgetGone drops node, seen deleted or no longer owned by s, from the
// session's entries when it is recorded with token, and reports whether
// the session is to clean up after it (cleanupGone): a lock entry whose
// claim was not deleting it (entry.releasing), so deleted behind its
// back. A release of the session that saw it still known read nothing
// after its delete, counting on this one's end to (see releaseLock); its
// claim may never call Delete (a waiter the engine finds lost as its
// wait ends, a lost lock never unlocked), so the clean-up comes when the
// session learns of the deletion. A deletion by the claim's own release
// cleans up in that release.
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

// forget drops node from the session's entries, unless it was recorded
// with another token than token (0: whatever its token).
func (s *zkSession) forget(node string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[node]; e != nil && (token == 0 || e.token == token) {
		delete(s.entries, node)
	}
}

// markHead marks the candidate entry node of one of c's sessions as
// possibly leading its election (see entry.head).
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

// watchEntry follows the entry node (token token) of session s through
// the watch ch (an exists watch on it, or a children watch on its queue
// set after its create: see pipeline.go), re-armed as an exists watch
// after other events: once it is deleted (by its own claim, or behind
// the holder's back) or no longer owned by s, s forgets it and its
// claim, if live, ends as lost (claims.Session.LoseEntry); a lock entry
// deleted behind its back then has its directory cleaned up (see
// forgetGone). The session's end is not this watch's business: lose
// declares every claim on it lost, and only lose.
func (c *Conn) watchEntry(s *zkSession, p, node string, token int64, ch <-chan zk.Event) {
	c.goBG(func() { // not started once Close waits: the session ends with it
		for {
			select {
			case ev := <-ch:
				switch ev.Type {
				case zk.EventNotWatching:
					// The client ended its watches: its session is over,
					// and lose has ended the claims on it.
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
				// Released by its claim (or forgotten): the event was
				// its own delete's, on a children watch.
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

// lostEntry is watchEntry's end for the entry node (token token) of
// session s seen deleted or no longer owned by s: s forgets it, its
// claim ends as lost, and then, for a lock entry deleted behind its back,
// the lock's directory is removed when nothing else is left in it
// (forgetGone, cleanupGone).
func (c *Conn) lostEntry(s *zkSession, node string, token int64) {
	cleanup := s.forgetGone(node, token)
	s.claims.LoseEntry(node, token)
	if cleanup {
		ctx, cancel := freshContext()
		defer cancel()
		c.cleanupGone(ctx, s, false, node)
	}
}
