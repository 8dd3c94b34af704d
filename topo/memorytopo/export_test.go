package memorytopo

// LockEntries returns how many lock entries the directory dir (relative
// to c's root) has in the store: tests wait on it for a Lock call to have
// queued.
func LockEntries(c *Conn, dir string) int {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	d := lookupBelow(s.lookup(c.root), dir)
	if d == nil {
		return 0
	}
	n := 0
	if l := d.children[locksDir]; l != nil {
		for _, ch := range l.children {
			if ch.entry != nil {
				n++
			}
		}
	}
	return n
}

// ElectionEntries returns how many candidate entries election name (of
// c's root) has in the store: tests wait on it for a candidate to have
// queued.
func ElectionEntries(c *Conn, name string) int {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.lookup(c.full(joinFull(electionsDir, name)))
	if d == nil {
		return 0
	}
	n := 0
	for _, ch := range d.children {
		if ch.entry != nil {
			n++
		}
	}
	return n
}
