package memorytopo

import "github.com/topokit/topokit/topo/claims"

// LockEntries returns how many lock entries the directory dir (relative
// to c's root) has in the store: tests wait on it for a Lock call to have
// queued.
func LockEntries(c *Conn, dir string) int {
	return queueLen(c, driver{c}.dir(claimsQueue(dir, false)))
}

// ElectionEntries returns how many candidate entries election name (of
// c's root) has in the store: tests wait on it for a candidate to have
// queued.
func ElectionEntries(c *Conn, name string) int {
	return queueLen(c, driver{c}.dir(claimsQueue(name, true)))
}

func queueLen(c *Conn, dir string) int {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for e := s.queues[dir].first(); e != nil; e = e.snext {
		n++
	}
	return n
}

func claimsQueue(p string, election bool) claims.Queue {
	return claims.Queue{Path: p, Election: election}
}

// CountRequests starts counting the store requests (acquisitions of the
// store's lock) of c's store and the waiters it wakes; count returns both
// since the last reset.
func CountRequests(c *Conn) (count func() (requests, wakeups int64), reset func()) {
	s := c.s
	s.counting.Store(true)
	reset = func() {
		s.requests.Store(0)
		s.wakeups.Store(0)
	}
	reset()
	return func() (int64, int64) { return s.requests.Load(), s.wakeups.Load() }, reset
}

// Awaited returns how many entries of the lock of dir (relative to c's
// root) a waiter waits on (driver.WaitGone made their gone channel, or
// CreateLock their wake channel): once it equals the number of waiters,
// each has queued behind its predecessor and needs no further request.
func Awaited(c *Conn, dir string) int {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for e := s.queues[driver{c}.dir(claimsQueue(dir, false))].first(); e != nil; e = e.snext {
		if e.gone.Load() != nil || e.wake != nil {
			n++
		}
	}
	return n
}
