package consultopo

// sessionIDs returns the ids of the Conn's live sessions (tests destroy
// them to simulate session loss). It is a test hook, kept out of the
// production code.
func (c *Conn) sessionIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.sessions))
	for s := range c.sessions {
		ids = append(ids, s.id)
	}
	return ids
}
