package memorytopo

import (
	"time"

	"github.com/topokit/topokit/topo/claims"
)

// lease is the simulated session (or per-lock lease) that keeps entries
// alive. It is renewed continuously while its Conn is open and renewal is
// neither paused on the Conn nor blocked by a fault; once renewal stops, it
// lapses ttl later. Its fields are guarded by the store's mu.
//
// Which session holds what: a Conn's session (Conn.session) holds its
// Lock and TryLock entries and its candidates; LockWithTTL and LockName
// entries each have a lease of their own, which ends with the entry. A
// lease belongs to one Conn at a time (c); ResumeLeaderParticipation moves
// it to another (adoptLease). The claims engine sees a lease as view.
type lease struct {
	c   *Conn
	ttl time.Duration
	// view is the engine's Session of this lease: revokeLease declares it
	// lost before it removes the entries, so every claim on the lease
	// ends before anyone else can be granted.
	view *claims.Session
	// entries lists the lease's live entries (entry.lprev, lnext);
	// nentries counts them.
	entries  *entry
	nentries int
	revoked  bool
	blocked  bool
	gen      uint64
	timer    *time.Timer
	// notice is the client-side lapse of a partitioned Conn's lease
	// (partitionNotice): it fires before timer.
	notice *time.Timer

	// adopted is set once ResumeLeaderParticipation moved the lease to
	// another Conn (adoptLease): the resumed participation's end (its
	// entry's Delete: Stop, Resign) revokes it, with every other entry
	// the earlier Conn had on it.
	adopted bool
}

// partitionNotice is how long before the store lapses a partitioned
// Conn's lease the Conn itself notices that renewal failed and gives up
// the leadership of the elections it leads on that lease, as a real
// client steps down a safety margin before the store can expire its
// session: a quarter of the lease's TTL before. Lock descriptors have no
// margin: they end at the lapse.
func partitionNotice(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// newLease returns a lease for c with ttl. Call with mu held for writing.
func (s *store) newLease(c *Conn, ttl time.Duration) *lease {
	l := &lease{c: c, ttl: ttl}
	l.view = claims.NewSession("", l)
	s.leases[l] = struct{}{}
	c.leases[l] = struct{}{}
	s.refreshLease(l)
	return l
}

// sessionLease returns c's current session, starting a new one if the last
// was lost. Call with mu held for writing.
func (s *store) sessionLease(c *Conn) *lease {
	if c.session == nil || c.session.revoked {
		c.session = s.newLease(c, s.f.opts.SessionTTL)
	}
	return c.session
}

// refreshLease starts or stops l's lapse timer according to whether its
// renewal is currently blocked. When renewal resumes, the entries whose
// holders gave them up at the partition notice are removed: nobody holds
// them any more. Call with mu held for writing.
func (s *store) refreshLease(l *lease) {
	if l.revoked {
		return
	}
	blocked := l.c.keepAlivePaused || l.c.partitioned || s.f.keepAliveBlocked.Load()
	if blocked == l.blocked {
		return
	}
	l.blocked = blocked
	l.gen++
	l.stopTimers()
	if !blocked {
		for e := l.entries; e != nil; {
			next := e.lnext
			if e.noticed {
				s.removeEntry(e)
			}
			e = next
		}
		return
	}
	gen := l.gen
	l.timer = time.AfterFunc(l.ttl, func() {
		s.lock()
		defer s.mu.Unlock()
		if l.gen == gen {
			s.revokeLease(l)
		}
	})
	if l.c.partitioned {
		l.notice = time.AfterFunc(partitionNotice(l.ttl), func() {
			s.lock()
			defer s.mu.Unlock()
			if l.gen != gen || l.revoked {
				return
			}
			for e := l.entries; e != nil; e = e.lnext {
				if e.election {
					e.noticed = true
					l.view.LoseEntry(e.q.dir, e.seq)
				}
			}
		})
	}
}

// stopTimers stops l's lapse and notice timers. Call with mu held for
// writing.
func (l *lease) stopTimers() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.notice != nil {
		l.notice.Stop()
		l.notice = nil
	}
}

// revokeLease ends l: first every claim on it (the engine's Session.Lost:
// Done channels close, leadership contexts are cancelled), then its
// entries go, handing their locks and leadership on. Call with mu held
// for writing.
func (s *store) revokeLease(l *lease) {
	if l.revoked {
		return
	}
	l.revoked = true
	l.gen++
	l.stopTimers()
	l.view.Lost()
	for e := l.entries; e != nil; {
		next := e.lnext
		s.removeEntry(e)
		e = next
	}
	delete(s.leases, l)
	delete(l.c.leases, l)
	if l.c.session == l {
		l.c.session = nil
	}
}

// adoptLease makes c renew l from now on, in place of the Conn that held
// it (ResumeLeaderParticipation), until the resumed participation ends
// (adopted: driver.Delete then revokes l). Call with mu held for writing.
func (s *store) adoptLease(l *lease, c *Conn) {
	old := l.c
	if old == c {
		return
	}
	l.adopted = true
	for e := l.entries; e != nil; e = e.lnext {
		if e.wake != nil {
			// A lock the earlier Conn waits for on l: its claim is lost
			// (l is no longer that Conn's), its wait ends now rather than
			// when the lock comes to it (or never, once that Conn closed:
			// its Close no longer ends l). The entry stays until l ends,
			// as that Conn's other entries on l do.
			s.wakeTurn(e, turnGone)
		}
	}
	delete(old.leases, l)
	if old.session == l {
		old.session = nil
	}
	l.c = c
	c.leases[l] = struct{}{}
	s.refreshLease(l)
}

// link adds e to l's entries. Call with the store's mu held for writing.
func (l *lease) link(e *entry) {
	e.lnext = l.entries
	if l.entries != nil {
		l.entries.lprev = e
	}
	l.entries = e
	l.nentries++
}

// unlink takes e off l's entries. Call with the store's mu held for
// writing, once per linked entry.
func (l *lease) unlink(e *entry) {
	if e.lprev != nil {
		e.lprev.lnext = e.lnext
	} else {
		l.entries = e.lnext
	}
	if e.lnext != nil {
		e.lnext.lprev = e.lprev
	}
	e.lprev, e.lnext = nil, nil
	l.nentries--
}
