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
	for e := s.queueAt(dir, false).first(); e != nil; e = e.snext {
		n++
	}
	return n
}

func claimsQueue(p string, election bool) claims.Queue {
	return claims.Queue{Path: p, Election: election}
}
