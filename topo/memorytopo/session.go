package memorytopo

import (
	"time"

	"github.com/topokit/topokit/topo/claims"
)

// lease is a session (or per-lock lease) that keeps entries alive,
// renewed unless its Conn is paused or cut off or a fault blocks it,
// lapsing ttl after renewal stops. A Conn's session (Conn.session)
// holds its Lock and TryLock entries and its candidates; each LockWithTTL
// and LockName entry has a lease of its own, ending with the entry. A
// lease belongs to one Conn (c) until ResumeLeaderParticipation moves it
// (adoptLease). Guarded by the store's mu.
type lease struct {
	c   *Conn
	ttl time.Duration
	// view is the engine's Session of this lease: revokeLease declares it
	// lost before it removes the entries, so every claim on the lease
	// ends before anyone else can be granted.
	view    *claims.Session
	entries *entry // live entries, linked by lprev, lnext
	revoked bool
	blocked bool
	gen     uint64
	timer   *time.Timer
	notice  *time.Timer // a partition's notice, before timer (see refreshLease)
	// adopted is set by adoptLease: the resumed participation's end (its
	// entry's Delete) revokes the lease, with the earlier Conn's entries.
	adopted bool
}

func (s *store) newLease(c *Conn, ttl time.Duration) *lease {
	l := &lease{c: c, ttl: ttl}
	l.view = claims.NewSession("", l)
	s.leases[l] = struct{}{}
	c.leases[l] = struct{}{}
	s.refreshLease(l)
	return l
}

// refreshLease starts or stops l's timers as its renewal is blocked or
// not. When renewal resumes, the entries given up at the partition
// notice are removed: nobody holds them.
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
		// The notice: a partitioned Conn gives up the leadership of its
		// terms on l a quarter of the TTL before l lapses (Conn.Partition).
		l.notice = time.AfterFunc(l.ttl-l.ttl/4, func() {
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

func (l *lease) stopTimers() {
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.notice != nil {
		l.notice.Stop()
	}
}

// revokeLease ends l: first every claim on it (Session.Lost), then its
// entries, handing their locks and leadership on.
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

// adoptLease moves l to c (see driver.Resume).
func (s *store) adoptLease(l *lease, c *Conn) {
	old := l.c
	if old == c {
		return
	}
	l.adopted = true
	for e := l.entries; e != nil; e = e.lnext {
		if e.wake != nil {
			// The earlier Conn's wait for a lock on l ends now, its claim
			// lost, not when the lock comes to it (or never: that Conn's
			// Close no longer ends l). The entry stays until l ends.
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

// link and unlink add e to and take it off l's entries, each once per e.
func (l *lease) link(e *entry) {
	e.lnext = l.entries
	if l.entries != nil {
		l.entries.lprev = e
	}
	l.entries = e
}

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
}
