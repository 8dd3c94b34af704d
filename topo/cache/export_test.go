package cache

// PendingWrites returns the number of this Cache's completed writes that
// it still waits for its watch to deliver, for tests.
func PendingWrites(c *Cache) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, pd := range c.pending {
		n += len(pd.wants)
	}
	return n
}
